"""Reading where a thread stands (``reactgraph.nodes.vocabulary.standing`` decides): its status and
latest values in one read, for sync and async checkpointers. A checkpoint row that cannot be decoded
(flipped bytes, a truncated blob, an unknown codec name) is ``ThreadDamaged``: one line naming
the thread, never a traceback, and every other thread reads as before.
"""

from __future__ import annotations

import zlib
from typing import Any

from reactgraph.nodes.vocabulary.standing import ThreadStatus, status_of
from reactgraph.storage.database import DatabaseError

__all__ = ["ThreadDamaged", "ThreadStatus", "aread_thread", "read_thread", "status_of"]

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
