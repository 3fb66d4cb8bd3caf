"""Where runs survive a crash: one SQLite file (or a PostgreSQL database) holding the checkpoints
of every thread, the notes when they live in the store, and the record of each run."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from reactgraph.storage.address import DEFAULT_DB, is_postgres
from reactgraph.storage.compression import serializer
from reactgraph.storage.faults import explain
from reactgraph.storage.listing import RUNS as RUNS
from reactgraph.storage.listing import aensure_index, ensure_index, record_pages

# The thread lock's old home: these names stay importable from here.
from reactgraph.storage.locks import ThreadBusy as ThreadBusy
from reactgraph.storage.locks import thread_lock as thread_lock
from reactgraph.storage.setuplock import asetup_lock, setup_lock

ThreadStatus = Literal["unknown", "interrupted", "awaiting_approval", "finished"]
RECORDS_PAGE = 500  # run records read at once by the listings (``threads``, ``prune --finished``)


class DatabaseError(RuntimeError):
    """The database cannot be opened or read; the message says which and why."""


class NoDatabase(DatabaseError):
    """A command that only reads was pointed at a database that does not exist (or is empty)."""


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


@dataclass(frozen=True)
class RunRecord:
    """How a thread's run was started, so another process can rebuild its graph to resume."""

    thread_id: str
    question: str
    variant: str
    model: str
    base_url: str | None
    corpus: str | None
    settings: dict[str, Any]
    """The settings given when it started (the variant's defaults stand for the others)."""
    created: float
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What the command line chose besides the settings: ``notes_in_db``, ``mcp``,
    ``default_tools`` (see ``reactgraph.app.flags.RunOptions``)."""

    @classmethod
    def load(cls, store: BaseStore, thread_id: str) -> RunRecord | None:
        """The record of a thread, or None for a thread this database does not know."""
        item = store.get(RUNS, thread_id)
        return None if item is None else cls.from_value(item.value)

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> RunRecord:
        """A stored record; fields a newer version added are ignored, so old code can read it."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in value.items() if k in known})

    def moved_to(self, model: str, base_url: str | None) -> RunRecord:
        """This record with the model (and server) a resumed run goes on with."""
        return dataclasses.replace(self, model=model, base_url=base_url)

    def save(self, store: BaseStore) -> None:
        """Write (or replace) this record."""
        store.put(RUNS, self.thread_id, dict(self.__dict__))

    @staticmethod
    def each(store: BaseStore, page: int | None = None) -> Iterator[RunRecord]:
        """Every recorded run, newest first (by when it started), read ``page`` records at a
        time, in time linear in their number: memory stays bounded however many there are. A
        record saved while this reads is never given twice and never makes another missed
        (``reactgraph.storage.listing``)."""
        for values in record_pages(store, page or RECORDS_PAGE):
            yield from (RunRecord.from_value(value) for value in values)

    @staticmethod
    def all(store: BaseStore) -> list[RunRecord]:
        """Every recorded run, newest first, as a list (``each`` reads them a page at a time)."""
        return sorted(RunRecord.each(store), key=lambda r: -r.created)


def new_record(
    thread_id: str,
    question: str,
    variant: str,
    model: str,
    base_url: str | None,
    corpus: str | None,
    settings: dict[str, Any],
    options: dict[str, Any] | None = None,
) -> RunRecord:
    """A record for a run starting now."""
    return RunRecord(
        thread_id, question, variant, model, base_url, corpus, settings, time.time(), options or {}
    )


def thread_status(graph: CompiledStateGraph, thread_id: str) -> ThreadStatus:
    """``reactgraph.storage.status.thread_status``: the one status every command reads."""
    from reactgraph.storage.status import thread_status as status

    return status(graph, thread_id)
