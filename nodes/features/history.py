"""The conversation on a thread: each run's record (its question, and its answer or how it
ended), and the block of earlier runs a new run's prompt carries (the ``history_runs`` setting).

Earlier runs enter a prompt as question and answer only; their turns stay in the checkpoints
and the chat view. The block is bounded: at most ``history_runs`` runs, each question and
answer cut at ``max_observation_chars`` as Observations are, so a thread of a thousand questions
costs a prompt no more than one of ``history_runs``. The compaction variants fold it into their
summary when the window fills (``reactgraph.nodes.features.compaction``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from reactgraph.nodes.loop import prompts
from reactgraph.nodes.loop.run_settings import RunSettings
from reactgraph.nodes.loop.state import EarlierRun
from reactgraph.nodes.loop.view import View

STORED_CHARS = 20_000
"""The longest question or answer a run record keeps (cut with the Observations' marker): what
a thread stores per run stays bounded whatever the model wrote."""


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with the marker Observations get
    (``reactgraph.nodes.running.tool_runs.truncate``'s rule)."""
    if len(text) <= limit:
        return text
    return text[:limit] + prompts.TRUNCATION_MARKER.format(cut=len(text) - limit, total=len(text))


def earlier_run(run: int, question: str, answer: str | None, status: Any) -> EarlierRun:
    """A run's record, its texts cut at ``STORED_CHARS``."""
    return EarlierRun(
        run=run,
        question=cut(question, STORED_CHARS),
        answer=None if answer is None else cut(answer, STORED_CHARS),
        status=status,
    )


def records_update(state: Mapping[str, Any], update: Mapping[str, Any]) -> list[EarlierRun]:
    """The run records a node's update writes: the run's record when it starts (its question,
    no ending yet) and again when it ends (a status is set), in place of the first."""
    if "run" in update:
        question = update.get("question", state.get("question"))
        return [earlier_run(update["run"], question or "", None, None)]
    status = update.get("status")
    run = state.get("run")
    if not status or not run:
        return []
    answer = update["answer"] if "answer" in update else state.get("answer")
    return [earlier_run(run, state.get("question") or "", answer, status)]


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
        asked = cut(question, limit)
        if answer is not None:
            parts.append(prompts.EARLIER_ANSWERED.format(question=asked, answer=cut(answer, limit)))
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
