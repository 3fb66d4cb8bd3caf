"""MCP tools loaded the standard way, ``MultiServerMCPClient(...).get_tools()`` (no wrapper of
ours), passed straight to ``build_graph``: zero, one and several arguments, over stdio and over
streamable HTTP on 127.0.0.1, under ``invoke`` and ``ainvoke`` (the ``run`` fixture)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")
pytest.importorskip("mcp")

from langchain_mcp_adapters.client import MultiServerMCPClient

from reactgraph import build_graph
from tests.fakes import Runner, action, answer, fake_model
from tests.mcp_servers import HttpServer, stdio

# Its module fixtures start MCP servers: one pytest-xdist worker runs its tests, so once.
pytestmark = pytest.mark.xdist_group("mcp-standard")


def standard_tools(connection: dict[str, Any]) -> list[Any]:
    client = MultiServerMCPClient({"test": connection})  # type: ignore[dict-item]
    return asyncio.run(client.get_tools())


@pytest.fixture(scope="module")
def stdio_tools() -> list[Any]:
    return standard_tools(stdio())


@pytest.fixture(scope="module")
def http_tools(http_server: HttpServer) -> list[Any]:
    return standard_tools(http_server.connection())


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_standard_mcp_tools_work_as_they_come(
    transport: str, run: Runner, request: pytest.FixtureRequest
) -> None:
    tools = request.getfixturevalue(f"{transport}_tools")
    model = fake_model(
        action("shout", "hello there"),
        action("add", '{"a": 2, "b": 3}'),
        action("pid", ""),
        action("slow", "0.01"),
        action("fail", "no luck"),
        answer("done"),
    )
    graph = build_graph("transcript", model=model, tools=tools, tool_timeout=30)
    result = run(graph, {"question": "Q?"})
    shout, add, pid, slow, fail = (turn["observation"] for turn in result["turns"][:5])
    assert shout == "HELLO THERE"
    assert add == "5"
    assert pid is not None
    assert pid.isdigit()
    assert slow == "slept 0.01"
    assert fail is not None
    assert "no luck" in fail  # the adapters' own error text, or ours around theirs
    assert result["status"] == "answered"
    # The adapters' content_and_artifact: the structured result is kept with the turn.
    assert result["turns"][1]["artifact"] == {"structured_content": {"result": 5}}
    assert '{"a": integer, "b": integer}' in model.prompts[0]
