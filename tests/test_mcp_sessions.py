"""``MCPSessions``: the tools over one kept session per server, against the real test server
over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")
pytest.importorskip("mcp")

from reactgraph.tools.mcp import MCPConnectionError, MCPSessions
from tests.mcp_servers import (
    ADD_SCHEMA,
    HAS_PROC,
    NAMES,
    HttpServer,
    processes,
    stdio,
    wait_gone,
)

# The tests that count server processes read them from /proc (the MCP test modules share it).
needs_proc = pytest.mark.skipif(not HAS_PROC, reason="needs /proc")


def mcp_threads() -> list[str]:
    return [thread.name for thread in threading.enumerate() if thread.name == "mcp"]


@needs_proc
def test_kept_sessions_share_one_server_each_and_run_anywhere(http_server: HttpServer) -> None:
    tag = uuid.uuid4().hex
    with MCPSessions({"local": stdio(tag), "web": http_server.connection()}, prefix=True) as loaded:
        tools = {tool.name: tool for tool in loaded}
        assert set(tools) == {f"{server}_{name}" for server in ("local", "web") for name in NAMES}
        assert tools["local_add"].args_schema == ADD_SCHEMA
        pid = tools["local_pid"].invoke("")
        assert tools["local_pid"].invoke("") == pid  # the same server process
        assert processes(tag) == [int(pid)]
        assert tools["local_shout"].invoke("hi") == "HI"
        assert tools["web_add"].invoke('{"a": 2, "b": 3}') == "5"

        async def main() -> list[Any]:
            return [
                await tools["local_add"].ainvoke({"a": 1, "b": 2}),
                await tools["web_pid"].ainvoke({}),
                tools["local_pid"].invoke({}),  # a sync call with this loop running
            ]

        assert asyncio.run(main())[::2] == ["3", pid]
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            answers = pool.map(lambda n: tools["local_add"].invoke({"a": n, "b": 1}), range(4))
            assert list(answers) == ["1", "2", "3", "4"]
        message = tools["web_fail"].invoke(
            {"name": "web_fail", "args": {"message": "x"}, "id": "c", "type": "tool_call"}
        )
        assert (message.status, message.content) == ("error", "Error executing tool fail: x")
        for _ in range(5):
            tools["local_add"].invoke({"a": 1, "b": 1})
        assert processes(tag) == [int(pid)]  # every call on the one kept server, none started
    assert wait_gone(tag) == []
    assert mcp_threads() == []
    with pytest.raises(MCPConnectionError, match="its sessions are closed"):
        tools["web_add"].invoke({"a": 1, "b": 1})


@needs_proc
def test_a_kept_session_survives_timeouts_and_reopens_after_its_server_dies() -> None:
    tag = uuid.uuid4().hex
    with MCPSessions({"local": stdio(tag)}, call_timeout=1) as loaded:
        tools = {tool.name: tool for tool in loaded}
        pid = tools["pid"].invoke("")
        with pytest.raises(TimeoutError, match=r"^MCP tool 'slow' \(server 'local'\) gave no"):
            tools["slow"].invoke("30")
        with pytest.raises(TimeoutError):
            asyncio.run(asyncio.wait_for(tools["slow"].ainvoke("30"), 0.5))
        assert tools["pid"].invoke("") == pid  # the stdio session outlived both
        with pytest.raises(MCPConnectionError, match="the server closed the connection"):
            tools["die"].invoke("")
        assert wait_gone(tag) == []
        # The session opens again on a new server, within `timeout` (a new server takes longer
        # than this call_timeout: the first calls may time out while it starts).
        deadline = time.monotonic() + 30
        while True:
            try:
                again = tools["pid"].invoke("")
                break
            except TimeoutError:
                assert time.monotonic() < deadline
        assert again != pid
        assert processes(tag) == [int(again)]
    assert wait_gone(tag) == []


def test_a_kept_http_session_whose_server_is_gone_says_so_at_once(
    own_http_server: HttpServer,
) -> None:
    """A server that dies between calls: the HTTP client ends the session at the next request
    (the connection fails) but leaves that request waiting; the call says the server is gone
    at once, not at call_timeout. One that dies during a call goes unnoticed until
    call_timeout; the session is then opened afresh, so the next call says it is gone."""
    gone = r"^MCP server 'web' \(http://127\.0\.0\.1:\d+/mcp\): cannot connect: All"
    with MCPSessions({"web": own_http_server.connection()}, call_timeout=1) as loaded:
        tools = {tool.name: tool for tool in loaded}
        own_http_server.stop()
        with pytest.raises(MCPConnectionError, match=gone):
            tools["add"].invoke({"a": 1, "b": 1})  # the session ends
        with pytest.raises(MCPConnectionError, match=gone):
            tools["add"].invoke({"a": 1, "b": 1})  # and cannot open again
        own_http_server.start()
        assert tools["add"].invoke({"a": 1, "b": 1}) == "2"
        with pytest.raises(TimeoutError, match=r"^MCP tool 'die' \(server 'web'\) gave no"):
            tools["die"].invoke({})
        with pytest.raises(MCPConnectionError, match=gone):  # at once, not at call_timeout
            tools["add"].invoke({"a": 1, "b": 1})
    assert mcp_threads() == []


@needs_proc
def test_kept_sessions_fail_to_open_as_one_line_value_errors(http_server: HttpServer) -> None:
    tag = uuid.uuid4().hex
    servers = {"web": http_server.connection(), "mute": stdio(tag, mode="mute")}
    with pytest.raises(ValueError, match=r"^MCP server 'mute' \(.+\): no answer to the handshake"):
        MCPSessions(servers, timeout=1)
    assert wait_gone(tag) == []
    assert mcp_threads() == []
    with pytest.raises(ValueError, match=r"^MCP tool name '\w+' is offered by both server"):
        MCPSessions({"one": http_server.connection(), "two": http_server.connection()})
    assert mcp_threads() == []
