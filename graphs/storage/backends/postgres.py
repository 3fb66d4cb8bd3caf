"""PostgreSQL: LangGraph's ``PostgresSaver``/``PostgresStore`` (and their async twins), set up under
a database-wide lock (``reactgraph.storage.setuplock``), thread locks as session advisory locks
(any number of machines), and faults explained by their SQLSTATE."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from reactgraph.storage.backends import INDEX, Dialect
from reactgraph.storage.errors import DatabaseError

# Words of a fault in reaching the server (psycopg gives these no SQLSTATE).
_UNREACHABLE = (
    "connection",
    "could not connect",
    "could not translate host",
    "server closed",
    "timeout",
    "timed out",
)
# PostgreSQL, before its statistics count the records (right after many were written), may
# plan a page as a sort of every record older than the mark: only the index's order is allowed.
PLANNER = "SET LOCAL enable_sort = off"


@dataclass(frozen=True)
class _Fault:
    """A kind of fault the server reports, known by its SQLSTATE or by words of its message."""

    states: tuple[str, ...]
    """The SQLSTATE codes, or classes (their first characters), of this fault."""
    words: tuple[tuple[str, ...], ...]
    """Groups of words: the message has all of one group's (lowercase) when it is this fault."""
    message: str
    """What it says, with ``{where}`` and ``{text}`` (the server's words) filled in."""
    unstated: bool = False
    """Known by its words only when the error has no SQLSTATE (psycopg's own faults)."""

    def matches(self, state: str, lower: str) -> bool:
        if state.startswith(self.states):
            return True
        if state and self.unstated:
            return False
        return any(all(word in lower for word in group) for group in self.words)


# The known faults, first match first.
_FAULTS = (
    _Fault(
        ("3D000",),
        (("database", "does not exist"),),
        "the database {where} does not exist ({text}); create it (createdb), or fix the URL",
    ),
    _Fault(
        ("28",),
        (("authentication failed",),),
        "the server refused the login to {where} ({text}); check the user and the password",
    ),
    _Fault(
        ("53100",),
        (("no space left",),),
        "the database server of {where} is out of disk space ({text}); free some, then retry",
    ),
    _Fault(
        ("42501",),
        (("permission denied",),),
        "the database {where} refused this user ({text}); grant it the rights on the "
        "database, or use another user",
    ),
    _Fault(
        ("08", "57P"),
        tuple((word,) for word in _UNREACHABLE),
        "the database {where} failed ({text}); check that the server is up and the URL",
        unstated=True,
    ),
)


def _refused(where: str, state: str, text: str) -> str:
    """A fault by its SQLSTATE class: the server is out of reach, or it refused."""
    lower = text.lower()
    for fault in _FAULTS:
        if fault.matches(state, lower):
            return fault.message.format(where=where, text=text)
    # Reached, and it answered with an error: a fault in the database, not in reaching it.
    return (
        f"the database {where} refused an operation ({text}); it was reached: see the "
        "server's log, then retry"
    )


class _Dialect:
    param = "%s"
    start = "COALESCE(value -> 'created', '0'::jsonb)"  # jsonb numbers compare as numbers
    mark = "%s::jsonb"
    shown = f"{start}::text"
    table = "store"

    def cursor(self, store: Any) -> Any:
        return store._cursor()  # LangGraph's internal: the store's pool or connection

    def has_index(self, connection: Any) -> bool:
        found = connection.execute("SELECT to_regclass(%s) AS found", (INDEX,)).fetchone()
        return (found["found"] if isinstance(found, dict) else found[0]) is not None

    def rows(self, cursor: Any, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with cursor.connection.transaction():
            cursor.execute(PLANNER)
            rows = cursor.execute(sql, params).fetchall()
        return [tuple(row.values()) for row in rows]  # dict rows

    def value(self, stored: Any) -> Any:
        return stored  # jsonb, decoded by psycopg


def _one(row: Any) -> Any:
    """The one value of a row a query always returns."""
    if row is None:
        raise DatabaseError("the database returned no row for a query that always has one")
    return row[0]


def _lock_name(thread_id: str) -> str:
    # The name shows in pg_stat_activity, so an operator can see who holds which thread.
    return f"reactgraph-lock:{thread_id}"[:63]


class Postgres:
    name = "postgres"
    shared = True
    keeps_steps = True
    dialect: Dialect = _Dialect()

    def claims(self, db: str) -> bool:
        return db.startswith(("postgresql://", "postgres://"))

    def address(self, db: str) -> str:
        return db

    def shown(self, db: str) -> str:
        parts = urlsplit(db)
        if parts.password is None:
            return db
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))

    def exists(self, db: str) -> bool:
        return True  # the server says otherwise when asked

    def lock_place(self, db: str) -> str:
        return self.shown(db)

    def faults(self) -> tuple[type[BaseException], ...]:
        psycopg = sys.modules.get("psycopg")  # 0.1-0.2 s to import: only once it is in use
        return (psycopg.Error,) if psycopg is not None else ()

    def explain(self, db: str, error: BaseException) -> str:
        text = " ".join(str(error).split()) or type(error).__name__
        return _refused(self.shown(db), getattr(error, "sqlstate", None) or "", text)

    @contextlib.contextmanager
    def open(self, db: str, read_only: bool) -> Iterator[Any]:
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore

        from reactgraph.storage.listing import ensure_index
        from reactgraph.storage.locks import locking
        from reactgraph.storage.setuplock import setup_lock

        try:
            with (
                PostgresSaver.from_conn_string(db) as saver,
                PostgresStore.from_conn_string(db) as store,
            ):
                with setup_lock(db) as connection:  # two commands on a fresh database race
                    saver.setup()
                    store.setup()
                    ensure_index(connection, self)
                yield (saver if read_only else locking(saver, db)), store
        except Exception as error:
            if type(error).__module__.startswith("psycopg"):
                raise DatabaseError(self.explain(db, error)) from error
            raise

    @contextlib.asynccontextmanager
    async def aopen(self, db: str) -> AsyncIterator[Any]:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from langgraph.store.postgres.aio import AsyncPostgresStore

        from reactgraph.storage.listing import create_index_sql
        from reactgraph.storage.locks import locking
        from reactgraph.storage.setuplock import asetup_lock

        try:
            async with (
                AsyncPostgresSaver.from_conn_string(db) as saver,
                AsyncPostgresStore.from_conn_string(db) as store,
            ):
                async with asetup_lock(db) as connection:
                    await saver.setup()
                    await store.setup()
                    found = await connection.execute("SELECT to_regclass(%s)", (INDEX,))
                    if (await found.fetchone())[0] is None:
                        await connection.execute(create_index_sql(self.dialect))
                yield locking(saver, db), store
        except Exception as error:  # as ``open``: one line naming the database
            if type(error).__module__.startswith("psycopg"):
                raise DatabaseError(self.explain(db, error)) from error
            raise

    @contextlib.contextmanager
    def lock(self, db: str, thread_id: str) -> Iterator[Any]:
        import psycopg

        from reactgraph.storage.locks import Lease, ThreadBusy

        with psycopg.connect(db, autocommit=True, application_name=_lock_name(thread_id)) as conn:
            key = _one(conn.execute("SELECT hashtextextended(%s, 0)", (thread_id,)).fetchone())
            got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if not got or not got[0]:
                raise ThreadBusy(f"thread {thread_id} is running in another process")
            try:
                yield Lease(thread_id, conn)
            finally:
                with contextlib.suppress(Exception):  # a dead connection has let go already
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    @contextlib.asynccontextmanager
    async def alock(self, db: str, thread_id: str, saver: Any) -> AsyncIterator[Any]:
        import psycopg

        from reactgraph.storage.locks import Lease, ThreadBusy

        async with await psycopg.AsyncConnection.connect(
            db, autocommit=True, application_name=_lock_name(thread_id)
        ) as conn:
            found = await conn.execute("SELECT hashtextextended(%s, 0)", (thread_id,))
            key = _one(await found.fetchone())
            got = await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))).fetchone()
            if not got or not got[0]:
                raise ThreadBusy(f"thread {thread_id} is running in another process")
            try:
                # The lease's writer: a saver like the async ``saver``, over the lock's connection.
                kind: Any = type(saver)  # an async PostgreSQL saver: it takes the connection
                yield Lease(thread_id, conn, kind(conn, serde=saver.serde))
            finally:
                with contextlib.suppress(Exception):  # a dead connection has let go already
                    await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def delete_older(self, db: str, thread_id: str, keep: str) -> None:
        import psycopg

        with psycopg.connect(db) as connection, connection.transaction():
            for table in ("checkpoint_writes", "checkpoints"):
                connection.execute(
                    f"DELETE FROM {table} WHERE thread_id = %s AND checkpoint_id < %s",
                    (thread_id, keep),
                )
            connection.execute(
                "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND NOT EXISTS ("
                " SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id"
                " AND c.checkpoint_ns = b.checkpoint_ns"
                " AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)",
                (thread_id,),
            )

    def compact(self, db: str) -> None:
        """Nothing: the server's autovacuum does it."""

    def quick_reader(self, db: str) -> None:
        """None: the listings read PostgreSQL through LangGraph (no summaries are kept there)."""
        return None

    def owns(self, store: Any) -> bool:
        # By its class's module: asking about a SQLite store must not load psycopg.
        return any(c.__module__ == "langgraph.store.postgres.base" for c in type(store).__mro__)


BACKEND = Postgres()
