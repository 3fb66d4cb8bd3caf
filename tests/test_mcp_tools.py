"""``reactgraph.tools.mcp``'s tools with a session per call (``load_mcp_tools``) at work, against
the real test server over stdio and over streamable HTTP on 127.0.0.1. Calls go over HTTP where
the transport does not matter (a stdio call starts a server process); loading is tested in
test_mcp_load.py, the graph's own use of these tools, stdio included, in test_mcp_graph.py."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")
pytest.importorskip("mcp")

from langchain_core.messages import ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient

from reactgraph.tools.mcp import MCPTool, load_mcp_tools
from tests.mcp_servers import ADD_SCHEMA, NAMES, HttpServer, stdio, text_of, wait_gone
from tests.test_mcp_sessions import needs_proc


def by_name(tools: list[Any]) -> dict[str, Any]:
    return {tool.name: tool for tool in tools}


@pytest.fixture(scope="module")
def tools(http_server: HttpServer) -> dict[str, Any]:
    """Our tools, as they are (server "local") and prefixed ``web_`` (server "web")."""
    loaded = load_mcp_tools({"local": http_server.connection()})
    return by_name(loaded + load_mcp_tools({"web": http_server.connection()}, prefix=True))


def test_load_gives_our_tools_with_the_servers_schemas(tools: dict[str, Any]) -> None:
    assert set(tools) == NAMES | {f"web_{name}" for name in NAMES}
    for name in ("add", "web_add"):
        tool = tools[name]
        assert isinstance(tool, MCPTool)
        assert tool.description == "Add two integers."
        assert tool.args == ADD_SCHEMA["properties"]
        assert tool.args_schema == ADD_SCHEMA
    assert tools["add"].server == "local"
    assert tools["web_add"].server == "web"
    assert tools["web_add"].metadata["mcp_server"] == "web"


def test_tools_run_from_sync_code_and_answer_text(tools: dict[str, Any]) -> None:
    assert tools["web_shout"].invoke({"text": "hi"}) == "HI"
    assert tools["web_shout"].invoke("hi there") == "HI THERE"  # one argument: the string is it
    assert tools["web_shout"].invoke('{"text": "json"}') == "JSON"  # ...or a JSON object of it
    assert tools["web_add"].invoke({"a": 2, "b": 3}) == "5"
    assert tools["web_add"].invoke('{"a": 2, "b": 3}') == "5"
    assert tools["web_slow"].invoke("0.01") == "slept 0.01"  # a number for a number argument
    assert tools["web_pid"].invoke("").isdigit()
    with pytest.raises(ValueError, match=r"takes a JSON object with the keys a, b; got '2 3'"):
        tools["web_add"].invoke("2 3")


def test_tools_run_from_async_code(tools: dict[str, Any]) -> None:
    async def main() -> list[Any]:
        return [
            await tools["web_add"].ainvoke('{"a": 2, "b": 3}'),
            await tools["web_shout"].ainvoke("hi"),
            tools["web_add"].invoke({"a": 1, "b": 1}),  # a sync call with this loop running
        ]

    assert asyncio.run(main()) == ["5", "HI", "2"]


def test_a_tool_call_gets_a_text_message_with_the_blocks_as_artifact(
    tools: dict[str, Any],
) -> None:
    call = {"name": "web_add", "args": {"a": 2, "b": 3}, "id": "c1", "type": "tool_call"}
    message = tools["web_add"].invoke(call)
    assert isinstance(message, ToolMessage)
    assert message.content == "5"
    assert message.status == "success"
    assert message.artifact["structured_content"] == {"result": 5}
    assert message.artifact["server"] == "web"
    assert text_of(message.artifact["content"]) == "5"


def test_a_server_error_is_text_for_the_model(tools: dict[str, Any]) -> None:
    assert tools["web_fail"].invoke("boom") == "Error executing tool fail: boom"
    call = {"name": "web_fail", "args": {"message": "x"}, "id": "c2", "type": "tool_call"}
    message = tools["web_fail"].invoke(call)
    assert (message.status, message.content) == ("error", "Error executing tool fail: x")
    invalid = tools["web_add"].invoke({"a": "x", "b": 1})
    assert invalid.startswith("Error executing tool add: 1 validation error for addArguments")


@needs_proc
def test_a_stdio_call_past_its_timeout_is_a_timeout_error_and_stops_its_server() -> None:
    """``call_timeout`` bounds a sync call; cancelling an async one (asyncio.wait_for) raises
    TimeoutError in the caller. Either way the session is torn down, and the SDK gives the
    server 2 s to exit after EOF before it signals it. That shutdown can turn the cancellation
    into ExceptionGroup([BrokenResourceError()]) in the adapters' tool; ours never lets it out.
    """
    tag = uuid.uuid4().hex
    slow = by_name(load_mcp_tools({"s": stdio(tag)}, call_timeout=1))["slow"]
    started = time.perf_counter()
    with pytest.raises(
        TimeoutError, match=r"^MCP tool 'slow' \(server 's'\) gave no answer within 1 s$"
    ):
        slow.invoke({"seconds": 120})
    assert time.perf_counter() - started < 60  # far below the 120 s the call would take
    assert wait_gone(tag) == []
    started = time.perf_counter()
    with pytest.raises(TimeoutError) as caught:
        asyncio.run(asyncio.wait_for(slow.ainvoke({"seconds": 120}), 0.5))
    assert caught.value.args == ()  # wait_for's own, not call_timeout's
    assert time.perf_counter() - started < 60  # far below the 120 s the call would take
    assert wait_gone(tag) == []


def test_an_http_server_that_dies_is_a_timeout_then_a_connection_error_until_it_is_back(
    own_http_server: HttpServer,
) -> None:
    """The streamable HTTP client does not notice a server dying during a call: the call waits
    for call_timeout (without one, sse_read_timeout: 300 s). Once the server is gone the
    adapters raise ExceptionGroup([ConnectError]), ours a one-line ConnectionError; once it is
    back on the same port, the next call simply connects again."""
    client = MultiServerMCPClient({"web": own_http_server.connection()})  # type: ignore[dict-item]
    raw = by_name(asyncio.run(client.get_tools()))
    ours = by_name(load_mcp_tools({"web": own_http_server.connection()}, call_timeout=1))
    with pytest.raises(TimeoutError, match=r"^MCP tool 'die' \(server 'web'\) gave no answer"):
        ours["die"].invoke({})
    assert own_http_server.process is not None
    assert own_http_server.process.wait(10) == 3  # it died: the silence is the client's
    with pytest.raises(BaseExceptionGroup) as caught:
        asyncio.run(raw["add"].ainvoke({"a": 1, "b": 1}))
    assert [type(e).__name__ for e in caught.value.exceptions] == ["ConnectError"]
    with pytest.raises(
        ConnectionError,
        match=r"^MCP server 'web' \(http://127\.0\.0\.1:\d+/mcp\): "
        r"cannot connect: All connection attempts failed$",
    ):
        ours["add"].invoke({"a": 1, "b": 1})
    own_http_server.start()
    assert text_of(asyncio.run(raw["add"].ainvoke({"a": 1, "b": 1}))) == "2"
    assert ours["add"].invoke({"a": 1, "b": 1}) == "2"
