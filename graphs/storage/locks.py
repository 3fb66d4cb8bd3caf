"""One process per thread: thread locks, and a checkpointer that writes only under its lock.

``thread_lock(db, thread)`` holds a thread for this process, as the database's backend does it
(``reactgraph.storage.backends``): a PostgreSQL session advisory lock (any number of machines) or
an exclusive ``flock`` beside a SQLite file (one machine). A second
process gets ``ThreadBusy``; a lock dies with its holder.

A PostgreSQL session lock also dies with its connection, while the process goes on. So that a
worker whose lock vanished can never write over the worker that took the thread next, runs write
through ``guarded(saver, leases)``: before each checkpoint write it asks the thread's lease
whether the lock is still held, and raises ``LockLost`` instead of writing if not. The step in
flight is then lost (the new holder redoes it), never written twice.

Better still, a run writes its checkpoints over the very connection that holds its lock, so once
the lock is gone (its connection died) no write can follow it, not even one that passed the
check: ``ask`` and ``resume`` through ``lease_saver(saver, lease)``, batch and eval workers
through ``guarded`` with leases from ``athread_lock``, whose writes go over the lease's own
connection.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from reactgraph.storage.backends import database_backend
from reactgraph.storage.errors import ThreadBusy as ThreadBusy

_HALTED = threading.Event()  # set by ``halt_writes``


class LockLost(RuntimeError):
    """This process no longer holds the thread's lock; it stopped before writing."""


class Lease:
    """Proof that this process holds a thread; ``check()`` raises ``LockLost`` once it does
    not."""

    def __init__(
        self, thread_id: str, connection: Any = None, writer: BaseCheckpointSaver | None = None
    ) -> None:
        self.thread_id = thread_id
        self._connection = connection
        self._lock = threading.Lock()
        self.writer = writer
        """A saver over the lock's own connection that the run's writes go through, or None."""

    @property
    def connection(self) -> Any:
        """The PostgreSQL connection whose session holds the lock (None for a flock)."""
        return self._connection

    def lost(self) -> bool:
        """Whether the lock's connection is known to be gone, and the lock with it."""
        connection = self._connection
        return connection is not None and (connection.closed or connection.broken)

    def check(self) -> None:
        if self._connection is None:
            return  # a flock lives as long as this process
        if self.writer is not None:
            # The writes go over the lock's connection: a lost lock fails the write itself.
            if self.lost():
                raise LockLost(f"lost the lock on thread {self.thread_id}: its connection closed")
            return
        with self._lock:
            try:
                # The lock's connection holds this one lock and nothing else.
                held = self._connection.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
                    "AND pid = pg_backend_pid() AND granted)"
                ).fetchone()[0]
            except Exception as error:
                raise LockLost(
                    f"lost the lock on thread {self.thread_id}: its database connection failed "
                    f"({type(error).__name__}); another worker may be running it now"
                ) from error
        if not held:
            raise LockLost(f"lost the lock on thread {self.thread_id} to another worker")


@contextlib.contextmanager
def thread_lock(db: str, thread_id: str) -> Iterator[Lease]:
    """Hold the thread for this process; ``ThreadBusy`` when another holds it."""
    with database_backend(db).lock(db, thread_id) as lease:
        yield lease


@contextlib.asynccontextmanager
async def athread_lock(db: str, thread_id: str, saver: BaseCheckpointSaver) -> AsyncIterator[Lease]:
    """``thread_lock`` for async runs: on PostgreSQL the lock's connection is async, and the
    lease's ``writer`` (a saver like the async ``saver``, over that connection) is what
    ``guarded`` writes the thread's checkpoints with."""
    async with database_backend(db).alock(db, thread_id, saver) as lease:
        yield lease


class ThreadLocks:
    """The thread locks of the database at ``db``, carried by the savers ``open_db`` and
    ``aopen_db`` give (``thread_locks``): a graph on such a saver holds a thread's lock while
    it runs or edits it (``reactgraph.graph.ReactGraph``: ``invoke``, ``ainvoke``,
    ``update_state``...), so two processes, or two threads of one, never both advance a thread
    through the Python API; the second gets ``ThreadBusy``, as the command line's second
    ``resume`` does. The command line's own savers (``lease_saver``, ``GuardedSaver``) carry
    none: the command holds the lock already."""

    def __init__(self, db: str) -> None:
        self.db = db

    def hold(self, thread_id: str) -> contextlib.AbstractContextManager[Lease]:
        return thread_lock(self.db, thread_id)

    def ahold(self, thread_id: str) -> contextlib.AbstractAsyncContextManager[Lease]:
        return _ahold(self.db, thread_id)


def locking(saver: Any, db: str) -> Any:
    """``saver``, carrying the thread locks of ``db`` (``ThreadLocks``)."""
    saver.thread_locks = ThreadLocks(db)
    return saver


@contextlib.asynccontextmanager
async def _ahold(db: str, thread_id: str) -> AsyncIterator[Lease]:
    """``thread_lock`` without blocking the event loop while it connects or waits."""
    import asyncio

    lock = thread_lock(db, thread_id)
    lease = await asyncio.to_thread(lock.__enter__)
    try:
        yield lease
    finally:
        await asyncio.to_thread(lock.__exit__, None, None, None)


def lease_saver(saver: BaseCheckpointSaver, lease: Lease) -> BaseCheckpointSaver:
    """The checkpointer a run under ``lease`` reads and writes with: on PostgreSQL a saver over
    the lock's own connection (the lock and the writes share one session, so a lost lock is a
    dead connection and no write can follow it); with a flock, which lives as long as this
    process, ``saver`` itself. Either in a ``GuardedSaver``, whose writes a stop halts."""
    if lease.connection is None:
        return GuardedSaver(saver)  # its writes parked once a stop begins (``halt_writes``)
    # The lock's connection is in autocommit mode, as PostgresSaver needs; its queries name
    # their own row factory, so the connection's tuple rows do not matter. The saver's own class
    # (PostgresSaver, or a subclass with its constructor) keeps what it adds.
    kind: Any = type(saver)  # a PostgresSaver (or subclass): its constructor takes the connection
    return GuardedSaver(kind(lease.connection, serde=saver.serde))


def halt_writes() -> None:
    """From now on no checkpoint write of this process lands: each parks its thread for good.
    A stop (``reactgraph.app.interrupts``) calls it first: the command's threads run on while it
    ends what they started (an MCP server mid-call), and a run must not go on to record what
    that did to it (the tool's failure, and an answer made of it) as its own."""
    _HALTED.set()


class GuardedSaver(BaseCheckpointSaver):
    """A checkpointer that checks the thread's lease before every write (with ``leases``; none:
    the lease is the caller's) and parks writes once halted (``halt_writes``); reads pass
    through."""

    def __init__(
        self, inner: BaseCheckpointSaver, leases: Mapping[str, Lease] | None = None
    ) -> None:
        super().__init__(serde=inner.serde)
        self.inner, self.leases = inner, leases

    def _check(self, config: Any) -> Lease | None:
        if _HALTED.is_set():
            threading.Event().wait()  # parked: the process is ending, and writes nothing more
        if self.leases is None:
            return None
        thread = str((config.get("configurable") or {}).get("thread_id"))
        lease = self.leases.get(thread)
        if lease is None:
            raise LockLost(f"thread {thread} is written without holding its lock")
        lease.check()
        return lease

    def _writer(self, lease: Lease | None) -> BaseCheckpointSaver:
        return (lease.writer if lease is not None else None) or self.inner

    def put(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        lease = self._check(config)
        with _lost_if_gone(lease):
            return self._writer(lease).put(config, *args, **kwargs)

    def put_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
        lease = self._check(config)
        with _lost_if_gone(lease):
            return self._writer(lease).put_writes(config, *args, **kwargs)

    async def aput(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        lease = self._check(config)
        with _lost_if_gone(lease):
            return await self._writer(lease).aput(config, *args, **kwargs)

    async def aput_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
        lease = self._check(config)
        with _lost_if_gone(lease):
            return await self._writer(lease).aput_writes(config, *args, **kwargs)

    # Everything else is the inner saver's, unchanged.
    def get_tuple(self, config: Any) -> Any:
        return self.inner.get_tuple(config)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.list(*args, **kwargs)

    async def aget_tuple(self, config: Any) -> Any:
        return await self.inner.aget_tuple(config)

    def alist(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.alist(*args, **kwargs)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.inner.get_next_version(current, channel)

    def get_delta_channel_history(self, **kwargs: Any) -> Any:
        return self.inner.get_delta_channel_history(**kwargs)

    async def aget_delta_channel_history(self, **kwargs: Any) -> Any:
        return await self.inner.aget_delta_channel_history(**kwargs)

    def delete_thread(self, thread_id: str) -> None:
        return self.inner.delete_thread(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        return await self.inner.adelete_thread(thread_id)

    @property
    def config_specs(self) -> builtins.list[Any]:
        return self.inner.config_specs


@contextlib.contextmanager
def _lost_if_gone(lease: Lease | None) -> Iterator[None]:
    """A write that failed because the lock's connection died is ``LockLost``: nothing was
    written, and the thread may be another process's now."""
    try:
        yield
    except Exception as error:
        if lease is None or lease.writer is None or not lease.lost():
            raise
        raise LockLost(
            f"lost the lock on thread {lease.thread_id}: its database connection failed "
            f"({type(error).__name__}); stopped before writing"
        ) from error
