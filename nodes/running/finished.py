"""The calls of one turn that finished, kept through a kill (``parallel_tool_calls``): with a
checkpointer, each call's outcome is written as it finishes, as a LangGraph task's durable
write kept with the step's checkpoint until the step completes. The step run again after a
kill (a resume) reads the outcomes its earlier attempts wrote and runs only the calls that had
not finished: a finished call never runs twice, and only those in flight at the kill may.

The records are read as ``sending`` (``reactgraph.nodes.loop.middleware.sending``) reads its own: a
task's result at each position of the step is what was first written there, so a step writes
a fresh probe and reads every earlier record on the way to it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.func import task

from reactgraph.nodes.vocabulary.effects import Effect


@task
def tool_call_finished(record: dict[str, Any]) -> dict[str, Any]:
    """A call of the turn that finished (``{"index": ..., "outcome": ...}``), or a step's probe
    (``{"probe": id}``): what the step's checkpoint keeps, as this task's result."""
    return record


# Tasks of one step are numbered as they are called: concurrent calls write one at a time.
_WRITING = threading.Lock()


@dataclass(frozen=True)
class Written:
    """Write ``record`` as ``tool_call_finished``'s result, durably; the result is the record
    stored at that position of the step (this one, or an earlier attempt's)."""

    record: dict[str, Any] = field(default_factory=dict)

    def run(self) -> Any:
        with _WRITING:
            future = tool_call_finished(self.record)
        return future.result()

    async def arun(self) -> Any:
        return await tool_call_finished(self.record)


def durable(config: RunnableConfig) -> bool:
    """Whether the run has a checkpointer (without one it cannot be resumed: nothing is kept)."""
    return (config.get("configurable") or {}).get(CONFIG_KEY_CHECKPOINTER) is not None


def finished_calls(config: RunnableConfig) -> Generator[Effect, Any, dict[int, Any]]:
    """The outcomes of the turn's calls that the step's earlier attempts saw finish, by the
    call's index (empty on a first attempt, or without a checkpointer)."""
    if not durable(config):
        return {}
    probe = uuid.uuid4().hex
    found: dict[int, Any] = {}
    while True:  # one stored record per turn of the loop: it ends at the first fresh write
        record = yield Written({"probe": probe})
        if not isinstance(record, Mapping):
            continue
        if record.get("probe") == probe:
            return found
        index = record.get("index")
        if isinstance(index, int) and "outcome" in record:
            found.setdefault(index, record["outcome"])


def keep_finished(config: RunnableConfig, index: int, outcome: Any) -> Generator[Effect, Any, None]:
    """A call's outcome written as it finishes (nothing without a checkpointer)."""
    if durable(config):
        yield Written({"index": index, "outcome": outcome})
