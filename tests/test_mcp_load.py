"""Loading MCP tools (``load_mcp_tools``, ``aload_mcp_tools``): from a config or a file, from
sync or async code, and the one-line errors of servers that cannot be loaded."""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")
pytest.importorskip("mcp")

from reactgraph.tools.mcp import MCPSessions, aload_mcp_tools, load_mcp_tools
from tests.mcp_servers import NAMES, HttpServer, free_port, stdio, wait_gone
from tests.test_mcp_sessions import needs_proc


def test_loading_from_a_file_in_either_layout(tmp_path: Path, http_server: HttpServer) -> None:
    plain = tmp_path / "servers.json"
    plain.write_text(json.dumps({"web": http_server.connection()}))
    wrapped = tmp_path / "claude_desktop_config.json"
    wrapped.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "web": {"type": "http", "url": http_server.url, "alwaysAllow": ["add"]},
                    "off": {"command": "no-such-command", "disabled": True},
                },
                "globalShortcut": "Ctrl+Space",
            }
        )
    )
    for source in (plain, str(wrapped)):
        loaded = load_mcp_tools(source)
        assert {tool.name for tool in loaded} == NAMES
        assert {tool.server for tool in loaded} == {"web"}


def test_async_loading(http_server: HttpServer) -> None:
    loaded = asyncio.run(aload_mcp_tools({"web": http_server.connection()}))
    assert {tool.name for tool in loaded} == NAMES


def test_loading_with_a_loop_running(http_server: HttpServer) -> None:
    async def main() -> list[Any]:
        return load_mcp_tools({"web": http_server.connection()})

    assert len(asyncio.run(main())) == len(NAMES)


def test_a_tool_name_offered_twice_is_refused_unless_prefixed(http_server: HttpServer) -> None:
    servers = {"one": http_server.connection(), "two": {"url": http_server.url}}
    with pytest.raises(
        ValueError,
        match=r"^MCP tool name '\w+' is offered by both server 'one' and server 'two'; "
        r"load with prefix=True",
    ):
        load_mcp_tools(servers)
    names = {tool.name for tool in load_mcp_tools(servers, prefix=True)}
    assert names == {f"{server}_{name}" for server in ("one", "two") for name in NAMES}


def test_servers_that_cannot_start_are_one_line_value_errors() -> None:
    cases = [
        (
            {"transport": "stdio", "command": "/no/such/command", "args": []},
            r"^MCP server 'x' \(/no/such/command\): "
            r"cannot start '/no/such/command': No such file or directory$",
        ),
        (
            {"transport": "stdio", "command": sys.executable, "args": ["-c", "pass"]},
            r"^MCP server 'x' \(\S+ -c pass\): the server closed the connection \(did it exit\?",
        ),
        (
            {"transport": "streamable_http", "url": f"http://127.0.0.1:{free_port()}/mcp"},
            r"^MCP server 'x' \(http://127\.0\.0\.1:\d+/mcp\): "
            r"cannot connect: All connection attempts failed$",
        ),
    ]
    for connection, message in cases:
        with pytest.raises(ValueError, match=message) as caught:
            load_mcp_tools({"x": connection})
        assert "\n" not in str(caught.value)
        assert caught.value.__cause__ is None


def test_a_wrong_http_path_names_the_status(http_server: HttpServer) -> None:
    url = http_server.url.replace("/mcp", "/nope")
    with pytest.raises(
        ValueError, match=r"^MCP server 'x' \(http://\S+/nope\): HTTP 404: no MCP session or"
    ):
        load_mcp_tools({"x": {"transport": "streamable_http", "url": url}})


@needs_proc
def test_a_server_that_never_answers_the_handshake_times_out_and_is_stopped() -> None:
    tag = uuid.uuid4().hex
    started = time.perf_counter()
    with pytest.raises(
        ValueError,
        match=r"^MCP server 'mute' \(.+ mute --tag \w+\): no answer to the handshake within 1 s$",
    ):
        load_mcp_tools({"mute": stdio(tag, mode="mute")}, timeout=1)
    assert time.perf_counter() - started < 60  # the handshake never comes: bounded
    assert wait_gone(tag) == []


START_BOUND = 300.0


def _tools(*names: str) -> list[Any]:
    from langchain_core.tools import StructuredTool

    return [StructuredTool.from_function(lambda text: text, name=n, description=n) for n in names]


def test_tool_names_no_reply_can_write_are_mended_and_still_called(run: Any) -> None:
    from reactgraph import build_graph
    from tests.fakes import action, answer, fake_model
    from tests.mcp_servers import ODD_NAMES

    servers = {"odd": stdio(mode="odd")}
    # A start bound for a loaded machine: a stdio server's start is seconds of imports.
    loaded = load_mcp_tools(servers, timeout=START_BOUND)
    assert {tool.name for tool in loaded} == set(ODD_NAMES.values())
    # Kept sessions: a session per call would start a server per call.
    with MCPSessions(servers, timeout=START_BOUND, call_timeout=START_BOUND) as kept:
        assert {tool.name for tool in kept} == set(ODD_NAMES.values())
        model = fake_model(action("my_tool", "hi"), action("new_line", "abc"), answer("done"))
        graph = build_graph("transcript", model=model, tools=kept, tool_timeout=START_BOUND)
        out = run(graph, {"question": "q"})
    assert [t["observation"] for t in out["turns"][:2]] == ["HI", "cba"]
    assert "my_tool" in model.prompts[0] and "my tool" not in model.prompts[0]


def test_tool_names_that_cannot_be_mended_are_refused_naming_the_server() -> None:
    from reactgraph.tools.mcp.load import named

    pairs = named({"s": {}}, [_tools("my tool", "new\nline", "3d", "ok.")], False, "")
    assert [mended for _, _, mended in pairs] == ["my_tool", "new_line", "tool_3d", "ok"]
    for bad in ("∑", "x" * 65, "x" * 10_000):
        with pytest.raises(ValueError, match=r"^MCP server 's' offers a tool named .+, which "):
            named({"s": {}}, [_tools(bad)], False, "")


def test_a_name_offered_twice_by_one_server_does_not_suggest_a_prefix() -> None:
    from reactgraph.tools.mcp.load import named

    for names, shown in ((("add", "add"), ""), (("my tool", "My-Tool"), " (as 'my tool' and")):
        for prefix in (False, True):
            with pytest.raises(ValueError) as caught:
                named({"s": {}}, [_tools(*names)], prefix, "")
            message = str(caught.value)
            assert message.startswith("MCP server 's' offers two tools named "), message
            assert shown in message and "cannot tell them apart" in message
            assert "load with prefix=True" not in message
    # Two servers whose prefixed names still meet: renaming a server is what helps.
    with pytest.raises(ValueError, match="even with their server's name as prefix: rename one"):
        named({"a": {}, "a_b": {}}, [_tools("a_b_c"), _tools("a_b_c")], True, "")
