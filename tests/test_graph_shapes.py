"""Each variant has the designed nodes, and its exits are conditional edges in the drawing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reactgraph import VARIANTS, build_graph
from tests.fakes import fake_model


def shape(notes: bool, compaction: bool) -> tuple[set[str], set[tuple[str, str]]]:
    """A variant's nodes and conditional exits. Every variant has the loop (start_run, call_model,
    parse_reply, approve_action, run_tool). Compaction puts compact_history before every model
    call. The notes variants load the notes and update them, and end a run that must stop at
    stop_run (the others at force_answer). A run budget may end the run after any node but the
    model call and start_run."""
    enter = "compact_history" if compaction else "call_model"  # the way to the next model call
    stop = "stop_run" if notes else "force_answer"
    nodes = {"start_run", "call_model", "parse_reply", "approve_action", "run_tool", stop}
    exits = {
        ("parse_reply", "__end__"),
        ("parse_reply", "approve_action"),
        ("parse_reply", "run_tool"),
        ("approve_action", "run_tool"),
        ("approve_action", enter),
        ("approve_action", stop),
        ("approve_action", "__end__"),
        ("run_tool", enter),
        ("run_tool", stop),
        ("run_tool", "__end__"),
    }
    if compaction:
        nodes.add("compact_history")
        exits |= {("compact_history", "call_model"), ("compact_history", "__end__")}
    if notes:
        nodes |= {"load_notes", "update_notes"}
        exits |= {
            ("parse_reply", "update_notes"),
            ("update_notes", enter),
            ("update_notes", stop),
            ("update_notes", "__end__"),
            ("load_notes", enter),
            ("load_notes", "__end__"),
        }
    return nodes, exits


SHAPES = {
    "transcript": shape(notes=False, compaction=False),
    "notes": shape(notes=True, compaction=False),
    "compaction": shape(notes=False, compaction=True),
    "notes_compaction": shape(notes=True, compaction=True),
}


def test_every_registered_variant_has_a_shape() -> None:
    assert set(SHAPES) == set(VARIANTS)


@pytest.mark.parametrize("variant", sorted(SHAPES))
def test_nodes_and_conditional_exits(variant: str) -> None:
    nodes, conditional = SHAPES[variant]
    drawing = build_graph(variant, model=fake_model(), tools=[]).get_graph()
    assert set(drawing.nodes) - {"__start__", "__end__"} == nodes
    edges = {(e.source, e.target) for e in drawing.edges if e.conditional}
    assert edges == conditional
    mermaid = drawing.draw_mermaid()
    for source, target in conditional:
        assert f"{source} -.-> {target};" in mermaid


@pytest.mark.parametrize("variant", sorted(SHAPES))
@pytest.mark.parametrize("ladder", [False, True])
def test_nodes_read_every_field_the_graph_can_have(variant: str, ladder: bool) -> None:
    """Every node reads the whole state but the fields its graph never has: the model ladder's
    without a ladder, the carried-over notes' flag without notes (LangGraph reads each field of
    a node's input at every step, an absent one at the cost of an exception)."""
    from reactgraph.nodes.vocabulary.state import State

    rungs = [fake_model()] if ladder else []
    graph = build_graph(variant, model=fake_model(), tools=[], escalate_to=rungs)
    never = set() if ladder else {"rung", "escalations"}
    if "notes" not in variant:
        never.add("resumed_notes")
    for name in SHAPES[variant][0]:
        assert set(graph.nodes[name].channels) == set(State.__annotations__) - never, name
    # The graph's own channels: the ladder's only with a ladder (LangGraph works on each channel
    # at every step, one never written too).
    channels = {k for k in graph.channels if not k.startswith(("__", "branch:"))}
    assert channels == set(State.__annotations__) - (never - {"resumed_notes"})


def test_the_states_annotations_are_types_not_strings() -> None:
    """LangGraph reads the state's type hints at every build: strings would be parsed and
    evaluated anew each time (``from __future__ import annotations`` in the state's module)."""
    from reactgraph.nodes.vocabulary.state import InputState, State

    for schema in (State, InputState):
        strings = [k for k, v in schema.__annotations__.items() if isinstance(v, str)]
        assert not strings, strings


SNAPSHOTS = Path(__file__).parent / "snapshots"


@pytest.mark.parametrize("variant", sorted(SHAPES))
def test_drawing_matches_its_snapshot(variant: str) -> None:
    """Each variant's Mermaid drawing against the committed one, so a change to the wiring shows
    up as a readable diff. After an intended change: ``UPDATE_SNAPSHOTS=1 pytest`` this test."""
    mermaid = build_graph(variant, model=fake_model(), tools=[]).get_graph().draw_mermaid()
    snapshot = SNAPSHOTS / f"{variant}.mmd"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        snapshot.write_text(mermaid)
    assert snapshot.exists(), f"no snapshot for {variant}: run with UPDATE_SNAPSHOTS=1"
    assert mermaid == snapshot.read_text()
