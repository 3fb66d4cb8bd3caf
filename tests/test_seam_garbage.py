"""A turn through the middleware makes no reference cycles: what a node's run makes for its calls
(its scope, each model and tool call's request) is freed when the run is done with it, not left
for the garbage collector.

A cycle a call is not a leak, but it is a cost: each holds what it reaches (the request, the
node's scope, its ledger, LangGraph's runtime) until a collection, and the collections it brings
on grow with the heap (a per-call cycle in the seam's handlers left 142 objects a turn and a
full collection in a 200-turn run). Counted, not timed: with the collector off, the scopes and
requests still alive after a run of many turns.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langgraph.prebuilt.tool_node import ToolCallRequest

from reactgraph import build_graph
from reactgraph.nodes.loop.middleware.scope import Scope
from tests.fakes import Runner, ToolLog, action, answer, call, fake_model

VARIANTS = ["transcript", "notes", "compaction", "notes_compaction"]
TURNS = 20
# What may still be alive when the run returns, whatever its length: the last nodes' own (a
# tool's worker thread lets go of its last call just after the run sees its result; 2 to 3 seen).
# A cycle a call keeps two scopes a turn: 41 in this run, with the seam's old handler builder.
AT_MOST = 5


class Passing(AgentMiddleware):
    """An application's middleware around both calls, doing nothing: one more layer."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await handler(request)


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The collector off for the test (its collections would free what the cycles hold)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def alive() -> dict[str, int]:
    """How many scopes and requests the process holds."""
    kinds = {"scopes": Scope, "model requests": ModelRequest, "tool requests": ToolCallRequest}
    objects = gc.get_objects()
    return {name: sum(isinstance(o, kind) for o in objects) for name, kind in kinds.items()}


@pytest.mark.parametrize("middleware", [False, True], ids=["own", "with_application"])
@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.usefixtures("collector_off")
def test_the_turns_of_a_run_leave_nothing_to_the_garbage_collector(
    run: Runner, variant: str, action_format: str, middleware: bool
) -> None:
    if action_format == "text":
        replies: list[Any] = [action("echo", str(i)) for i in range(TURNS)]
    else:
        replies = [call("echo", {"text": str(i)}, call_id=f"c{i}") for i in range(TURNS)]
    graph = build_graph(
        variant,
        model=fake_model(*replies, answer("done")),
        tools=[ToolLog().echo()],
        action_format=action_format,
        max_turns=TURNS + 2,
        stuck_repeats=TURNS + 2,
        middleware=[Passing()] if middleware else [],
    )
    before = alive()
    out = run(graph, {"question": "q"})
    assert out["status"] == "answered", out["status"]
    assert len(out["turns"]) == TURNS + 1
    left = {name: n - before[name] for name, n in alive().items()}
    assert all(n <= AT_MOST for n in left.values()), left
