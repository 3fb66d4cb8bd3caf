"""The seam's wrappers as a call's handlers: the first of the list outermost, a wrapper that is
a generator function or a plain one alike, and a middleware's ``wraps`` leaving its wrapper out
of a call it has nothing to do in (the loop's own: the grammar when the run asks for none, the
traces with no tracer provider, the approval gate with nothing to approve)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from reactgraph import build_graph
from reactgraph.nodes.loop.middleware.approval import ApprovalGate
from reactgraph.nodes.loop.middleware.decoding import Decoding
from reactgraph.nodes.loop.middleware.scope import Scope
from reactgraph.nodes.loop.middleware.seam import Chain, Middleware
from reactgraph.nodes.loop.middleware.tracing import Tracing
from reactgraph.nodes.running.tool_io import visible_args
from reactgraph.nodes.vocabulary.effects import drive
from tests.fakes import Runner, ToolLog, action, answer, fake_model


class Named(Middleware):
    """Says when its wrapper is entered and left, in ``log``; ``wrapping``: what its ``wraps``
    answers (None: it has no ``wraps`` of its own)."""

    def __init__(self, tag: str, log: list[str]) -> None:
        self.tag, self.log = tag, log

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        self.log.append(f"{self.tag} in")
        response = yield from call(request)
        self.log.append(f"{self.tag} out")
        return response


class Plain(Named):
    """A wrapper that is no generator function: it returns the handler's body."""

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        self.log.append(f"{self.tag} plain")
        return call(request)


class Choosing(Named):
    """Wraps a call only when the node's run says so (``scope.marks["wrap"]``)."""

    def wraps(self, hook: str, scope: Scope) -> bool:
        self.log.append(f"{self.tag} asked {hook}")
        return bool(scope.marks.get("wrap"))


def a_scope(wrap: bool) -> Scope:
    scope = Scope("call_model", {}, {}, SimpleNamespace(), SimpleNamespace())  # type: ignore[arg-type]
    scope.marks["wrap"] = wrap
    return scope


def sent(log: list[str]) -> Any:
    def send(request: Any) -> Iterator[Any]:
        log.append(f"sent {request}")
        return "reply"
        yield  # a body: a generator that yields no effect

    return send


@pytest.mark.parametrize("wrap", [True, False])
def test_a_wrapper_is_left_out_of_the_calls_its_middleware_does_not_wrap(wrap: bool) -> None:
    log: list[str] = []
    chain = Chain([Named("a", log), Choosing("b", log), Plain("c", log)])
    assert drive(chain.model_call("request", a_scope(wrap), sent(log))) == "reply"
    middle = ["b in"] if wrap else []
    after = ["b out"] if wrap else []
    # The first outermost; b asked when the call reaches it.
    assert log == [
        "a in",
        "b asked wrap_model_call",
        *middle,
        "c plain",
        "sent request",
        *after,
        "a out",
    ]


class Retrying(Named):
    """Calls its handler twice, the node's run changed in between (as a model ladder moves to
    a rung with settings of its own after a fault)."""

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        yield from call(request)
        scope.marks["wrap"] = True
        return (yield from call(request))


def test_a_middleware_is_asked_at_each_actual_call() -> None:
    log: list[str] = []
    chain = Chain([Retrying("r", log), Choosing("b", log)])
    assert drive(chain.model_call("request", a_scope(False), sent(log))) == "reply"
    asked = "b asked wrap_model_call"
    assert log == [asked, "sent request", asked, "b in", "sent request", "b out"]


def test_a_middleware_with_no_wraps_of_its_own_is_never_asked() -> None:
    log: list[str] = []
    chain = Chain([Named("a", log)])
    drive(chain.model_call("request", a_scope(False), sent(log)))
    assert log == ["a in", "sent request", "a out"]


def test_a_call_through_the_loops_own_middleware_alone_leaves_the_applications_out() -> None:
    log: list[str] = []
    application = Named("app", log)
    application.application = True  # type: ignore[attr-defined]
    chain = Chain([application, Named("own", log)])
    drive(chain.model_call("request", a_scope(True), sent(log), own_only=True))
    assert log == ["own in", "sent request", "own out"]


@pytest.fixture
def entered(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often each of the loop's own wrappers is entered (patched before the graph is
    built: the chain binds its wrappers once), with no tracer provider (the process's own is
    global: a worker may hold one another test set)."""
    from reactgraph.nodes.loop.middleware import tracing

    monkeypatch.setattr(tracing, "enabled", lambda: False)
    counts: dict[str, int] = {}
    for kind, hook in [
        (Decoding, "wrap_model_call"),
        (Tracing, "wrap_model_call"),
        (Tracing, "wrap_tool_call"),
        (ApprovalGate, "wrap_tool_call"),
    ]:
        original = getattr(kind, hook)
        name = f"{kind.__name__}.{hook}"

        def counted(self: Any, request: Any, call: Any, scope: Any, *, _o=original, _n=name) -> Any:
            counts[_n] = counts.get(_n, 0) + 1
            return (yield from _o(self, request, call, scope))

        monkeypatch.setattr(kind, hook, counted)
    return counts


def test_the_loops_own_wrappers_with_nothing_to_do_are_left_out(
    run: Runner, entered: dict[str, int]
) -> None:
    graph = build_graph(
        "transcript",
        model=fake_model(action("echo", "1"), action("echo", "2"), answer("done")),
        tools=[ToolLog().echo()],
    )
    out = run(graph, {"question": "q"})
    assert out["status"] == "answered"
    assert len(out["turns"]) == 3
    # No grammar asked for, no tracer provider, no tool to approve: none of them entered.
    assert entered == {}


def test_the_grammar_wraps_each_turns_call_when_the_run_asks_for_it(
    run: Runner, entered: dict[str, int]
) -> None:
    graph = build_graph(
        "transcript",
        model=fake_model(action("echo", "1"), answer("done")),
        tools=[ToolLog().echo()],
        constrained_decoding="gbnf",
    )
    out = run(graph, {"question": "q"})
    assert out["status"] == "answered"
    assert entered == {"Decoding.wrap_model_call": 2}


def test_a_tools_visible_arguments_are_read_again_when_its_schema_changes() -> None:
    from langchain_core.tools import StructuredTool
    from pydantic import BaseModel

    class One(BaseModel):
        text: str

    class Two(BaseModel):
        text: str
        times: int

    tool = StructuredTool.from_function(
        lambda **kw: "ok", name="t", description="a tool", args_schema=One
    )
    first = visible_args(tool)
    first["added"] = {}  # a caller's copy: the next reading is not changed by it
    assert list(visible_args(tool)) == ["text"]
    tool.args_schema = Two
    assert list(visible_args(tool)) == ["text", "times"]
    assert list(visible_args(tool, frozenset({"times"}))) == ["text"]


def test_a_tool_request_made_without_its_setattr_is_langgraphs_own() -> None:
    """``acting.tool_request`` fills LangGraph's ``ToolCallRequest`` past its ``__init__``: it
    must be the request that ``__init__`` makes, field for field (fails if LangGraph adds a
    field, or stores them otherwise)."""
    import dataclasses

    from langgraph.prebuilt.tool_node import ToolCallRequest

    from reactgraph.nodes.loop.acting import tool_request

    names = [f.name for f in dataclasses.fields(ToolCallRequest)]
    assert names == ["tool_call", "tool", "state", "runtime"]
    call = {"name": "echo", "args": {"text": "x"}, "id": "t/1/1", "type": "tool_call"}
    tool, state, runtime = object(), {"turns": []}, object()
    made = tool_request(call, tool, state, runtime)  # type: ignore[arg-type]
    assert type(made) is ToolCallRequest
    assert made == ToolCallRequest(tool_call=call, tool=tool, state=state, runtime=runtime)  # type: ignore[arg-type]
    assert made.override(state={}).state == {}
