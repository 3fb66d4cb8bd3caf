"""MCP tools through the real langchain-mcp-adapters, against real MCP servers
(tests/mcp_servers.py) started as subprocesses: over stdio, and over streamable HTTP on 127.0.0.1.

The ``test_adapters_*`` tests pin what the adapters themselves do (the facts the graph's tool
node builds on); the others test ``reactgraph.tools.mcp`` on top of them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")
pytest.importorskip("mcp")

from langchain_core.messages import ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools as adapters_load_tools
from mcp.shared.exceptions import McpError

from reactgraph.tools.mcp import (
    MCPConnectionError,
    MCPSessions,
    MCPTool,
    aload_mcp_tools,
    load_mcp_tools,
    normalize_servers,
    render_content,
)

SERVER = Path(__file__).with_name("mcp_servers.py")
NAMES = {"shout", "add", "slow", "fail", "pid", "die"}
ADD_SCHEMA = {
    "properties": {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    },
    "required": ["a", "b"],
    "title": "addArguments",
    "type": "object",
}


def stdio(tag: str = "", mode: str = "stdio") -> dict[str, Any]:
    """The adapters' connection for the test server over stdio; ``tag`` marks its processes."""
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(SERVER), mode, "--tag", tag or uuid.uuid4().hex],
    }


def processes(tag: str) -> list[int]:
    """The live processes whose command line holds ``tag``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                status = Path(f"/proc/{entry}/stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if tag.encode() in cmdline and status != "Z":
                found.append(int(entry))
    return found


def wait_gone(tag: str, within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while (left := processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


needs_proc = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpServer:
    """The test server over streamable HTTP, as a subprocess on a free loopback port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        self.stop()  # and reap the one before, if it died
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "http", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the MCP HTTP server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def connection(self) -> dict[str, Any]:
        return {"transport": "streamable_http", "url": self.url}


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    server = HttpServer().start()
    yield server
    server.stop()


@pytest.fixture
def own_http_server() -> Iterator[HttpServer]:
    """A server of the test's own, for tests that end it."""
    server = HttpServer().start()
    yield server
    server.stop()


def adapters_tools(connection: dict[str, Any]) -> dict[str, Any]:
    client = MultiServerMCPClient({"test": connection})  # type: ignore[dict-item]
    return {tool.name: tool for tool in asyncio.run(client.get_tools())}


@pytest.fixture(scope="module", params=["stdio", "http"])
def raw_any(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The adapters' own tools (per-call sessions), over each transport."""
    if request.param == "stdio":
        return request.getfixturevalue("raw_stdio")
    return request.getfixturevalue("raw")


@pytest.fixture(scope="module")
def raw(http_server: HttpServer) -> dict[str, Any]:
    """The adapters' own tools over HTTP (what does not depend on the transport is tested
    there: a stdio call costs a new server process)."""
    return adapters_tools(http_server.connection())


@pytest.fixture(scope="module")
def raw_stdio() -> dict[str, Any]:
    return adapters_tools(stdio())


@pytest.fixture(scope="module")
def tools(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Our tools from both servers: the stdio one as is, the HTTP one prefixed ``web_``."""
    http = request.getfixturevalue("http_server")
    loaded = load_mcp_tools({"local": stdio()}) + load_mcp_tools(
        {"web": http.connection()}, prefix=True
    )
    return {tool.name: tool for tool in loaded}


def text_of(content: list[dict[str, Any]]) -> str:
    assert [block["type"] for block in content] == ["text"] * len(content)
    return "".join(block["text"] for block in content)


# ---------------------------------------------------------------------------------------------
# The adapters' own behaviour


def test_adapters_load_names_descriptions_and_json_schemas(raw_any: dict[str, Any]) -> None:
    raw = raw_any
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


def test_adapters_stdio_call_starts_a_new_server_each_time(raw_stdio: dict[str, Any]) -> None:
    async def pids() -> list[str]:
        return [text_of(await raw_stdio["pid"].ainvoke({})) for _ in range(2)]

    first, second = asyncio.run(pids())
    assert first != second


def test_adapters_persistent_session_keeps_one_server() -> None:
    client = MultiServerMCPClient({"test": stdio()})  # type: ignore[dict-item]

    async def main() -> list[str]:
        async with client.session("test") as session:
            tools = {tool.name: tool for tool in await adapters_load_tools(session)}
            return [text_of(await tools["pid"].ainvoke({})) for _ in range(3)]

    pids = asyncio.run(main())
    assert len(set(pids)) == 1


def test_adapters_per_call_tools_run_on_any_event_loop(raw_stdio: dict[str, Any]) -> None:
    """asyncio.run(tool.ainvoke(...)) on worker threads: each call is its own session."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [
            pool.submit(asyncio.run, raw_stdio["add"].ainvoke({"a": n, "b": 1})) for n in (1, 2)
        ]
        assert [text_of(f.result(60)) for f in futures] == ["2", "3"]


def test_adapters_persistent_session_serves_other_threads_through_its_own_loop() -> None:
    """A session belongs to the event loop (and task) that opened it. Awaiting its tools on
    another loop is unsafe (seen both hanging and answering); handing the coroutine to the
    session's loop with run_coroutine_threadsafe works."""
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
        add = box["tools"]["add"]
        for n in range(3):
            future = asyncio.run_coroutine_threadsafe(add.ainvoke({"a": n, "b": 1}), box["loop"])
            assert text_of(future.result(10)) == str(n + 1)
    finally:
        done.set()
        owner.join(30)


@needs_proc
def test_adapters_stdio_timeout_may_surface_as_exception_group_and_stops_the_server() -> None:
    """Cancelling a stdio call tears the session down, and the SDK waits up to 2 s for the
    server to exit after EOF before it signals it. The shutdown can also turn the cancellation
    into ExceptionGroup([BrokenResourceError()]): asyncio.wait_for then raises that instead of
    TimeoutError. Seen both ways; our tools always raise TimeoutError."""
    tag = uuid.uuid4().hex
    slow = adapters_tools(stdio(tag))["slow"]
    started = time.perf_counter()
    with pytest.raises((TimeoutError, BaseExceptionGroup)) as caught:
        asyncio.run(asyncio.wait_for(slow.ainvoke({"seconds": 30}), 1))
    assert time.perf_counter() - started < 10
    if isinstance(caught.value, BaseExceptionGroup):
        assert [type(e).__name__ for e in caught.value.exceptions] == ["BrokenResourceError"]
    assert wait_gone(tag) == []


def test_adapters_stdio_server_dying_mid_call_raises_connection_closed(
    raw_stdio: dict[str, Any],
) -> None:
    with pytest.raises(McpError, match=r"^Connection closed$"):
        asyncio.run(asyncio.wait_for(raw_stdio["die"].ainvoke({}), 30))
    assert text_of(asyncio.run(raw_stdio["add"].ainvoke({"a": 1, "b": 1}))) == "2"  # fresh server


def test_adapters_http_server_gone_then_back(own_http_server: HttpServer) -> None:
    tools = adapters_tools(own_http_server.connection())
    own_http_server.stop()
    with pytest.raises(BaseExceptionGroup) as caught:
        asyncio.run(tools["add"].ainvoke({"a": 1, "b": 1}))
    assert [type(e).__name__ for e in caught.value.exceptions] == ["ConnectError"]
    own_http_server.start()  # same port: the next call simply connects again
    assert text_of(asyncio.run(tools["add"].ainvoke({"a": 1, "b": 1}))) == "2"


def test_adapters_http_server_dying_mid_call_never_answers(own_http_server: HttpServer) -> None:
    """The streamable HTTP client does not notice the server's death during a call: without a
    timeout of the caller's the call waits for sse_read_timeout (300 s by default)."""
    tools = adapters_tools(own_http_server.connection())
    with pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(tools["die"].ainvoke({}), 3))
    assert own_http_server.process is not None
    assert own_http_server.process.wait(10) == 3


def test_adapters_persistent_session_does_not_reconnect_after_death() -> None:
    client = MultiServerMCPClient({"test": stdio()})  # type: ignore[dict-item]
    errors: list[BaseException] = []

    async def main() -> None:
        async with client.session("test") as session:
            tools = {tool.name: tool for tool in await adapters_load_tools(session)}
            for name, args in (("die", {}), ("add", {"a": 1, "b": 1})):
                try:
                    await asyncio.wait_for(tools[name].ainvoke(args), 30)
                except Exception as exc:
                    errors.append(exc)

    asyncio.run(main())
    assert [type(e).__name__ for e in errors] == ["McpError", "ClosedResourceError"]
    assert str(errors[0]) == "Connection closed"


def _median_ms(call: Any, times: int) -> float:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_persistent_sessions_are_far_cheaper_than_per_call_ones(
    transport: str, request: pytest.FixtureRequest
) -> None:
    connection = (
        stdio() if transport == "stdio" else request.getfixturevalue("http_server").connection()
    )
    client = MultiServerMCPClient({"test": connection})  # type: ignore[dict-item]
    per_call = {tool.name: tool for tool in asyncio.run(client.get_tools())}

    async def persistent() -> float:
        async with client.session("test") as session:
            tools = {tool.name: tool for tool in await adapters_load_tools(session)}
            samples = []
            for _ in range(5):
                started = time.perf_counter()
                await tools["add"].ainvoke({"a": 1, "b": 1})
                samples.append((time.perf_counter() - started) * 1000)
            return statistics.median(samples)

    kept = asyncio.run(persistent())
    fresh = _median_ms(lambda: asyncio.run(per_call["add"].ainvoke({"a": 1, "b": 1})), 2)
    print(f"\n{transport}: per-call session {fresh:.0f} ms, persistent session {kept:.0f} ms")
    assert kept < fresh


# ---------------------------------------------------------------------------------------------
# reactgraph.tools.mcp


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
    assert tools["add"].invoke({"a": 2, "b": 3}) == "5"  # over stdio
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
            await tools["add"].ainvoke('{"a": 2, "b": 3}'),  # over stdio
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
def test_a_cancelled_stdio_call_is_a_clean_timeout_and_stops_its_server() -> None:
    tag = uuid.uuid4().hex
    slow = {t.name: t for t in load_mcp_tools({"s": stdio(tag)})}["slow"]
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        asyncio.run(asyncio.wait_for(slow.ainvoke({"seconds": 30}), 1))
    assert time.perf_counter() - started < 8
    assert wait_gone(tag) == []


@needs_proc
def test_call_timeout_bounds_a_sync_call_and_stops_its_server() -> None:
    tag = uuid.uuid4().hex
    slow = {t.name: t for t in load_mcp_tools({"s": stdio(tag)}, call_timeout=1)}["slow"]
    started = time.perf_counter()
    with pytest.raises(
        TimeoutError, match=r"^MCP tool 'slow' \(server 's'\) gave no answer within 1 s$"
    ):
        slow.invoke({"seconds": 30})
    assert time.perf_counter() - started < 8
    assert wait_gone(tag) == []


def test_a_sync_call_abandoned_on_a_worker_thread_ends_by_itself() -> None:
    """The graph's sync path waits on a worker thread and gives up at its own timeout; the
    call left behind still ends at call_timeout, taking its server with it."""
    tag = uuid.uuid4().hex
    slow = {t.name: t for t in load_mcp_tools({"s": stdio(tag)}, call_timeout=2)}["slow"]
    pool = concurrent.futures.ThreadPoolExecutor(1)
    future = pool.submit(slow.invoke, {"seconds": 30})
    with pytest.raises(concurrent.futures.TimeoutError):
        future.result(0.5)
    with pytest.raises(TimeoutError):
        future.result(10)
    pool.shutdown()
    if Path("/proc").exists():
        assert wait_gone(tag) == []


def test_stdio_server_death_is_a_connection_error_and_the_next_call_starts_afresh(
    tools: dict[str, Any],
) -> None:
    with pytest.raises(ConnectionError) as caught:
        tools["die"].invoke({})
    assert str(caught.value).startswith("MCP server 'local' (")
    assert str(caught.value).endswith(
        "): the server closed the connection (did it exit? its stderr may say why)"
    )
    assert "\n" not in str(caught.value)
    assert tools["add"].invoke({"a": 1, "b": 1}) == "2"


def test_http_server_gone_is_a_connection_error_until_it_is_back(
    own_http_server: HttpServer,
) -> None:
    add = {t.name: t for t in load_mcp_tools({"web": own_http_server.connection()})}["add"]
    own_http_server.stop()
    with pytest.raises(
        ConnectionError,
        match=r"^MCP server 'web' \(http://127\.0\.0\.1:\d+/mcp\): "
        r"cannot connect: All connection attempts failed$",
    ):
        add.invoke({"a": 1, "b": 1})
    own_http_server.start()
    assert add.invoke({"a": 1, "b": 1}) == "2"


def test_http_server_dying_mid_call_ends_at_call_timeout(own_http_server: HttpServer) -> None:
    loaded = load_mcp_tools({"web": own_http_server.connection()}, call_timeout=2)
    die = {t.name: t for t in loaded}["die"]
    with pytest.raises(TimeoutError, match="gave no answer within 2 s"):
        die.invoke({})


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


def test_the_mcp_servers_wrapper_defaults_the_transport() -> None:
    wrapped = {
        "mcpServers": {
            "local": {"command": "python", "env": {"X": "1"}, "autoApprove": []},
            "web": {"url": "http://127.0.0.1:1/mcp", "type": "streamable-http"},
            "off": {"command": "x", "disabled": True},
        }
    }
    checked = normalize_servers(wrapped)
    assert checked["web"].pop("httpx_client_factory") is not None
    assert checked == {
        "local": {"transport": "stdio", "command": "python", "env": {"X": "1"}, "args": []},
        "web": {"transport": "streamable_http", "url": "http://127.0.0.1:1/mcp"},
    }


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ([], r"^MCP servers must be an object of server name -> connection, got list$"),
        ({}, r"^no MCP servers configured$"),
        ({"x": "python"}, r"^MCP server 'x': expected an object with its connection, got str$"),
        (
            {"x": {"transport": "carrier-pigeon", "url": "http://127.0.0.1/"}},
            r"^MCP server 'x': unknown transport 'carrier-pigeon' \(known: http, sse, stdio, ",
        ),
        (
            {"x": {"transport": "stdio", "args": []}},
            r"^MCP server 'x': a stdio server needs 'command', a non-empty string$",
        ),
        (
            {"x": {"transport": "stdio", "command": "python", "args": "-V"}},
            r"^MCP server 'x': 'args' must be a list of strings, got '-V'$",
        ),
        (
            {"x": {"transport": "streamable_http", "url": "127.0.0.1:80/mcp"}},
            r"^MCP server 'x': a streamable_http server needs 'url' starting with http:// or https://",
        ),
        (
            {"x": {"transport": "stdio", "command": "python", "disabled": True}},
            r"^MCP server 'x': unknown key\(s\) 'disabled' for transport 'stdio' \(allowed: ",
        ),
        (
            {"x": {"args": []}},
            r"^MCP server 'x': no transport, and neither 'command' \(stdio\) nor 'url' \(HTTP\)",
        ),
        ({"mcpServers": []}, r"^'mcpServers' must be an object, got list$"),
    ],
)
def test_bad_configs_are_one_line_value_errors(servers: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_mcp_tools(servers)


def test_bad_files_are_one_line_value_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(
        ValueError,
        match=r"missing\.json: cannot read the MCP servers file: No such file or directory$",
    ):
        load_mcp_tools(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"x": {"command": "python",}}')
    with pytest.raises(
        ValueError,
        match=r"broken\.json: not JSON: "
        r"Expecting property name enclosed in double quotes at line 1 column 28$",
    ):
        load_mcp_tools(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"x": {"transport": "pipe"}}')
    with pytest.raises(
        ValueError, match=r"^\S*wrong\.json: MCP server 'x': unknown transport 'pipe'"
    ):
        load_mcp_tools(wrong)


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
    assert time.perf_counter() - started < 8
    assert wait_gone(tag) == []


@pytest.mark.parametrize("value", [0, -1, float("inf"), True, "5"])
def test_timeouts_must_be_positive_numbers(value: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be"):
        load_mcp_tools({"x": {"command": "python"}}, timeout=value)
    with pytest.raises(ValueError, match="call_timeout must be"):
        load_mcp_tools({"x": {"command": "python"}}, call_timeout=value)


def test_render_content() -> None:
    assert render_content("plain") == "plain"
    assert render_content([]) == ""
    blocks = [
        {"type": "text", "text": "one"},
        {"type": "image", "base64": "AAAA", "mime_type": "image/png"},
        {"type": "file", "url": "file:///tmp/x.pdf"},
        {"type": "text", "text": "two"},
    ]
    assert render_content(blocks) == "one\n[image: image/png]\n[file: file:///tmp/x.pdf]\ntwo"


# ---------------------------------------------------------------------------------------------
# Kept sessions


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
        started = time.perf_counter()
        for _ in range(5):
            tools["local_add"].invoke({"a": 1, "b": 1})
        assert (time.perf_counter() - started) / 5 < 1.0  # a new stdio server takes seconds
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


def test_a_kept_http_session_notices_its_server_is_gone(own_http_server: HttpServer) -> None:
    """Over HTTP a call cut off by the server's death never ends by itself: after the
    timeout the session is opened afresh, so the next call says the server is gone."""
    with MCPSessions({"web": own_http_server.connection()}, call_timeout=2) as loaded:
        tools = {tool.name: tool for tool in loaded}
        with pytest.raises(TimeoutError):
            tools["die"].invoke({})
        started = time.perf_counter()
        with pytest.raises(
            MCPConnectionError,
            match=r"^MCP server 'web' \(http://127\.0\.0\.1:\d+/mcp\): cannot connect: All",
        ):
            tools["add"].invoke({"a": 1, "b": 1})
        assert time.perf_counter() - started < 2
        own_http_server.start()
        assert tools["add"].invoke({"a": 1, "b": 1}) == "2"
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
