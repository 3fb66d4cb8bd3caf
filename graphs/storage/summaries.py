"""A thread's summary: what ``threads`` and ``show`` print of it, saved where its run ended or
paused, so that reading it needs neither LangGraph nor a graph (``reactgraph.app.fastview``).

A summary holds the thread's standing (``finished``, ``interrupted``, ``awaiting_approval``...),
the values the listings print (``SHOWN``) and a fingerprint of the thread's newest checkpoint:
its id and a CRC of its stored bytes and of the writes stored against it. A reader trusts a
summary only when the thread's fingerprint is still the same (``fresh_summary``): a run that
went on since (a resume, a follow-up, a run from Python), a run killed after the summary was
saved, a flipped byte in the checkpoint, or a summary that cannot be read all make it stale, and
the thread is then read through LangGraph as before. So a summary never changes what is printed,
only how fast.

Summaries are kept on SQLite (the fingerprint reads LangGraph's ``checkpoints`` and ``writes``
tables with the standard library's ``sqlite3``); on PostgreSQL none is saved and every thread is
read through LangGraph. This module imports only the standard library and orjson.
"""

from __future__ import annotations

import contextlib
import logging
import zlib
from typing import Any

import orjson

logger = logging.getLogger(__name__)

SUMMARIES = ("reactgraph", "summaries")
PREFIX = ".".join(SUMMARIES)
SHOWN = (
    "question",
    "status",
    "turns",
    "compactions",
    "notes",
    "summary",
    "usage",
    "budget",
    "structured_answer",
    "answer",
    "trace",
    "parsed",
    "escalations",
)
"""The state's keys ``threads`` and ``show`` read (``reactgraph.app.console``, ``approving``)."""

_NEWEST = (
    "SELECT checkpoint_id, checkpoint, metadata FROM checkpoints "
    "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1"
)
_WRITES = (
    "SELECT task_id, idx, channel, type, value FROM writes WHERE thread_id = ? "
    "AND checkpoint_ns = '' AND checkpoint_id = ? ORDER BY task_id, idx"
)


def fingerprint(connection: Any, thread_id: str) -> list[Any] | None:
    """The thread's newest checkpoint id and a CRC of its row and of its writes' rows (what
    LangGraph's ``get_state`` reads), or None when it has no checkpoint."""
    row = connection.execute(_NEWEST, (thread_id,)).fetchone()
    if row is None:
        return None
    crc = 0
    writes = connection.execute(_WRITES, (thread_id, row[0])).fetchall()
    for part in (*row[1:], *(value for write in writes for value in write)):
        crc = zlib.crc32(part if isinstance(part, bytes) else str(part).encode(), crc)
    return [row[0], crc]


def summary_value(thread_id: str, standing: str, values: dict[str, Any], mark: list[Any]) -> Any:
    """The stored summary, or None when the shown values would not read back exactly as they
    are (a value JSON cannot hold, a tuple): such a thread is read through LangGraph."""
    shown = {key: values[key] for key in SHOWN if key in values}
    try:
        if orjson.loads(orjson.dumps(shown)) != shown:
            return None
    except TypeError:
        return None
    return {"thread_id": thread_id, "fingerprint": mark, "standing": standing, "values": shown}


def _connection(db: str) -> Any | None:
    """The backend's plain read-only connection (``quick_reader``), or None."""
    from reactgraph.storage.backends import database_backend

    return database_backend(db).quick_reader(db)


def save_summary(graph: Any, store: Any, thread_id: str, db: str) -> None:
    """Save the thread's summary as it stands now (its run holds the thread's lock). Never
    raises: without a summary the thread is only read more slowly."""
    from reactgraph.storage.snapshots import status_of

    try:
        connection = _connection(db)
        if connection is None:
            return
        with contextlib.closing(connection):
            before = fingerprint(connection, thread_id)
            snapshot = graph.get_state({"configurable": {"thread_id": thread_id}})
            after = fingerprint(connection, thread_id)
        if before is None or before != after:
            return
        value = summary_value(thread_id, status_of(snapshot), dict(snapshot.values or {}), after)
        if value is not None:
            store.put(SUMMARIES, thread_id, value)
    except Exception as error:  # a summary is only a shortcut: the run's result stands
        logger.warning("no summary saved for thread %s: %s", thread_id, error)


async def asave_summary(graph: Any, store: Any, thread_id: str, db: str) -> None:
    """``save_summary`` for async graphs and stores."""
    import asyncio

    from reactgraph.storage.snapshots import status_of

    def mark() -> list[Any] | None:
        connection = _connection(db)
        if connection is None:
            return None
        with contextlib.closing(connection):
            return fingerprint(connection, thread_id)

    try:
        before = await asyncio.to_thread(mark)
        if before is None:
            return
        snapshot = await graph.aget_state({"configurable": {"thread_id": thread_id}})
        after = await asyncio.to_thread(mark)
        if before != after:
            return
        value = summary_value(thread_id, status_of(snapshot), dict(snapshot.values or {}), after)
        if value is not None:
            await store.aput(SUMMARIES, thread_id, value)
    except Exception as error:  # a summary is only a shortcut: the run's result stands
        logger.warning("no summary saved for thread %s: %s", thread_id, error)


def fresh_summary(connection: Any, thread_id: str) -> tuple[str, dict[str, Any]] | None:
    """The thread's standing and shown values from its summary, or None when it has none, it
    cannot be read, or the thread changed since it was saved (see the module's doc)."""
    try:
        row = connection.execute(
            "SELECT value FROM store WHERE prefix = ? AND key = ?", (PREFIX, thread_id)
        ).fetchone()
        if row is None:
            return None
        stored = row[0]
        value = orjson.loads(stored.encode() if isinstance(stored, str) else stored)
        if not isinstance(value, dict) or value.get("thread_id") != thread_id:
            return None
        standing, values = value.get("standing"), value.get("values")
        if not isinstance(standing, str) or not isinstance(values, dict):
            return None
        if fingerprint(connection, thread_id) != value.get("fingerprint"):
            return None
    except Exception as error:  # a DB-API fault or an unreadable value: read it through LangGraph
        logger.info("summary of thread %s not read: %s", thread_id, error)
        return None
    return standing, values
