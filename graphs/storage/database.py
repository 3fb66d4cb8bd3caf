"""Where runs survive a crash: one SQLite file (or a PostgreSQL database) holding the checkpoints
of every thread, the notes when they live in the store, and the record of each run."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from reactgraph.storage.address import DEFAULT_DB, is_postgres
from reactgraph.storage.compression import serializer
from reactgraph.storage.faults import DatabaseError as DatabaseError
from reactgraph.storage.faults import NoDatabase as NoDatabase
from reactgraph.storage.faults import explain
from reactgraph.storage.listing import RUNS as RUNS
from reactgraph.storage.listing import aensure_index, ensure_index

# The thread lock's old home: these names stay importable from here.
from reactgraph.storage.locks import ThreadBusy as ThreadBusy
from reactgraph.storage.locks import thread_lock as thread_lock

# The run record's old home: these names stay importable from here.
from reactgraph.storage.records import RECORDS_PAGE as RECORDS_PAGE
from reactgraph.storage.records import RecordDamaged as RecordDamaged
from reactgraph.storage.records import RunRecord as RunRecord
from reactgraph.storage.records import new_record as new_record
from reactgraph.storage.setuplock import asetup_lock, setup_lock

ThreadStatus = Literal["unknown", "interrupted", "finished"]


def _sqlite(path: str, autocommit: bool = False, read_only: bool = False) -> sqlite3.Connection:
    file = Path(path)
    if file.exists() and not file.is_file():
        raise DatabaseError(f"{path} is not a file; pass a SQLite file (or a postgresql:// URL)")
    # The store opens its own transactions, so its connection must not (autocommit).
    isolation = None if autocommit else ""
    try:
        if read_only:
            # mode=ro: reading never creates the file, its folder, or a journal it could leave.
            uri = f"file:{quote(str(file.resolve()))}?mode=ro"
            return sqlite3.connect(
                uri, uri=True, check_same_thread=False, timeout=30, isolation_level=isolation
            )
        file.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            file, check_same_thread=False, timeout=30, isolation_level=isolation
        )
        # WAL lets `threads`/`show` read while a run writes; a checkpoint per step stays cheap.
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
    except (sqlite3.Error, OSError) as error:
        raise DatabaseError(explain(path, error)) from error
    return connection


@contextlib.contextmanager
def open_db(
    db: str = DEFAULT_DB, *, read_only: bool = False
) -> Iterator[tuple[BaseCheckpointSaver, BaseStore]]:
    """The checkpointer and the store of ``db``: a SQLite path or a postgresql:// URL.

    ``read_only`` (for commands that only read): a SQLite file is opened read-only and never
    created; a missing one raises ``NoDatabase``. Database faults, here or in the body (a
    damaged page read mid-run, a dropped server), raise ``DatabaseError`` with a one-line
    message naming the database and what to do."""
    if is_postgres(db):
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore

        try:
            with (
                PostgresSaver.from_conn_string(db) as saver,
                PostgresStore.from_conn_string(db) as store,
            ):
                with setup_lock(db) as connection:  # two commands on a fresh database race
                    saver.setup()
                    store.setup()
                    ensure_index(connection)
                yield saver, store
        except Exception as error:
            if type(error).__module__.startswith("psycopg"):
                raise DatabaseError(explain(db, error)) from error
            raise
        return
    from langgraph.store.sqlite import SqliteStore

    from reactgraph.storage.history import IndexedSqliteSaver

    if read_only and not Path(db).exists():
        raise NoDatabase(f"no database at {db}")
    checkpoints = _sqlite(db, read_only=read_only)
    try:
        rows = _sqlite(db, autocommit=True, read_only=read_only)
    except DatabaseError:
        checkpoints.close()
        raise
    try:
        saver, store = IndexedSqliteSaver(checkpoints, serde=serializer()), SqliteStore(rows)
        tables = {name for (name,) in checkpoints.execute("SELECT name FROM sqlite_master")}
        if read_only and {"checkpoints", "writes"} <= tables:
            # Its setup would switch the file to WAL, a write: the tables are there already.
            saver.is_setup = True
        try:
            saver.setup()
            store.setup()
        except sqlite3.OperationalError as error:
            if read_only and "readonly" in str(error):
                # Setting up would create the tables: the file holds no runs (yet).
                raise NoDatabase(f"no reactgraph runs in {db} (it has no tables yet)") from None
            raise
        if not read_only:
            ensure_index(rows)
        yield saver, store
    except sqlite3.Error as error:
        raise DatabaseError(explain(db, error)) from error
    finally:
        checkpoints.close()
        rows.close()


@contextlib.asynccontextmanager
async def aopen_db(db: str = DEFAULT_DB) -> AsyncIterator[tuple[BaseCheckpointSaver, BaseStore]]:
    """The async checkpointer and store of ``db`` (AsyncSqliteSaver or AsyncPostgresSaver)."""
    if is_postgres(db):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres.aio import AsyncPostgresStore

        async with (
            AsyncPostgresSaver.from_conn_string(db) as saver,
            AsyncPostgresStore.from_conn_string(db) as store,
        ):
            async with asetup_lock(db) as connection:
                await saver.setup()
                await store.setup()
                await aensure_index(connection)
            yield saver, store
        return
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    from reactgraph.storage.history import IndexedAsyncSqliteSaver

    _sqlite(db).close()  # create the folder and check the file once, with a clear error
    async with (
        IndexedAsyncSqliteSaver.from_conn_string(db) as saver,
        AsyncSqliteStore.from_conn_string(db) as store,
    ):
        saver.serde = serializer()  # from_conn_string takes no serializer
        await saver.setup()
        await store.setup()
        with contextlib.closing(_sqlite(db, autocommit=True)) as connection:
            ensure_index(connection)  # once per file: a lookup in its schema after that
        yield saver, store


def thread_status(graph: CompiledStateGraph, thread_id: str) -> ThreadStatus:
    """``reactgraph.storage.status.thread_status``: the one status every command reads."""
    from reactgraph.storage.status import thread_status as status

    return status(graph, thread_id)
