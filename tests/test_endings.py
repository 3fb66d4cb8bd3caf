"""The statuses are one declaration (``reactgraph.nodes.vocabulary.endings``): the state's type, the
variants, the chat view, the console and the eval report all follow it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args, get_type_hints

from reactgraph.app import console
from reactgraph.app.eval import report
from reactgraph.nodes.chatview import chat
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.endings import ENDINGS, STATUSES, Status
from reactgraph.nodes.vocabulary.state import State
from reactgraph.spec import Variant
from reactgraph.variants import REGISTRY

ROOT = Path(__file__).resolve().parents[1]


def test_the_state_type_is_the_declaration() -> None:
    assert get_args(Status) == STATUSES == tuple(ENDINGS)
    hint = get_type_hints(State, include_extras=True)["status"]
    assert set(STATUSES) <= set(re.findall(r"'(\w+)'", repr(hint)))


def test_every_status_has_its_words_in_the_next_runs_conversation_block() -> None:
    """A run that ended without an answer is shown to the next run on its thread by its status
    (``history_runs``): a status added without its words would read "did not finish"."""
    assert set(prompts.EARLIER_STATUS) == {*STATUSES, None}
    said = [prompts.EARLIER_STATUS[s] for s in (*STATUSES, None)]
    assert len(set(said)) == len(said) and all(s.strip() for s in said)


def ends_of(spec: Variant) -> set[str]:
    """How a variant's runs can end, from what it declares: its cap, a step that can end it."""
    ends = {"answered", "stuck", "awaiting_approval", "budget_exhausted"}  # a budget: any
    ends.add("turn_limit" if spec.at_cap == "force_answer" else "stopped_early")
    if any(step.can_end for step in spec.before_model):
        ends.add("context_exhausted")
    return ends


def test_every_status_is_how_some_variant_ends() -> None:
    assert {s for spec in REGISTRY.values() for s in ends_of(spec)} == set(STATUSES)
    assert ends_of(REGISTRY["notes_compaction"]) == {
        "answered",
        "stopped_early",
        "stuck",
        "context_exhausted",
        "awaiting_approval",
        "budget_exhausted",
    }


def test_the_console_the_report_and_the_chat_view_read_it() -> None:
    for ending in ENDINGS.values():
        assert console.STATUS_STYLE[ending.status] in ("green", "yellow", "red")
        assert report._COLOURS[ending.status] == ending.colour
        assert chat.chat_ending(ending.status) == ending.chat
    assert report.STATUSES == STATUSES
    table = report.markdown_table([])
    header = table.splitlines()[0]
    assert all(status in header for status in STATUSES)


def test_every_status_the_code_sets_is_declared() -> None:
    # A status set anywhere in the node or graph code ({"status": "x"} or status="x").
    pattern = re.compile(r"""["']?status["']?\s*[:=]\s*["'](\w+)["']""")
    found = set()
    for folder in ("nodes", "graphs"):
        for path in (ROOT / folder).rglob("*.py"):
            found |= set(pattern.findall(path.read_text()))
    found -= {"finished", "interrupted", "unknown"}  # a thread's state, not how a run ended
    assert found and found <= set(STATUSES), found - set(STATUSES)
