"""Every run record, a page at a time, in time linear in how many there are.

LangGraph's stores page ``search`` with ``ORDER BY updated_at DESC LIMIT ? OFFSET ?``: each page
sorts (or skips) every record before it, so reading them all is quadratic (110,000 records took
214 s). This module is the one place that reads LangGraph's own ``store`` table in SQL, on
SQLite and PostgreSQL: an index of ours, ``reactgraph_runs_by_start``, holds the run records
(prefix ``reactgraph.runs`` only) by the record's own start time (``created``) and key, and each
page starts where the last one ended (keyset paging), reading only its own rows.

The order is newest run first, by when the run started. A record's start time and key never
change when it is saved again (``resume --model`` keeps ``created``), so a record saved while a
listing runs is never listed twice and never moves another out of its place: every record there
when the listing started, and still there, is listed once; a run started meanwhile is not.

``open_db``/``aopen_db`` create the index once, under the setup lock on PostgreSQL. A SQLite file
only ever opened read-only since (``threads`` on an older database) has none: it is listed in
the order of the table's primary key ``(prefix, key)``, thread ids, as linear. Any other store
(``InMemoryStore``, ...) is paged with ``search`` as before. tests/test_listing.py fails if
LangGraph changes the table's columns or key.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from langgraph.store.base import BaseStore

logger = logging.getLogger(__name__)

RUNS = ("reactgraph", "runs")
PREFIX = ".".join(RUNS)  # how LangGraph's SQL stores spell a namespace (``_namespace_to_text``)
INDEX = "reactgraph_runs_by_start"
# A record's start time, as each database reads it from the stored JSON. SQLite's store keeps
# orjson's bytes, a BLOB, which SQLite 3.45+ would read as its binary JSONB: cast to text first.
# PostgreSQL keeps jsonb, whose numbers compare as numbers. A record without one counts as
# started at 0 (a NULL would end the paging there: nothing compares with it).
_START = {
    "sqlite": "IFNULL(json_extract(CAST(value AS TEXT), '$.created'), 0)",
    "postgres": "COALESCE(value -> 'created', '0'::jsonb)",
}
_MARK = {"sqlite": "?", "postgres": "%s::jsonb"}  # a start time given back as a parameter
# PostgreSQL, before its statistics count the records (right after many were written), may
# plan a page as a sort of every record older than the mark: only the index's order is allowed.
PLANNER = "SET LOCAL enable_sort = off"


def create_index_sql(dialect: str) -> str:
    start = _START[dialect]
    return f"CREATE INDEX IF NOT EXISTS {INDEX} ON store ({start}, key) WHERE prefix = '{PREFIX}'"


def ensure_index(connection: Any) -> None:
    """Create the index (once) over a sqlite3 connection or a psycopg autocommit one."""
    if not _has_index(connection):
        dialect = "sqlite" if _is_sqlite(connection) else "postgres"
        connection.execute(create_index_sql(dialect))
        logger.info("created the index %s of the run records", INDEX)


async def aensure_index(connection: Any) -> None:
    """``ensure_index`` over a psycopg ``AsyncConnection`` (autocommit)."""
    found = await (await connection.execute("SELECT to_regclass(%s)", (INDEX,))).fetchone()
    if found[0] is None:
        await connection.execute(create_index_sql("postgres"))
        logger.info("created the index %s of the run records", INDEX)


def record_pages(store: BaseStore, size: int) -> Iterator[list[tuple[str, Any]]]:
    """Every run record, ``size`` at a time (see the module's doc), as ``(key, value)``: the
    value as JSON bytes on SQLite, decoded on PostgreSQL and other stores; not checked here
    (``RunRecord.each`` does: a damaged one must not stop the listing)."""
    dialect = _dialect(store)
    if dialect is None:
        yield from _searched(store, size)
        return
    with _cursor(store, dialect) as cursor:
        by_start = _has_index(cursor)
    if not by_start:
        logger.info("no index %s (a database only read since): listing by thread id", INDEX)
    after: tuple[Any, str] | None = None
    while True:
        rows = read_page(store, dialect, by_start, size, after)
        yield [(row[0], _raw(row[1]) if dialect == "sqlite" else row[1]) for row in rows]
        if len(rows) < size:
            return
        after = (rows[-1][2], rows[-1][0])


def read_page(
    store: BaseStore, dialect: str, by_start: bool, size: int, after: tuple[Any, str] | None
) -> list[tuple[str, Any, Any]]:
    """One page: ``(key, value, start mark)`` rows after ``after`` (the last row's mark and key)."""
    sql, params = page_query(dialect, by_start, size, after)
    with _cursor(store, dialect) as cursor:
        if dialect == "sqlite":
            return [tuple(row) for row in cursor.execute(sql, params).fetchall()]
        with cursor.connection.transaction():
            cursor.execute(PLANNER)
            rows = cursor.execute(sql, params).fetchall()
        return [tuple(row.values()) for row in rows]  # dict rows


def page_query(
    dialect: str, by_start: bool, size: int, after: tuple[Any, str] | None
) -> tuple[str, tuple[Any, ...]]:
    """The SQL of one page and its parameters, by start time (the index) or by key."""
    p = "?" if dialect == "sqlite" else "%s"
    if not by_start:  # the table's primary key (prefix, key)
        where = f" AND key > {p}" if after else ""
        sql = f"SELECT key, value, NULL FROM store WHERE prefix = '{PREFIX}'{where}"
        return f"{sql} ORDER BY key LIMIT {p}", ((after[1], size) if after else (size,))
    start, mark = _START[dialect], _MARK[dialect]
    # SQLite, without statistics, would rather take LangGraph's prefix index and sort every
    # record for each page: INDEXED BY makes it use ours (or fail, never be slow).
    table = f"store INDEXED BY {INDEX}" if dialect == "sqlite" else "store"
    shown = f"{start}::text" if dialect == "postgres" else start  # given back exactly as stored
    sql = f"SELECT key, value, {shown} FROM {table} WHERE prefix = '{PREFIX}'"
    if after:
        # Not the row value ``(start, key) < (?, ?)``: SQLite would scan the index from its top
        # for it. ``start <= mark`` is a range of the index; the rest only breaks ties.
        sql += f" AND {start} <= {mark} AND ({start} < {mark} OR key < {p})"
    sql += f" ORDER BY {start} DESC, key DESC LIMIT {p}"
    return sql, ((after[0], after[0], after[1], size) if after else (size,))


def _searched(store: BaseStore, size: int) -> Iterator[list[tuple[str, Any]]]:
    """Plain ``search`` paging, for a store of another kind. A run recorded while this reads
    can push the rest back by one; a record that then reappears on the next page is not given
    twice."""
    offset, previous = 0, set[str]()
    while True:
        items = store.search(RUNS, limit=size, offset=offset)
        yield [(item.key, item.value) for item in items if item.key not in previous]
        if len(items) < size:
            return
        offset, previous = offset + len(items), {item.key for item in items}


def _raw(value: Any) -> Any:
    """A SQLite row's value as JSON bytes to decode (orjson's BLOB, or text written otherwise)."""
    return value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value


def _dialect(store: BaseStore) -> str | None:
    """Which SQL the store's table speaks, for LangGraph's own sync stores; None for others."""
    from langgraph.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        return "sqlite"
    try:
        from langgraph.store.postgres import PostgresStore
    except ImportError:  # no psycopg: no PostgreSQL store either
        return None
    return "postgres" if isinstance(store, PostgresStore) else None


def _cursor(store: Any, dialect: str) -> Any:
    """The store's own cursor (its lock held, its connection or pool): LangGraph's internal."""
    return store._cursor(transaction=False) if dialect == "sqlite" else store._cursor()


def _is_sqlite(connection: Any) -> bool:
    return type(connection).__module__.startswith("sqlite3")


def _has_index(connection: Any) -> bool:
    """Whether the index exists, asked over a connection or a cursor of either database."""
    if _is_sqlite(connection):
        query = "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?"
        row = connection.execute(query, (INDEX,)).fetchone()
        return bool(row[0])
    found = connection.execute("SELECT to_regclass(%s) AS found", (INDEX,)).fetchone()
    return (found["found"] if isinstance(found, dict) else found[0]) is not None
