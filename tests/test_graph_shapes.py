"""Each variant has the designed nodes, and its exits are conditional edges in the drawing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reactgraph import VARIANTS, build_graph
from tests.fakes import fake_model

# A run budget may end the run after any node but the model call and start_run.
SHAPES = {
    "transcript": (
        {"start_run", "call_model", "parse_reply", "approve_action", "run_tool", "force_answer"},
        {
            ("parse_reply", "__end__"),
            ("parse_reply", "approve_action"),
            ("approve_action", "run_tool"),
            ("approve_action", "call_model"),
            ("approve_action", "force_answer"),
            ("parse_reply", "run_tool"),
            ("run_tool", "call_model"),
            ("run_tool", "force_answer"),
            ("approve_action", "__end__"),
            ("run_tool", "__end__"),
        },
    ),
    "notes": (
        {
            "start_run",
            "load_notes",
            "call_model",
            "parse_reply",
            "approve_action",
            "run_tool",
            "update_notes",
            "stop_run",
        },
        {
            ("parse_reply", "__end__"),
            ("parse_reply", "approve_action"),
            ("approve_action", "run_tool"),
            ("approve_action", "call_model"),
            ("approve_action", "stop_run"),
            ("parse_reply", "run_tool"),
            ("parse_reply", "update_notes"),
            ("run_tool", "call_model"),
            ("run_tool", "stop_run"),
            ("update_notes", "call_model"),
            ("update_notes", "stop_run"),
            ("approve_action", "__end__"),
            ("run_tool", "__end__"),
            ("update_notes", "__end__"),
            ("load_notes", "call_model"),
            ("load_notes", "__end__"),
        },
    ),
    "compaction": (
        {
            "start_run",
            "compact_history",
            "call_model",
            "parse_reply",
            "approve_action",
            "run_tool",
            "force_answer",
        },
        {
            ("compact_history", "__end__"),
            ("compact_history", "call_model"),
            ("parse_reply", "__end__"),
            ("parse_reply", "approve_action"),
            ("approve_action", "run_tool"),
            ("approve_action", "compact_history"),
            ("approve_action", "force_answer"),
            ("parse_reply", "run_tool"),
            ("run_tool", "compact_history"),
            ("run_tool", "force_answer"),
            ("approve_action", "__end__"),
            ("run_tool", "__end__"),
        },
    ),
    "notes_compaction": (
        {
            "start_run",
            "load_notes",
            "compact_history",
            "call_model",
            "parse_reply",
            "approve_action",
            "run_tool",
            "update_notes",
            "stop_run",
        },
        {
            ("compact_history", "__end__"),
            ("compact_history", "call_model"),
            ("parse_reply", "__end__"),
            ("parse_reply", "approve_action"),
            ("approve_action", "run_tool"),
            ("approve_action", "compact_history"),
            ("approve_action", "stop_run"),
            ("parse_reply", "run_tool"),
            ("parse_reply", "update_notes"),
            ("run_tool", "compact_history"),
            ("run_tool", "stop_run"),
            ("update_notes", "compact_history"),
            ("update_notes", "stop_run"),
            ("approve_action", "__end__"),
            ("run_tool", "__end__"),
            ("update_notes", "__end__"),
            ("load_notes", "compact_history"),
            ("load_notes", "__end__"),
        },
    ),
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
