"""One process per thread: thread locks, and a checkpointer that writes only under its lock.

``thread_lock(db, thread)`` holds a thread for this process: a PostgreSQL session advisory lock
(any number of machines) or an exclusive ``flock`` beside a SQLite file (one machine). A second
process gets ``ThreadBusy``; a lock dies with its holder.

A PostgreSQL session lock also dies with its connection, while the process goes on. So that a
worker whose lock vanished can never write over the worker that took the thread next, runs write
through ``guarded(saver, leases)``: before each checkpoint write it asks the thread's lease
whether the lock is still held, and raises ``LockLost`` instead of writing if not. The step in
flight is then lost (the new holder redoes it), never written twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from reactgraph.nodes.notes import safe_name


class ThreadBusy(RuntimeError):
    """Another process is running this thread."""


class LockLost(RuntimeError):
    """This process no longer holds the thread's lock; it stopped before writing."""


def is_postgres(db: str) -> bool:
    """Whether ``db`` names a PostgreSQL database rather than a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


class Lease:
    """Proof that this process holds a thread; ``check()`` raises ``LockLost`` once it does
    not."""

    def __init__(self, thread_id: str, connection: Any = None) -> None:
        self.thread_id = thread_id
        self._connection = connection
        self._lock = threading.Lock()

    def check(self) -> None:
        if self._connection is None:
            return  # a flock lives as long as this process
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
    if is_postgres(db):
        import psycopg

        # The name shows in pg_stat_activity, so an operator can see who holds which thread.
        name = f"reactgraph-lock:{thread_id}"[:63]
        with psycopg.connect(db, autocommit=True, application_name=name) as connection:
            key = connection.execute("SELECT hashtextextended(%s, 0)", (thread_id,)).fetchone()[0]
            got = connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not got or not got[0]:
                raise ThreadBusy(f"thread {thread_id} is running in another process")
            try:
                yield Lease(thread_id, connection)
            finally:
                with contextlib.suppress(Exception):  # a dead connection has let go already
                    connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return
    folder = Path(f"{db}.locks")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{safe_name(thread_id)}.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ThreadBusy(f"thread {thread_id} is running in another process") from None
        yield Lease(thread_id)


class GuardedSaver(BaseCheckpointSaver):
    """A checkpointer that checks the thread's lease before every write; reads pass through."""

    def __init__(self, inner: BaseCheckpointSaver, leases: Mapping[str, Lease]) -> None:
        super().__init__(serde=inner.serde)
        self.inner, self.leases = inner, leases

    def _check(self, config: Any) -> None:
        thread = str((config.get("configurable") or {}).get("thread_id"))
        lease = self.leases.get(thread)
        if lease is None:
            raise LockLost(f"thread {thread} is written without holding its lock")
        lease.check()

    def put(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        self._check(config)
        return self.inner.put(config, *args, **kwargs)

    def put_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
        self._check(config)
        return self.inner.put_writes(config, *args, **kwargs)

    async def aput(self, config: Any, *args: Any, **kwargs: Any) -> Any:
        self._check(config)
        return await self.inner.aput(config, *args, **kwargs)

    async def aput_writes(self, config: Any, *args: Any, **kwargs: Any) -> None:
        self._check(config)
        return await self.inner.aput_writes(config, *args, **kwargs)

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
    def config_specs(self) -> list:
        return self.inner.config_specs
