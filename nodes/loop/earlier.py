"""The block of earlier runs a new run's prompt carries (the ``history_runs`` setting), read
from the thread's run records (``reactgraph.nodes.loop.middleware.conversation`` writes them).

Earlier runs enter a prompt as question and answer only; their turns stay in the checkpoints
and the chat view. The block is bounded: at most ``history_runs`` runs, each question and
answer cut at ``max_observation_chars`` as Observations are, so a thread of a thousand questions
costs a prompt no more than one of ``history_runs``. The compaction variants fold it into their
summary when the window fills (``reactgraph.nodes.loop.compaction``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from reactgraph.nodes.running.tool_runs import truncate
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.nodes.vocabulary.state import EarlierRun
from reactgraph.nodes.vocabulary.view import View


def earlier_records(state: Mapping[str, Any], settings: RunSettings) -> list[EarlierRun]:
    """The runs before this one the prompt carries: the last ``history_runs``, oldest first."""
    limit = settings.history_runs
    if limit <= 0:
        return []
    run = state.get("run") or 0
    records: Sequence[EarlierRun] = state.get("earlier_runs") or []
    earlier: list[EarlierRun] = []
    # From the end: only the last few records are looked at, however long the thread.
    for record in reversed(records):
        if record["run"] >= run:
            continue
        earlier.append(record)
        if len(earlier) == limit:
            break
    earlier.reverse()
    return earlier


def folded(state: Mapping[str, Any], view: View) -> bool:
    """Whether this run's summary holds the earlier conversation (a compaction made it), so the
    prompt no longer shows the block."""
    return view.summary and bool(state.get("compactions"))


@functools.lru_cache(maxsize=256)
def _runs_text(runs: tuple[tuple[str, str | None, str | None], ...], limit: int) -> str:
    parts = []
    for question, answer, status in runs:
        asked = truncate(question, limit)
        if answer is not None:
            parts.append(
                prompts.EARLIER_ANSWERED.format(question=asked, answer=truncate(answer, limit))
            )
        else:
            said = prompts.EARLIER_STATUS.get(status, prompts.EARLIER_STATUS[None])
            parts.append(prompts.EARLIER_UNANSWERED.format(question=asked, status=said))
    return "\n\n".join(parts)  # a blank line between runs


def earlier_text(state: Mapping[str, Any], settings: RunSettings) -> str:
    """The earlier runs' questions and endings as the block shows them ("" when none)."""
    records = earlier_records(state, settings)
    runs = tuple((r["question"], r["answer"], r["status"]) for r in records)
    return _runs_text(runs, settings.max_observation_chars) if runs else ""


def earlier_block(state: Mapping[str, Any], view: View, settings: RunSettings) -> str:
    """The headed block of earlier runs that goes right before the question ("" when there are
    none, or when a compaction folded them into the summary)."""
    if folded(state, view):
        return ""
    text = earlier_text(state, settings)
    return prompts.EARLIER_BLOCK.format(runs=text) if text else ""
