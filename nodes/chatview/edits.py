"""Editing an earlier question from a chat client: where its fork starts.

Agent Chat UI (LangGraph's ``useStream``, ``fetchStateHistory: true``) reads a thread's history
with a limit, its 10 newest checkpoints, and edits a human message by starting a run with the
edited text from the parent of the oldest state it read that holds the message
(``getMessagesMetadata``: ``firstSeenState.parent_checkpoint``). A run writes a checkpoint at
every step (14 for the demo question), so a question asked before those 10 is "first seen" in
the oldest state read, in the middle of a later run: the fork kept the old question, added the
edited one after it, and its prompt said the interrupted run "did not finish". Every question
asked before the newest checkpoints gets that same fork point, so nothing the client sends
tells them apart: the history it reads has to hold each question's first state.

So a read of a thread's history that stops short of its start (``limit`` reached, no
``before`` or ``filter``: what the LangGraph server's history endpoint does with the client's
limit) also yields, after the newest checkpoints, the state in which each earlier question of
the newest checkpoint's branch first appears, newest first: the step that took the run's input
(for a ``{"question": ...}`` input, the step after, where the run wrote its human message).
Its parent is the checkpoint the question's run started from, so the client's edit forks
there, as an SDK client's fork does: the question is replaced with every later exchange, the
screen and the next prompt agree, whatever the number of checkpoints a run writes. The client
keeps the newest checkpoints for its view of the thread (the added states hang from parents it
never read); a message it finds only in an added state shows no branch switcher.

Bounded: at most ``EDITABLE_QUESTIONS`` states are added (an older question's edit forks where
the client alone would), after walking back at most ``MAX_WALKED`` checkpoints, one read each.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.types import StateSnapshot

EDITABLE_QUESTIONS = 20
"""The most earlier questions whose first states a limited history read adds."""
MAX_WALKED = 5_000
"""The most checkpoints a limited history read walks back through to find them."""
# LangGraph's names: a checkpoint that took a run's input, and the channel that holds it.
_INPUT = "input"
_START = "__start__"


@dataclass(frozen=True)
class Read:
    """Read one checkpoint of the thread (None when it is not there)."""

    saver: BaseCheckpointSaver
    config: RunnableConfig

    def run(self) -> CheckpointTuple | None:
        return self.saver.get_tuple(self.config)

    async def arun(self) -> CheckpointTuple | None:
        return await self.saver.aget_tuple(self.config)


@dataclass(frozen=True)
class _Step:
    """A checkpoint of the branch: its config, how it was written, whether the read holds it."""

    config: RunnableConfig
    source: Any
    shown: bool


def _id(config: RunnableConfig | None) -> str | None:
    return ((config or {}).get("configurable") or {}).get("checkpoint_id")


def clipped(
    shown: Sequence[StateSnapshot],
    config: RunnableConfig,
    filter: Mapping[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
) -> bool:
    """Whether a history read is a client's view of a thread cut at its ``limit``: the newest
    checkpoints of a whole thread (not a page after ``before``, not filtered, not a subgraph's),
    as many as the limit."""
    configurable = config.get("configurable") or {}
    whole = not configurable.get("checkpoint_ns") and not configurable.get("checkpoint_id")
    return bool(whole and limit and not filter and before is None and len(shown) >= limit)


def _shown_step(state: StateSnapshot) -> _Step:
    return _Step(state.config, state.metadata and state.metadata.get("source"), True)


def _branch_in(shown: Sequence[StateSnapshot]) -> tuple[list[_Step], str | None]:
    """The branch inside the read: the newest checkpoint and its ancestors the read holds,
    newest first, and the id of the oldest one's parent (None at the thread's start)."""
    by_id = {_id(state.config): state for state in shown}
    newer = [_shown_step(shown[0])]
    parent = _id(shown[0].parent_config)
    while parent in by_id:
        state = by_id[parent]
        newer.append(_shown_step(state))
        parent = _id(state.parent_config)
    return newer, parent


def _first_unshown(saved: CheckpointTuple, newer: list[_Step]) -> RunnableConfig | None:
    """When ``saved`` is where a question was put in (its child, ``newer[-1]``, not): the
    config of the state the question first appears in (that child for a chat's message, the
    next one else), if the read does not hold it; else None."""
    child = newer[-1]
    if saved.metadata.get("source") != _INPUT or child.source == _INPUT:
        return None
    start = saved.checkpoint.get("channel_values", {}).get(_START)
    chat = isinstance(start, Mapping) and "messages" in start
    first = child if chat else (newer[-2] if len(newer) > 1 else None)
    return first.config if first is not None and not first.shown else None


def first_states(
    shown: Sequence[StateSnapshot], saver: BaseCheckpointSaver
) -> Generator[Read, CheckpointTuple | None, list[RunnableConfig]]:
    """The configs of the states in which the earlier questions of the newest checkpoint's
    branch first appear, newest first, those the read ``shown`` (newest first) does not hold
    (see the module's docstring). A body of effects: ``drive`` or ``adrive`` it."""
    newer, parent = _branch_in(shown)
    thread = {k: v for k, v in shown[0].config["configurable"].items() if k != "checkpoint_id"}
    found: list[RunnableConfig] = []
    for _ in range(MAX_WALKED):
        if parent is None or len(found) >= EDITABLE_QUESTIONS:
            break
        saved = yield Read(saver, {"configurable": {**thread, "checkpoint_id": parent}})
        if saved is None:
            break
        first = _first_unshown(saved, newer)
        if first is not None:
            found.append(first)
        newer = [*newer[-1:], _Step(saved.config, saved.metadata.get("source"), False)]
        parent = _id(saved.parent_config)
    return found
