"""compaction: the loop that summarizes its history when the prompt nears the context window and
goes on in a fresh window; a forced answer at the cap."""

from __future__ import annotations

from reactgraph.nodes.view import View
from reactgraph.settings import Setting
from reactgraph.spec import Step, Variant
from reactgraph.variants.common import common

COMPACTION_THRESHOLD = Setting(
    "compaction_threshold",
    float,
    0.75,
    "Compact when the prompt reaches this share of the context window (0-1].",
    above=0,
    maximum=1,
)
KEEP_TURNS = Setting(
    "keep_turns", int, 3, "Recent turns kept word for word through a compaction.", minimum=0
)
CONTEXT_WINDOW = Setting(
    "context_window",
    int,
    None,
    "The model's context window in tokens (default: looked up from the model's name).",
    minimum=1,
    optional=True,
    unset="looked up",
)
COMPACTION_SETTINGS = (COMPACTION_THRESHOLD, KEEP_TURNS, CONTEXT_WINDOW)

COMPACT_HISTORY = Step(
    "compact_history", "reactgraph.nodes.compaction", every_turn=True, can_end=True
)

COMPACTION = Variant(
    name="compaction",
    summary="Summarizes its history near the context window and goes on in a fresh window.",
    settings=(*common(max_turns=60), *COMPACTION_SETTINGS),
    statuses=("answered", "turn_limit", "stuck", "context_exhausted", "awaiting_approval"),
    before_model=(COMPACT_HISTORY,),
    view=View(summary=True),
    at_cap="force_answer",
    objects=frozenset({"token_counter", "summarizer"}),
)
