"""The overhead bench measures what it says: every contender runs the whole script (so none
does less work), and the models are the same for the contenders compared (the prebuilt agent's
calls carry the tools' schemas and a usage, as reactgraph's tool_calls format's do). No timing
here: bench/ measures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def overhead() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        import overhead

        yield overhead
    finally:
        sys.path.remove(str(BENCH))


def test_every_contender_runs_the_whole_script(overhead: ModuleType) -> None:
    for name, run in overhead.CONTENDERS.items():
        assert run(3) == 4, name  # three actions, then the final answer


def test_the_floor_has_the_products_three_nodes_a_turn(overhead: ModuleType) -> None:
    graph = overhead.floor_graph(overhead.scripted(overhead.react_replies(2)))
    assert set(graph.get_graph().nodes) == {
        "__start__",
        "call_model",
        "parse_reply",
        "run_tool",
        "__end__",
    }
    steps = list(graph.stream({"messages": [("user", "q")]}, stream_mode="updates"))
    assert [next(iter(step)) for step in steps] == [
        *["call_model", "parse_reply", "run_tool"] * 2,
        "call_model",
        "parse_reply",
    ]


def test_the_prebuilt_agent_and_the_tool_calls_format_call_the_same_model(
    overhead: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = []

    def recorded(turns: int) -> object:
        made.append(model_of(turns))
        return made[-1]

    model_of = overhead.tool_calling_model
    monkeypatch.setattr(overhead, "tool_calling_model", recorded)
    overhead.run_prebuilt(2)
    overhead.run_native(2)
    prebuilt, ours = made
    assert type(prebuilt) is type(ours)
    for model in made:
        assert all(
            call["options"]["tools"][0]["function"]["name"] == "echo" for call in model.calls
        )
    assert overhead.scripted(["x"]).fixed_usage == overhead.USAGE
