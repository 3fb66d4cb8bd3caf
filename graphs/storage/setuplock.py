"""LangGraph's table setup on a PostgreSQL database, one process at a time.

``PostgresSaver.setup()`` and ``PostgresStore.setup()`` run CREATE TABLE IF NOT EXISTS and their
migrations unguarded, so two commands opening a fresh database at once race each other
(``duplicate key value violates unique constraint "pg_type_typname_nsp_index"``). ``open_db``
and ``aopen_db`` run them under ``setup_lock(db)`` (``asetup_lock``): a database-wide advisory
lock, polled for rather than waited on in a statement (a session blocked in a statement is an
open transaction, which the holder's CREATE INDEX CONCURRENTLY would wait for, forever).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

# The setup lock's key: the two-int form, a key space apart from the threads' one-bigint keys.
_SETUP_KEY = (0x72677270, 1)  # "rgrp", 1


_SETUP_TRY = "SELECT pg_try_advisory_lock(%s, %s)"
_SETUP_POLL_S = 0.05
_SETUP_WAIT_S = 120.0  # then set up anyway: a fault is reported as the database's own


def _granted(row: Any) -> bool:
    """Whether ``pg_try_advisory_lock``'s row says the lock was taken."""
    return bool(row and row[0])


@contextlib.contextmanager
def setup_lock(db: str) -> Iterator[Any]:
    """Hold the database's setup lock (waiting for another process's setup to end): LangGraph's
    ``setup()`` may then create the tables and run migrations without racing another. Gives the
    lock's connection (autocommit), for setting up more under the lock."""
    import psycopg

    with psycopg.connect(db, autocommit=True, application_name="reactgraph-setup") as connection:
        deadline = time.monotonic() + _SETUP_WAIT_S
        while not _granted(connection.execute(_SETUP_TRY, _SETUP_KEY).fetchone()):
            if time.monotonic() > deadline:
                break
            time.sleep(_SETUP_POLL_S)
        yield connection  # closing the connection ends its session, and the lock with it


@contextlib.asynccontextmanager
async def asetup_lock(db: str) -> AsyncIterator[Any]:
    """``setup_lock`` for async code."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(
        db, autocommit=True, application_name="reactgraph-setup"
    ) as connection:
        deadline = time.monotonic() + _SETUP_WAIT_S
        while not _granted(await (await connection.execute(_SETUP_TRY, _SETUP_KEY)).fetchone()):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(_SETUP_POLL_S)
        yield connection
