"""What of the state the model sees: a variant's ``View``, read by ``render_prompt``.

Plain data with no imports, so a variant's spec (and the command line that reads the specs)
can name its view without loading the node code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    """What of the state the model sees besides the question and the turns."""

    notes: bool = False
    """The notes block (the ``notes`` field)."""
    window: bool = False
    """Only the last ``window_turns`` turns (a setting of the variant)."""
    summary: bool = False
    """The latest summary, and only the turns since the latest compaction."""


WHOLE = View()
"""The plain view: the whole transcript."""
