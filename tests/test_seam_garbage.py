"""A turn through the middleware makes no reference cycles: what a node's run allocates is freed
when it ends, not left for the garbage collector.

A cycle a turn is not a leak, but it is a cost: each one holds what it reaches (a request, the
node's scope, LangGraph's runtime) until a collection, and the collections it brings on grow
with the heap (a per-call cycle in the seam's handlers cost 0.2-0.6 ms a turn: a full
collection in a 200-turn run). Counted, not timed: the objects ``gc.collect`` finds
unreachable after runs of a few and of many turns, with the collector off between.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents.middleware import AgentMiddleware

from reactgraph import build_graph
from tests.fakes import Runner, ToolLog, action, answer, call, fake_model

VARIANTS = ["transcript", "notes", "compaction", "notes_compaction"]
FEW, MANY = 3, 23
# What a run leaves to the collector whatever its length (LangGraph's and the graph's own, made
# once per run): the difference between the two runs is what the extra turns left.
PER_TURN = 1
# A run's own garbage may still be reachable at its last collection (a tool's worker thread
# lets go of its last call just after the run sees its result) and be counted with the next
# run's: a pair is measured again, up to this many times. A cycle a turn shows in every pair.
ATTEMPTS = 3


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
    """The collector off for the test (its collections would free the cycles counted)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _left(run: Runner, variant: str, action_format: str, turns: int, middleware: list) -> int:
    if action_format == "text":
        replies: list[Any] = [action("echo", str(i)) for i in range(turns)]
        replies.append(answer("done"))
    else:
        replies = [call("echo", {"text": str(i)}, call_id=f"c{i}") for i in range(turns)]
        replies.append(answer("done"))
    graph = build_graph(
        variant,
        model=fake_model(*replies),
        tools=[ToolLog().echo()],
        action_format=action_format,
        max_turns=turns + 2,
        stuck_repeats=turns + 2,
        middleware=middleware,
    )
    gc.collect()
    out = run(graph, {"question": "q"})
    assert out["status"] == "answered", out["status"]
    assert len(out["turns"]) == turns + 1
    return gc.collect()


@pytest.mark.parametrize("middleware", [False, True], ids=["own", "with_application"])
@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.usefixtures("collector_off")
def test_the_turns_of_a_run_leave_nothing_to_the_garbage_collector(
    run: Runner, variant: str, action_format: str, middleware: bool
) -> None:
    chain = [Passing()] if middleware else []
    _left(run, variant, action_format, FEW, chain)  # what a run before leaves, the same for both
    differences = []
    for _ in range(ATTEMPTS):
        few = _left(run, variant, action_format, FEW, chain)
        many = _left(run, variant, action_format, MANY, chain)
        differences.append(many - few)
        if many - few <= PER_TURN * (MANY - FEW):
            return
    raise AssertionError(f"{MANY - FEW} more turns left {differences} more objects")
