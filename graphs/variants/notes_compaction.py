"""notes_compaction: both, for the longest runs. The notes variant's external notes and window,
plus the compaction variant's summaries when even the windowed prompt nears the context window.

Its cap is the larger of the two (60 turns) and its cap exit is the notes variant's: it stops
early with its notes saved, since the notes carry the work into the next run on the thread.
So its runs end answered, stopped_early, stuck or context_exhausted (or, like every variant's,
budget_exhausted once a run budget is spent).
"""

from __future__ import annotations

from reactgraph.nodes.vocabulary.run_settings import NotesCompactionSettings
from reactgraph.nodes.vocabulary.view import View
from reactgraph.spec import Variant
from reactgraph.variants.compaction import COMPACT_HISTORY
from reactgraph.variants.notes import LOAD_NOTES, UPDATE_NOTES

NOTES_COMPACTION = Variant(
    name="notes_compaction",
    summary="Notes and a window, plus summaries when even the window nears the context limit.",
    settings_type=NotesCompactionSettings,
    defaults={"max_turns": 60},
    before_model=(LOAD_NOTES, COMPACT_HISTORY),
    actions=(UPDATE_NOTES,),
    view=View(notes=True, window=True, summary=True),
    at_cap="stop_run",
    objects=frozenset({"store", "token_counter", "summarizer"}),
)
