"""How a run can end, declared once: the state's ``status`` type, and for each status what the
chat view says, how the console shows it and which colour the eval report plots it in.

Adding a status: add its ``Ending`` below, its name to ``Status`` and its words for the next
run's earlier-conversation block to ``prompts.EARLIER_STATUS`` (a test checks the three
agree), then set it from the node that ends the run that way (``awaiting_approval`` alone is
never set: it is read from a thread stopped at an approval,
``reactgraph.nodes.vocabulary.standing``). The state, the chat view, the console and the eval
report all read it from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from reactgraph.nodes.vocabulary import prompts

Status = Literal[
    "answered",
    "turn_limit",
    "stuck",
    "stopped_early",
    "context_exhausted",
    "awaiting_approval",
    "budget_exhausted",
]


@dataclass(frozen=True)
class Ending:
    """One way a run can end."""

    status: Status
    tone: Literal["good", "partial", "bad"]
    """How it went: the console's colour (green, yellow, red) follows from it."""
    colour: str
    """Its colour in the eval report's plot."""
    chat: str | None
    """The chat view's last AI message for a run that ended without an answer (None: the run's
    answer is the last message)."""


ENDINGS: dict[str, Ending] = {
    e.status: e
    for e in (
        Ending("answered", "good", "#2e7d32", None),  # a Final Answer
        Ending("turn_limit", "partial", "#f9a825", None),  # a forced answer at the turn cap
        Ending("stuck", "bad", "#c62828", prompts.CHAT_STUCK),  # the same action again and again
        # Stopped at the turn cap, the notes saved for the next run on the thread.
        Ending("stopped_early", "partial", "#ef6c00", prompts.CHAT_STOPPED_EARLY),
        # Even a fresh window no longer fits.
        Ending("context_exhausted", "bad", "#6a1b9a", prompts.CHAT_CONTEXT_EXHAUSTED),
        # Not an end: a run stopped before an Action for a person's decision (the ``approve``
        # setting) says so, where nobody is there to decide (a batch, an eval, ``threads``).
        # Its state's ``status`` stays None: the run goes on once the person decides.
        Ending("awaiting_approval", "partial", "#0277bd", None),
        # A run budget (tokens, cost, time) was spent: no further model call or tool ran.
        Ending("budget_exhausted", "bad", "#5d4037", prompts.CHAT_BUDGET_EXHAUSTED),
    )
}
STATUSES: tuple[Status, ...] = tuple(ENDINGS)  # type: ignore[arg-type]
"""Every status, in the order reports list them."""
AWAITING: Status = "awaiting_approval"
"""A run stopped before an Action for a person's decision
(``reactgraph.nodes.vocabulary.standing``)."""


def figure(value: float) -> str:
    """A spend or a limit as a person reads it: ``1,472``; a fraction to 4 significant
    digits (``12.35``, ``0.01235``)."""
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


def budget_fields(record: Mapping[str, Any]) -> dict[str, str]:
    """A spent budget's record (the state's ``budget``) as the fields of the ``BUDGET_*``
    and ``CHAT_BUDGET_*`` templates: its words, its setting, what was spent of its limit."""
    budget = str(record["budget"])
    spent = record["spent"]
    return {
        "name": prompts.BUDGET_NAMES.get(budget, "budget"),
        "budget": budget,
        "spent": figure(round(spent, 1) if budget == "max_run_seconds" else spent),
        "limit": figure(record["limit"]),
        "unit": prompts.BUDGET_SPENT_UNITS.get(budget, ""),
    }


def chat_ending(status: Any, budget: Mapping[str, Any] | None = None) -> str | None:
    """The chat view's last message for a run that ended ``status`` without an answer (None
    for an answer); a spent budget's names the budget, its limit and what was spent."""
    ending = ENDINGS.get(status) if isinstance(status, str) else None
    if ending is None or ending.chat is None:
        return None
    if status == "budget_exhausted" and budget:
        return prompts.CHAT_BUDGET_SPENT.format(**budget_fields(budget))
    return ending.chat
