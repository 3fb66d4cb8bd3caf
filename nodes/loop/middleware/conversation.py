"""The conversation on a thread, as middleware: each run's record (its question, and its
answer or how it ended), written in the thread's ``earlier_runs`` when the run starts and when
it ends. What a later run's prompt shows of them is ``reactgraph.nodes.loop.earlier``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reactgraph.nodes.loop.middleware.scope import Scope
from reactgraph.nodes.loop.middleware.seam import Middleware
from reactgraph.nodes.running.tool_runs import truncate
from reactgraph.nodes.vocabulary.state import EarlierRun

STORED_CHARS = 20_000
"""The longest question or answer a run record keeps (cut with the Observations' marker): what
a thread stores per run stays bounded whatever the model wrote."""


def earlier_run(run: int, question: str, answer: str | None, status: Any) -> EarlierRun:
    """A run's record, its texts cut at ``STORED_CHARS``."""
    return EarlierRun(
        run=run,
        question=truncate(question, STORED_CHARS),
        answer=None if answer is None else truncate(answer, STORED_CHARS),
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


class Conversation(Middleware):
    """The thread's conversation as middleware: each run's record, written when it starts and
    when it ends, in the thread's ``earlier_runs`` (the prompt's block is ``earlier_block``)."""

    def observe(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        records = records_update(state, update)
        return {**update, "earlier_runs": records} if records else update
