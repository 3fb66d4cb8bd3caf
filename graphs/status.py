"""Where a thread stands: ``finished``, ``interrupted`` or ``unknown``. This is the one decision
every command makes before it lists, shows, resumes, re-runs or prunes a thread (``threads``,
``show``, ``resume``, the batch and eval re-runs, ``prune``, ``run_many``/``run_processes``).

A step's writes are stored task by task (``put_writes``) before the step's checkpoint. LangGraph
1.2 leaves out of ``StateSnapshot.next`` the tasks whose writes are stored already, so a process
killed between a task's writes and the next checkpoint leaves a thread whose ``next`` is empty
though a step is still due. ``StateSnapshot.tasks`` lists every task of the next step, written
or not: a thread is finished only when it has none. Resuming such a thread (``invoke(None)``)
applies the stored writes without running their tasks again, then goes on.

A checkpoint row that cannot be decoded (flipped bytes, a truncated blob, an unknown codec
name) is ``ThreadDamaged``: one line naming the thread, never a traceback.
"""

from __future__ import annotations

import zlib
from typing import Any, Literal

from langgraph.types import StateSnapshot

from reactgraph.persistence import DatabaseError

ThreadStatus = Literal["unknown", "interrupted", "finished"]

# What decoding a damaged row raises: zlib's own error, ValueError (an unknown codec, bad
# msgpack or JSON, bad UTF-8), and what a half-decoded value trips over on the way.
DECODE_FAULTS = (zlib.error, ValueError, TypeError, KeyError, IndexError, EOFError)


class ThreadDamaged(DatabaseError):
    """A checkpoint row of the thread cannot be read back: the thread cannot be shown or
    resumed (every other thread can)."""

    def __init__(self, thread_id: str, error: BaseException) -> None:
        self.thread_id = thread_id
        why = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        super().__init__(f"thread {thread_id} is damaged: a checkpoint row cannot be read ({why})")


def status_of(snapshot: StateSnapshot) -> ThreadStatus:
    """``interrupted`` while the next step has any task (its writes stored or not),
    ``finished`` when a checkpoint has no step due, ``unknown`` when there is no checkpoint."""
    if snapshot.tasks:
        return "interrupted"
    return "finished" if snapshot.values else "unknown"


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def read_thread(graph: Any, thread_id: str) -> tuple[ThreadStatus, dict[str, Any]]:
    """The thread's status and its latest values (stored writes applied), in one read;
    ``ThreadDamaged`` if a row of it cannot be decoded."""
    try:
        snapshot = graph.get_state(_config(thread_id))
    except DECODE_FAULTS as error:
        raise ThreadDamaged(thread_id, error) from error
    return status_of(snapshot), dict(snapshot.values or {})


async def aread_thread(graph: Any, thread_id: str) -> tuple[ThreadStatus, dict[str, Any]]:
    """``read_thread`` for async checkpointers."""
    try:
        snapshot = await graph.aget_state(_config(thread_id))
    except DECODE_FAULTS as error:
        raise ThreadDamaged(thread_id, error) from error
    return status_of(snapshot), dict(snapshot.values or {})


def thread_status(graph: Any, thread_id: str) -> ThreadStatus:
    """``finished`` when the run reached an exit, ``interrupted`` when a step is still due
    (a crash, a kill, Ctrl-C, spent retries), ``unknown`` when the thread has no checkpoint."""
    return read_thread(graph, thread_id)[0]
