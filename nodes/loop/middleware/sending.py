"""A model call counted before it is sent, so a kill cannot hide it (``sending``): with a
checkpointer, a record of the call is written first, as a LangGraph task's durable write, kept
with the step's checkpoint until the step completes. A step run again after a kill finds the
records of the calls its earlier attempts sent and never saw answered, and counts each at its
prompt's tokens (the step's prompt: the same state makes the same prompt); a call that failed
(its server answered an error) is marked so and not counted, as a provider bills nothing for it.
Once the step completes, its checkpoint holds the spend, records included, and they are gone:
nothing is counted twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.func import task

from reactgraph.nodes.vocabulary.effects import Effect


@task
def model_call_sent(record: dict[str, Any]) -> dict[str, Any]:
    """A model call about to be sent (``{"call": id}``), or one that failed (``"failed": True``):
    what the step's checkpoint keeps, as this task's result, until the step completes."""
    return record


@dataclass(frozen=True)
class Noted:
    """Write ``record`` as ``model_call_sent``'s result, durably (the checkpointer's write of a
    task); the result is the record stored at this point of the step: this one, or the one an
    earlier attempt of the step wrote there (a resume after a kill)."""

    record: dict[str, Any]

    def run(self) -> Any:
        return model_call_sent(self.record).result()

    async def arun(self) -> Any:
        return await model_call_sent(self.record)


def sending(config: RunnableConfig) -> Generator[Effect, Any, tuple[str | None, int]]:
    """Before a model call is sent: its record written (with a checkpointer; none without: a
    run without one cannot be resumed), and how many calls the step's earlier attempts sent
    that never got an answer it saw (a kill: each is spent, at least its prompt). Returns the
    call's id for ``failed`` (None when nothing was written) and that count."""
    if (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER) is None:
        return None, 0
    call = uuid.uuid4().hex
    unanswered: dict[str, None] = {}
    while True:  # one stored record per turn of the loop: it ends at the first fresh write
        found = yield Noted({"call": call})
        named = found.get("call") if isinstance(found, Mapping) else None
        if named == call:
            return call, len(unanswered)
        if not isinstance(named, str):
            continue
        if found.get("failed"):
            unanswered.pop(named, None)
        else:
            unanswered[named] = None


def failed(call: str | None) -> Generator[Effect, Any, None]:
    """After a call that failed (its server answered an error, or none came after every
    retry): marked so, and not counted by a later attempt of the step."""
    if call is not None:
        yield Noted({"call": call, "failed": True})
