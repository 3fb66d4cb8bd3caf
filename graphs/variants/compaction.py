"""compaction: the loop that summarizes its history when the prompt nears the context window and
goes on in a fresh window; a forced answer at the cap."""

from __future__ import annotations

from reactgraph.nodes.vocabulary.run_settings import CompactionSettings
from reactgraph.nodes.vocabulary.view import View
from reactgraph.spec import Step, Variant

COMPACT_HISTORY = Step(
    "compact_history", "reactgraph.nodes.loop.compaction", every_turn=True, can_end=True
)

COMPACTION = Variant(
    name="compaction",
    summary="Summarizes its history near the context window and goes on in a fresh window.",
    settings_type=CompactionSettings,
    defaults={"max_turns": 60},
    before_model=(COMPACT_HISTORY,),
    view=View(summary=True),
    at_cap="force_answer",
    objects=frozenset({"token_counter", "summarizer"}),
)
