"""SQLite: one file holding every thread's checkpoints (``IndexedSqliteSaver``, WAL) and the store,
thread locks as ``flock``s on files beside it (one machine), and faults explained by SQLite's
own words. Any address that is not another backend's is a SQLite path."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from reactgraph.storage.backends import INDEX, Dialect
from reactgraph.storage.errors import DatabaseError, NoDatabase

# SQLite's words for a fault -> what the person should read (the first that matches).
_FAULTS = (
    (("not a database",), "cannot open the database {db}: it is not a SQLite database or its "
     "header is damaged ({text}); restore it from a backup, or pass another --db"),
    (("malformed", "corrupt"), "the database {db} is damaged ({text}); restore it from a "
     "backup, or pass another --db"),
    (("readonly", "read-only", "permission"), "the database {db} cannot be written ({text}); "
     "make the file and its folder writable (and not immutable: chattr -i), or pass another --db"),
    (("unable to open",), "cannot open the database {db} ({text}); check that its folder exists "
     "and can be written, or pass another --db"),
    (("locked", "busy"), "the database {db} is locked by another process ({text}); try again "
     "later"),
)  # fmt: skip


class _Dialect:
    param = "?"
    # The store keeps orjson's bytes, a BLOB, which SQLite 3.45+ would read as its binary
    # JSONB: cast to text first. A NULL would end the paging (nothing compares with it): 0.
    start = "IFNULL(json_extract(CAST(value AS TEXT), '$.created'), 0)"
    mark = "?"
    shown = start
    # Without statistics SQLite would rather take LangGraph's prefix index and sort every record
    # for each page: INDEXED BY makes it use ours (or fail, never be slow).
    table = f"store INDEXED BY {INDEX}"

    def cursor(self, store: Any) -> Any:
        return store._cursor(transaction=False)  # LangGraph's internal: its lock held

    def has_index(self, connection: Any) -> bool:
        query = "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?"
        return bool(connection.execute(query, (INDEX,)).fetchone()[0])

    def rows(self, cursor: Any, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in cursor.execute(sql, params).fetchall()]

    def value(self, stored: Any) -> Any:
        # orjson's BLOB, or text a writer of another kind left: bytes to decode either way.
        return stored.encode("utf-8", "surrogatepass") if isinstance(stored, str) else stored


def connect(path: str, autocommit: bool = False, read_only: bool = False) -> sqlite3.Connection:
    """A connection to the file (made, with its folder, unless ``read_only``)."""
    file = Path(path)
    if file.exists() and not file.is_file():
        raise DatabaseError(f"{path} is not a file; pass a SQLite file (or a postgresql:// URL)")
    # The store opens its own transactions, so its connection must not (autocommit).
    isolation: Literal["DEFERRED"] | None = None if autocommit else "DEFERRED"
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
        raise DatabaseError(BACKEND.explain(path, error)) from error
    return connection


class Sqlite:
    name = "sqlite"
    shared = False
    keeps_steps = False  # a damaged file may not keep them
    dialect: Dialect = _Dialect()

    def claims(self, db: str) -> bool:
        return True

    def address(self, db: str) -> str:
        return os.path.abspath(db)

    def shown(self, db: str) -> str:
        return db

    def exists(self, db: str) -> bool:
        return os.path.exists(db)

    def lock_place(self, db: str) -> str:
        return f"{db}.locks"

    def faults(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error,)

    def explain(self, db: str, error: BaseException) -> str:
        text = " ".join(str(error).split()) or type(error).__name__
        lower = text.lower()
        for words, message in _FAULTS:
            if any(word in lower for word in words):
                return message.format(db=db, text=text)
        return f"cannot use the database {db} ({text}); check the file, or pass another --db"

    @contextlib.contextmanager
    def open(self, db: str, read_only: bool) -> Iterator[Any]:
        from langgraph.store.sqlite import SqliteStore

        from reactgraph.storage.compression import serializer
        from reactgraph.storage.history import IndexedSqliteSaver
        from reactgraph.storage.listing import ensure_index
        from reactgraph.storage.locks import locking

        if read_only and not Path(db).exists():
            raise NoDatabase(f"no database at {db}")
        checkpoints = connect(db, read_only=read_only)
        try:
            rows = connect(db, autocommit=True, read_only=read_only)
        except DatabaseError:
            checkpoints.close()
            raise
        try:
            saver, store = IndexedSqliteSaver(checkpoints, serde=serializer()), SqliteStore(rows)
            _set_up(checkpoints, saver, store, db, read_only)
            if not read_only:
                ensure_index(rows, self)
                locking(saver, db)  # a graph on it holds each thread it runs
            yield saver, store
        except sqlite3.Error as error:
            raise DatabaseError(self.explain(db, error)) from error
        finally:
            checkpoints.close()
            rows.close()

    @contextlib.asynccontextmanager
    async def aopen(self, db: str) -> AsyncIterator[Any]:
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        from reactgraph.storage.compression import serializer
        from reactgraph.storage.history import IndexedAsyncSqliteSaver
        from reactgraph.storage.listing import ensure_index
        from reactgraph.storage.locks import locking

        # Create the folder and check the file once, with a clear error; the store's migrations
        # in one transaction (``migrate_store``), before its own ``setup`` finds none to run.
        with contextlib.closing(connect(db, autocommit=True)) as connection:
            migrate_store(connection, AsyncSqliteStore.MIGRATIONS)
        async with (
            IndexedAsyncSqliteSaver.from_conn_string(db) as saver,
            AsyncSqliteStore.from_conn_string(db) as store,
        ):
            saver.serde = serializer()  # from_conn_string takes no serializer
            await saver.setup()
            await store.setup()
            with contextlib.closing(connect(db, autocommit=True)) as connection:
                ensure_index(connection, self)  # once per file: a lookup in its schema after that
            yield locking(saver, db), store

    @contextlib.contextmanager
    def lock(self, db: str, thread_id: str) -> Iterator[Any]:
        import fcntl

        from reactgraph.nodes.loop.notes import safe_name
        from reactgraph.storage.locks import Lease, ThreadBusy

        folder = Path(self.lock_place(db))
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{safe_name(thread_id)}.lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ThreadBusy(f"thread {thread_id} is running in another process") from None
            yield Lease(thread_id)

    @contextlib.asynccontextmanager
    async def alock(self, db: str, thread_id: str, saver: Any) -> AsyncIterator[Any]:
        with self.lock(db, thread_id) as lease:  # a flock: local and quick
            yield lease

    def delete_older(self, db: str, thread_id: str, keep: str) -> None:
        with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection, connection:
            for table in ("writes", "checkpoints"):
                connection.execute(
                    f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id < ?",
                    (thread_id, keep),
                )

    def compact(self, db: str) -> None:
        with contextlib.closing(sqlite3.connect(db, timeout=30, isolation_level=None)) as conn:
            conn.execute("VACUUM")

    def quick_reader(self, db: str) -> sqlite3.Connection | None:
        if not self.exists(db):
            return None
        connection = None
        try:
            connection = connect(db, read_only=True)
            found = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if {"store", "checkpoints", "writes"} <= {name for (name,) in found}:
                return connection
        except (sqlite3.Error, DatabaseError):
            pass
        if connection is not None:
            connection.close()
        return None

    def owns(self, store: Any) -> bool:
        from langgraph.store.sqlite import SqliteStore

        return isinstance(store, SqliteStore)


BACKEND = Sqlite()


def _set_up(
    checkpoints: sqlite3.Connection, saver: Any, store: Any, db: str, read_only: bool
) -> None:
    """Create the saver's and the store's tables (the saver's on ``checkpoints``) where they
    are missing. Read-only, a file
    with the checkpoint tables is left as it is (their setup would switch it to WAL, a
    write), and one without them raises NoDatabase: it holds no runs (yet)."""
    tables = {name for (name,) in checkpoints.execute("SELECT name FROM sqlite_master")}
    if read_only and {"checkpoints", "writes"} <= tables:
        saver.is_setup = True
    try:
        saver.setup()
        if not read_only:
            migrate_store(store.conn, store.MIGRATIONS)
        store.setup()
    except sqlite3.OperationalError as error:
        if read_only and "readonly" in str(error):
            raise NoDatabase(f"no reactgraph runs in {db} (it has no tables yet)") from None
        raise


def migrate_store(connection: sqlite3.Connection, migrations: Sequence[str]) -> None:
    """Run the store's migrations that have not run, with their versions, in one transaction.

    LangGraph's ``SqliteStore.setup`` runs a migration, then records its version: a kill between
    the two (a Ctrl-C as a command starts) left a column added and unrecorded, and every later
    open failed on "duplicate column name". Here a kill anywhere leaves the file as it was, the
    transaction holds off another process's setup (``BEGIN IMMEDIATE``), and a column a file
    made by that older setup already has is not added again. ``connection`` is autocommit; the
    store's ``setup`` then finds nothing to run."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute("CREATE TABLE IF NOT EXISTS store_migrations (v INTEGER PRIMARY KEY)")
        (done,) = connection.execute("SELECT IFNULL(MAX(v), -1) FROM store_migrations").fetchone()
        for version, script in enumerate(migrations[done + 1 :], start=done + 1):
            for statement in _statements(script):
                if not _adds_a_column_it_has(connection, statement):
                    connection.execute(statement)
            connection.execute("INSERT INTO store_migrations (v) VALUES (?)", (version,))
    except BaseException:
        if connection.in_transaction:  # not when SQLite has rolled it back itself (a full disk)
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _statements(script: str) -> Iterator[str]:
    """The SQL statements of a script (as SQLite completes them: a ``;`` in a string or a
    comment does not end one)."""
    statement = ""
    for piece in script.split(";"):
        statement += piece + ";"
        if sqlite3.complete_statement(statement):
            if statement.strip(" \t\n;"):
                yield statement
            statement = ""


_ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+(\w+)\s+ADD\s+(?:COLUMN\s+)?(\w+)", re.I | re.M)


def _adds_a_column_it_has(connection: sqlite3.Connection, statement: str) -> bool:
    """Whether ``statement`` adds a column its table already has (SQLite has no ADD COLUMN IF
    NOT EXISTS)."""
    found = _ADD_COLUMN.search(statement)
    if found is None:
        return False
    table, column = found.groups()
    columns = connection.execute(f"SELECT name FROM pragma_table_info('{table}')")
    return column.lower() in {name.lower() for (name,) in columns}
