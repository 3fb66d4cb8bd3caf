"""What langchain-mcp-adapters themselves do, against the real test server over stdio and over
streamable HTTP on 127.0.0.1: the facts that ``reactgraph.tools.mcp`` and the graph's tool node
build on. A change in the adapters or the SDK shows here first."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")
pytest.importorskip("mcp")

from langchain_core.messages import ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools as adapters_load_tools
from mcp.shared.exceptions import McpError

from tests.mcp_servers import ADD_SCHEMA, NAMES, HttpServer, stdio, text_of

# Its module fixtures start MCP servers: one pytest-xdist worker runs its tests, so once.
pytestmark = pytest.mark.xdist_group("mcp-adapters")


def adapters_tools(connection: dict[str, Any]) -> dict[str, Any]:
    client = MultiServerMCPClient({"test": connection})  # type: ignore[dict-item]
    return {tool.name: tool for tool in asyncio.run(client.get_tools())}


@pytest.fixture(scope="module")
def raw(http_server: HttpServer) -> dict[str, Any]:
    """The adapters' own tools (a session per call) over HTTP: what does not depend on the
    transport is tested there, as a stdio call costs a new server process."""
    return adapters_tools(http_server.connection())


@pytest.fixture(scope="module")
def raw_stdio() -> dict[str, Any]:
    return adapters_tools(stdio())


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_adapters_load_names_descriptions_and_json_schemas(
    transport: str, request: pytest.FixtureRequest
) -> None:
    raw = request.getfixturevalue("raw_stdio" if transport == "stdio" else "raw")
    assert set(raw) == NAMES
    assert raw["shout"].description == "Return the text upper-cased."
    assert raw["add"].description == "Add two integers."
    assert raw["shout"].args == {"text": {"title": "Text", "type": "string"}}
    assert raw["add"].args == ADD_SCHEMA["properties"]
    assert raw["slow"].args == {"seconds": {"title": "Seconds", "type": "number"}}
    assert raw["pid"].args == {}
    # args_schema is the server's JSON schema as a plain dict, not a pydantic model.
    assert raw["add"].args_schema == ADD_SCHEMA
    assert raw["add"].response_format == "content_and_artifact"
    assert raw["add"].coroutine is not None
    assert raw["add"].func is None


def test_adapters_answer_with_content_blocks_and_structured_artifact(raw: dict[str, Any]) -> None:
    async def main() -> tuple[Any, Any]:
        shout = await raw["shout"].ainvoke({"text": "hi"})
        call = {"name": "add", "args": {"a": 2, "b": 3}, "id": "c1", "type": "tool_call"}
        return shout, await raw["add"].ainvoke(call)

    shout, message = asyncio.run(main())
    assert isinstance(shout, list)
    assert shout[0]["type"] == "text"
    assert shout[0]["text"] == "HI"
    assert set(shout[0]) == {"type", "text", "id"}
    assert isinstance(message, ToolMessage)
    assert text_of(message.content) == "5"
    assert message.artifact == {"structured_content": {"result": 5}}


def test_adapters_refuse_string_input_even_as_json(raw: dict[str, Any]) -> None:
    for tool, text in ((raw["add"], '{"a": 2, "b": 3}'), (raw["shout"], "hi")):
        with pytest.raises(ValueError, match="String tool inputs are not allowed"):
            asyncio.run(tool.ainvoke(text))


def test_adapters_tools_are_async_only(raw: dict[str, Any]) -> None:
    with pytest.raises(NotImplementedError, match=r"^StructuredTool does not support sync"):
        raw["shout"].invoke({"text": "hi"})


def test_adapters_return_a_server_error_as_content(raw: dict[str, Any]) -> None:
    async def main() -> tuple[Any, Any, Any]:
        call = {"name": "fail", "args": {"message": "boom"}, "id": "c2", "type": "tool_call"}
        return (
            await raw["fail"].ainvoke({"message": "boom"}),
            await raw["fail"].ainvoke(call),
            await raw["add"].ainvoke({"a": "x", "b": 3}),  # the server validates, not the client
        )

    plain, message, invalid = asyncio.run(main())
    assert text_of(plain) == "Error executing tool fail: boom"
    assert message.status == "error"
    assert text_of(message.content) == "Error executing tool fail: boom"
    assert text_of(invalid).startswith("Error executing tool add: 1 validation error")


def test_adapters_stdio_calls_are_each_a_new_server_on_any_event_loop(
    raw_stdio: dict[str, Any],
) -> None:
    """asyncio.run(tool.ainvoke(...)) on two worker threads at once: each call is a session,
    and a server process, of its own, so a per-call tool belongs to no event loop."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        pids = [pool.submit(asyncio.run, raw_stdio["pid"].ainvoke({})) for _ in range(2)]
        first, second = (text_of(future.result(60)) for future in pids)
    assert first.isdigit() and second.isdigit() and first != second


def test_adapters_persistent_session_is_one_server_for_any_thread_and_dies_with_it() -> None:
    """A session belongs to the event loop (and task) that opened it. Awaiting its tools on
    another loop is unsafe (seen both hanging and answering); handing the coroutine to the
    session's loop with run_coroutine_threadsafe works. After its server died the session is
    dead for good: the call raises McpError("Connection closed"), later ones
    ClosedResourceError."""
    client = MultiServerMCPClient({"test": stdio()})  # type: ignore[dict-item]
    ready, done = threading.Event(), threading.Event()
    box: dict[str, Any] = {}

    async def hold() -> None:
        async with client.session("test") as session:
            box["tools"] = {tool.name: tool for tool in await adapters_load_tools(session)}
            box["loop"] = asyncio.get_running_loop()
            ready.set()
            while not done.is_set():
                await asyncio.sleep(0.02)

    owner = threading.Thread(target=asyncio.run, args=(hold(),))
    owner.start()
    try:
        assert ready.wait(60)
        tools, loop = box["tools"], box["loop"]

        def call(name: str, args: dict[str, Any]) -> Any:
            return asyncio.run_coroutine_threadsafe(tools[name].ainvoke(args), loop).result(30)

        assert [text_of(call("add", {"a": n, "b": 1})) for n in range(3)] == ["1", "2", "3"]
        assert len({text_of(call("pid", {})) for _ in range(3)}) == 1  # one server
        errors = []
        for name, args in (("die", {}), ("add", {"a": 1, "b": 1})):
            try:
                call(name, args)
            except Exception as exc:
                errors.append(exc)
        assert [type(e).__name__ for e in errors] == ["McpError", "ClosedResourceError"]
        assert isinstance(errors[0], McpError) and str(errors[0]) == "Connection closed"
    finally:
        done.set()
        owner.join(30)
