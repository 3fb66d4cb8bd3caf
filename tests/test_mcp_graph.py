"""MCP tools inside reactgraph's graphs, through ``invoke`` and ``ainvoke`` (the ``run`` fixture),
against the real test server (tests/mcp_servers.py) over stdio and over streamable HTTP on
127.0.0.1, loaded both ways: a session per call (``load_mcp_tools``) and kept sessions
(``MCPSessions``). The HTTP server is shared by the run and each stdio server by the module;
only a test that kills its server starts one of its own. Every server listens on 127.0.0.1, and
the conftest's guard fails any in-process connection beyond loopback.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")
pytest.importorskip("mcp")

from langchain_core.tools import BaseTool

from reactgraph import ReactGraph, build_graph
from reactgraph.nodes.vocabulary import prompts
from reactgraph.tools.mcp import MCPSessions, load_mcp_tools
from tests.fakes import FakeChatModel, Runner, action, answer, fake_model
from tests.mcp_servers import HAS_PROC, HttpServer, stdio, wait_gone

# Its module fixtures start MCP servers: one pytest-xdist worker runs its tests, so once.
pytestmark = pytest.mark.xdist_group("mcp-graph")

# Bounds a call the graph gave up on: under ``invoke`` it is abandoned on a worker thread (a
# thread cannot be killed) and ends only here, taking its stdio server with it.
# Generous, so a loaded machine's slow server start is never mistaken for a hang.
CALL_TIMEOUT = 30.0
STYLES = ["per_call_stdio", "per_call_http", "kept_stdio", "kept_http"]
CLOSED = "the server closed the connection (did it exit? its stderr may say why)"


def by_name(tools: list[BaseTool]) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in tools}


@pytest.fixture(scope="module")
def per_call_stdio() -> Iterator[dict[str, BaseTool]]:
    tag = uuid.uuid4().hex
    yield by_name(load_mcp_tools({"local": stdio(tag)}, call_timeout=CALL_TIMEOUT))
    # Calls abandoned past the graph's tool timeout end by themselves, servers and all.
    if HAS_PROC:
        assert wait_gone(tag, within=CALL_TIMEOUT + 10) == []


@pytest.fixture(scope="module")
def per_call_http(http_server: HttpServer) -> dict[str, BaseTool]:
    return by_name(load_mcp_tools({"web": http_server.connection()}, call_timeout=CALL_TIMEOUT))


@pytest.fixture(scope="module")
def kept_stdio() -> Iterator[dict[str, BaseTool]]:
    tag = uuid.uuid4().hex
    with MCPSessions({"local": stdio(tag)}, call_timeout=CALL_TIMEOUT) as tools:
        yield by_name(tools)
    if HAS_PROC:
        assert wait_gone(tag) == []


@pytest.fixture(scope="module")
def kept_http(http_server: HttpServer) -> Iterator[dict[str, BaseTool]]:
    with MCPSessions({"web": http_server.connection()}, call_timeout=CALL_TIMEOUT) as tools:
        yield by_name(tools)


@pytest.fixture(params=STYLES)
def toolset(request: pytest.FixtureRequest) -> dict[str, BaseTool]:
    """The server's tools in each transport and loading style."""
    return request.getfixturevalue(request.param)


@pytest.fixture(params=[s for s in STYLES if s != "per_call_stdio"])
def cheap_toolset(request: pytest.FixtureRequest) -> dict[str, BaseTool]:
    """As ``toolset``, less the style that starts a server process for every call."""
    return request.getfixturevalue(request.param)


def graph(
    tools: dict[str, BaseTool], *replies: str, **settings: Any
) -> tuple[ReactGraph, FakeChatModel]:
    """A transcript graph with these tools, whose scripted model gives these replies."""
    model = fake_model(*replies)
    settings.setdefault("tool_timeout", CALL_TIMEOUT)
    return build_graph("transcript", model=model, tools=list(tools.values()), **settings), model


def observations(out: dict[str, Any]) -> list[str | None]:
    return [turn["observation"] for turn in out["turns"]]


def ran(
    run: Runner, tools: dict[str, BaseTool], *replies: str, **settings: Any
) -> tuple[dict[str, Any], FakeChatModel]:
    """The run of ``graph(tools, *replies, **settings)`` on a question: its output, and the
    model (its prompts)."""
    agent, model = graph(tools, *replies, **settings)
    return run(agent, {"question": "q"}), model


def run_past_a_slow_call(
    run: Runner, tools: dict[str, BaseTool], *replies: str, **settings: Any
) -> dict[str, Any]:
    """The run of a graph whose first action is ``slow[120]``, its model's replies after it
    ``replies``: it ends, answered, far below the 120 s the call would take, its first turn cut
    at the tool timeout."""
    started = time.perf_counter()
    out, _ = ran(run, tools, action("slow", "120"), *replies, **settings)
    assert time.perf_counter() - started < 60
    assert out["turns"][0]["tool_latency_s"] < 60
    assert out["status"] == "answered"
    return out


def test_one_and_multi_argument_tools_answer_with_their_text(
    toolset: dict[str, BaseTool], run: Runner
) -> None:
    out, model = ran(
        run, toolset, action("shout", "hello"), action("add", '{"a": 2, "b": 3}'), answer("HELLO 5")
    )
    assert (out["status"], out["answer"]) == ("answered", "HELLO 5")
    assert observations(out) == ["HELLO", "5", None]
    assert "Observation: HELLO" in model.prompts[1] and "Observation: 5" in model.prompts[2]


def test_bad_input_gets_a_correction_and_server_errors_are_read(
    cheap_toolset: dict[str, BaseTool], run: Runner
) -> None:
    out, _ = ran(
        run,
        cheap_toolset,
        action("add", "2, 3"),
        action("add", '{"a": "x", "b": 3}'),  # well-formed, but the server refuses it
        action("fail", "boom"),
        action("add", '{"a": 2, "b": 3}'),
        answer("5"),
    )
    assert (out["status"], out["answer"]) == ("answered", "5")
    bad, invalid, failed, good, _ = observations(out)
    assert bad == prompts.TOOL_BAD_INPUT.format(
        name="add", schema='{"a": integer, "b": integer}', problem="the input is not valid JSON."
    )
    assert invalid is not None
    assert invalid.startswith("Error executing tool add: 1 validation error for addArguments")
    assert failed == "Error executing tool fail: boom"
    assert good == "5"


def test_the_tool_timeout_holds_and_the_run_goes_on(
    cheap_toolset: dict[str, BaseTool], run: Runner
) -> None:
    out = run_past_a_slow_call(
        run,
        cheap_toolset,
        action("add", '{"a": 1, "b": 1}'),  # the server and the session still serve
        answer("ok"),
        tool_timeout=1,
    )
    assert observations(out) == [prompts.TOOL_TIMEOUT.format(name="slow", seconds=1), "2", None]


def test_the_tool_timeout_holds_for_a_call_that_starts_its_stdio_server(
    per_call_stdio: dict[str, BaseTool], run: Runner
) -> None:
    """A per-call stdio tool spends about a second starting its server, so a 1 s timeout would
    only ever cut the start: 2 s lets the call reach the server. Under ``ainvoke`` the call is
    cancelled and the loop's shutdown waits for the SDK to stop the server (up to 2 s); under
    ``invoke`` it is abandoned on its worker thread and ends at call_timeout. Either way the
    server goes (``per_call_stdio`` checks at the end of the module)."""
    out = run_past_a_slow_call(run, per_call_stdio, answer("ok"), tool_timeout=2)
    assert observations(out) == [prompts.TOOL_TIMEOUT.format(name="slow", seconds=2), None]


@pytest.mark.parametrize("style", ["per_call_stdio", "kept_stdio"])
def test_a_stdio_server_dying_mid_run_is_one_line_and_the_run_goes_on(
    style: str, run: Runner, request: pytest.FixtureRequest
) -> None:
    """The kept session opens again on a new server at the next call (a per-call tool starts
    one for every call anyway: the other tests show it)."""
    replies = [action("die", "")]
    if style == "kept_stdio":
        replies.append(action("add", '{"a": 1, "b": 1}'))
    out, _ = ran(run, request.getfixturevalue(style), *replies, answer("ok"))
    died, *rest = observations(out)
    assert died is not None and "\n" not in died
    assert died.startswith("Error: die failed: MCP server 'local' (")
    assert died.endswith(f"): {CLOSED}")
    assert rest == (["2", None] if style == "kept_stdio" else [None])
    assert out["status"] == "answered"


@pytest.fixture
def mortal_http() -> Iterator[HttpServer]:
    """An HTTP server of the test's own, for a test that ends it."""
    server = HttpServer().start()
    yield server
    server.stop()


def test_an_http_server_dying_mid_run_times_out_then_says_it_is_gone(
    mortal_http: HttpServer, run: Runner
) -> None:
    """The streamable HTTP client does not notice a server that dies during a call: that call
    ends at the tool timeout. Under ``invoke`` it is left running on the kept session; the next
    call still says at once that the server cannot be reached. (A per-call tool keeps nothing
    between calls: test_mcp_tools.py covers its server dying.)"""
    with MCPSessions({"web": mortal_http.connection()}, call_timeout=2) as tools:
        out, _ = ran(
            run,
            by_name(tools),
            action("die", ""),
            action("add", '{"a": 1, "b": 1}'),
            answer("ok"),
            tool_timeout=1,
        )
    died, gone, _ = observations(out)
    assert died == prompts.TOOL_TIMEOUT.format(name="die", seconds=1)
    assert gone == (
        f"Error: add failed: MCP server 'web' ({mortal_http.url}): "
        "cannot connect: All connection attempts failed"
    )
    assert out["status"] == "answered"
