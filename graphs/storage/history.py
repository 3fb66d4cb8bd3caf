"""Reading a thread's whole history in time linear in its checkpoints (SQLite savers).

A delta-stored channel (``reactgraph.nodes.vocabulary.reducers``) is rebuilt at a checkpoint by
walking back to its last snapshot: LangGraph's ``get_delta_channel_history``, one saver call per
checkpoint read. ``get_state_history`` reads every checkpoint, so a thread of N checkpoints
costs N walks of up to ``reactgraph.nodes.vocabulary.delta.MAX_STEPS_BETWEEN_SNAPSHOTS`` ancestors,
each ancestor read from the file and decoded again: quadratic (143 s for 600 turns).

The savers here answer that call from an index of the thread instead
(``reactgraph.storage.history_index``): built from the rows ``get_state_history`` reads first
anyway (the saver's own public ``list`` of the whole thread), or, for other reads, once a
second checkpoint of the same thread is asked for while the database is unchanged. Each
checkpoint's answer is then built from its parent's, so the whole history costs one pass. The
index is dropped as soon as anything is written to the file (by this connection or any other:
SQLite's ``data_version`` and the connection's change count), so a run, a resume or a time
travel never reads a stale one, and a single read (``get_state``, ``show``) goes the usual way.
The answers rebuild LangGraph's own values (``tests/test_history.py`` compares every
checkpoint's state with a plain ``SqliteSaver``'s). PostgreSQL's saver is left as it is.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from reactgraph.storage.history_index import HistoryIndex, state_specs

__all__ = ["IndexedAsyncSqliteSaver", "IndexedSqliteSaver"]


class _Reads:
    """The reads of one thread while the database stays as it was: which checkpoints were
    asked for, and the index once a second one is. The index answers each checkpoint once:
    asked again (a time travel after a history read), it goes the usual way, so a run never
    starts from values a caller was handed before."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.key: tuple[Any, ...] | None = None
        self.asked: set[tuple[str, tuple[str, ...]]] = set()
        self.index: HistoryIndex | None = None

    def lookup(
        self, key: tuple[Any, ...], cid: str, channels: Sequence[str]
    ) -> tuple[Mapping[str, DeltaChannelHistory] | None, bool]:
        """(the index's answer or None, whether to build the index for this read)."""
        with self.lock:
            if key != self.key:
                self.key, self.asked, self.index = key, set(), None
            request = (cid, tuple(channels))
            if request in self.asked:
                return None, False
            self.asked.add(request)
            if self.index is not None:
                return self.index.history(cid, channels), False
            return None, any(asked != cid for asked, _ in self.asked)

    def offer(self, key: tuple[Any, ...], build: Callable[[], HistoryIndex]) -> None:
        """A whole thread was just read: index it for the reads of its checkpoints."""
        with self.lock:
            if key != self.key:
                self.key, self.asked, self.index = key, set(), None
            if self.index is None:
                self.index = build()

    def indexed(
        self, key: tuple[Any, ...], index: HistoryIndex, cid: str, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory] | None:
        with self.lock:
            if key == self.key:
                self.index = index
            return index.history(cid, channels)


def _whole_thread(config: RunnableConfig | None, **options: Any) -> tuple[str, str] | None:
    """(thread, namespace) when a ``list`` call reads one whole thread, else None."""
    configurable = (config or {}).get("configurable") or {}
    if any(options.values()) or "thread_id" not in configurable:
        return None
    if configurable.get("checkpoint_id"):
        return None
    return str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")


def _target(config: RunnableConfig) -> tuple[str, str, str | None]:
    configurable = config.get("configurable") or {}
    thread = str(configurable["thread_id"])
    return thread, configurable.get("checkpoint_ns", ""), configurable.get("checkpoint_id")


def _thread_config(thread: str, ns: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}


class IndexedSqliteSaver(SqliteSaver):
    """LangGraph's ``SqliteSaver`` whose history reads are linear (see the module doc)."""

    _reads: _Reads | None = None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """LangGraph's ``list``; a whole thread read to its end also leaves the index of it
        (``get_state_history`` reads the thread so before it reads each checkpoint)."""
        whole = _whole_thread(config, filter=filter, before=before, limit=limit)
        if whole is None:
            yield from super().list(config, filter=filter, before=before, limit=limit)
            return
        key, seen = self._state_key(*whole), []
        for tup in super().list(config):
            seen.append(tup)
            yield tup
        reads = self._reads = self._reads or _Reads()
        reads.offer(key, lambda: HistoryIndex(seen, state_specs()))

    def _state_key(self, thread: str, ns: str) -> tuple[Any, ...]:
        with self.lock:
            (version,) = self.conn.execute("PRAGMA data_version").fetchone()
            return thread, ns, version, self.conn.total_changes

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        thread, ns, cid = _target(config)
        if not channels or cid is None:
            return super().get_delta_channel_history(config=config, channels=channels)
        reads = self._reads = self._reads or _Reads()
        key = self._state_key(thread, ns)
        answer, build = reads.lookup(key, cid, channels)
        if answer is None and build:
            index = HistoryIndex(super().list(_thread_config(thread, ns)), state_specs())
            answer = reads.indexed(key, index, cid, channels)
        if answer is None:
            answer = super().get_delta_channel_history(config=config, channels=channels)
        return answer


class IndexedAsyncSqliteSaver(AsyncSqliteSaver):
    """LangGraph's ``AsyncSqliteSaver`` whose history reads are linear (see the module doc)."""

    _reads: _Reads | None = None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """LangGraph's ``alist``, leaving the index of a whole thread read to its end."""
        whole = _whole_thread(config, filter=filter, before=before, limit=limit)
        if whole is None:
            async for tup in super().alist(config, filter=filter, before=before, limit=limit):
                yield tup
            return
        key, seen = await self._state_key(*whole), []
        async for tup in super().alist(config):
            seen.append(tup)
            yield tup
        reads = self._reads = self._reads or _Reads()
        reads.offer(key, lambda: HistoryIndex(seen, state_specs()))

    async def _state_key(self, thread: str, ns: str) -> tuple[Any, ...]:
        async with self.lock, self.conn.execute("PRAGMA data_version") as cursor:
            (version,) = await cursor.fetchone()  # type: ignore[misc]
            return thread, ns, version, self.conn.total_changes

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        thread, ns, cid = _target(config)
        if not channels or cid is None:
            return await super().aget_delta_channel_history(config=config, channels=channels)
        reads = self._reads = self._reads or _Reads()
        key = await self._state_key(thread, ns)
        answer, build = reads.lookup(key, cid, channels)
        if answer is None and build:
            tuples = [t async for t in super().alist(_thread_config(thread, ns))]
            index = HistoryIndex(tuples, state_specs())
            answer = reads.indexed(key, index, cid, channels)
        if answer is None:
            answer = await super().aget_delta_channel_history(config=config, channels=channels)
        return answer
