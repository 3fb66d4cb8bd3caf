"""Every run record, a page at a time, in time linear in how many there are.

LangGraph's stores page ``search`` with ``ORDER BY updated_at DESC LIMIT ? OFFSET ?``: each page
sorts (or skips) every record before it, so reading them all is quadratic (110,000 records took
214 s). This module is the one place that reads LangGraph's own ``store`` table in SQL, on
every backend (each says how its SQL reads it: ``reactgraph.storage.backends.Dialect``): an index
of ours, ``reactgraph_runs_by_start``, holds the run records (prefix ``reactgraph.runs`` only) by
the record's own start time (``created``) and key, and each page starts where the last one ended
(keyset paging), reading only its own rows.

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

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from reactgraph.storage.backends import INDEX, Backend, Dialect, backend_named, store_backend

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

logger = logging.getLogger(__name__)

RUNS = ("reactgraph", "runs")
PREFIX = ".".join(RUNS)  # how LangGraph's SQL stores spell a namespace (``_namespace_to_text``)


def _dialect_of(dialect: str | Dialect) -> Dialect:
    return backend_named(dialect).dialect if isinstance(dialect, str) else dialect


def create_index_sql(dialect: str | Dialect) -> str:
    start = _dialect_of(dialect).start
    return f"CREATE INDEX IF NOT EXISTS {INDEX} ON store ({start}, key) WHERE prefix = '{PREFIX}'"


def ensure_index(connection: Any, backend: Backend) -> None:
    """Create the index (once) over the backend's sync connection (autocommit)."""
    if not backend.dialect.has_index(connection):
        connection.execute(create_index_sql(backend.dialect))
        logger.info("created the index %s of the run records", INDEX)


def record_pages(store: BaseStore, size: int) -> Iterator[list[tuple[str, Any]]]:
    """Every run record, ``size`` at a time (see the module's doc), as ``(key, value)``: the
    value as the backend's SQL reads it (JSON bytes on SQLite, decoded on PostgreSQL and other
    stores); not checked here (``RunRecord.each`` does: a damaged one must not stop the
    listing)."""
    backend = store_backend(store)
    if backend is None:
        yield from _searched(store, size)
        return
    yield from _keyset_pages(store, backend.dialect, size)


class _Over:
    """A backend's dialect reading over a plain connection of its own (no store, no
    LangGraph): ``threads`` and ``show`` on summarized threads (``reactgraph.app.fastview``)."""

    def __init__(self, dialect: Dialect, connection: Any) -> None:
        self.dialect, self.connection = dialect, connection

    def cursor(self, _store: Any) -> Any:
        return contextlib.nullcontext(self.connection)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.dialect, name)


def connection_record_pages(
    connection: Any, backend: str, size: int
) -> Iterator[list[tuple[str, Any]]]:
    """``record_pages`` over a plain connection of the backend (its own, read-only)."""
    yield from _keyset_pages(None, _Over(backend_named(backend).dialect, connection), size)


def connection_unrecorded_pages(connection: Any, backend: str, size: int) -> Iterator[list[str]]:
    """``unrecorded_pages`` over a plain connection of the backend."""
    yield from _unrecorded(None, _Over(backend_named(backend).dialect, connection), size)


def _keyset_pages(store: Any, dialect: Any, size: int) -> Iterator[list[tuple[str, Any]]]:
    with dialect.cursor(store) as cursor:
        by_start = dialect.has_index(cursor)
    if not by_start:
        logger.info("no index %s (a database only read since): listing by thread id", INDEX)
    after: tuple[Any, str] | None = None
    while True:
        rows = read_page(store, dialect, by_start, size, after)
        yield [(row[0], dialect.value(row[1])) for row in rows]
        if len(rows) < size:
            return
        after = (rows[-1][2], rows[-1][0])


def read_page(
    store: BaseStore,
    dialect: str | Dialect,
    by_start: bool,
    size: int,
    after: tuple[Any, str] | None,
) -> list[tuple[Any, ...]]:
    """One page: ``(key, value, start mark)`` rows after ``after`` (the last row's mark and key)."""
    chosen = _dialect_of(dialect)
    sql, params = page_query(chosen, by_start, size, after)
    with chosen.cursor(store) as cursor:
        return chosen.rows(cursor, sql, params)


def page_query(
    dialect: str | Dialect, by_start: bool, size: int, after: tuple[Any, str] | None
) -> tuple[str, tuple[Any, ...]]:
    """The SQL of one page and its parameters, by start time (the index) or by key."""
    chosen = _dialect_of(dialect)
    p = chosen.param
    if not by_start:  # the table's primary key (prefix, key)
        where = f" AND key > {p}" if after else ""
        sql = f"SELECT key, value, NULL FROM store WHERE prefix = '{PREFIX}'{where}"
        return f"{sql} ORDER BY key LIMIT {p}", ((after[1], size) if after else (size,))
    start, mark = chosen.start, chosen.mark
    sql = f"SELECT key, value, {chosen.shown} FROM {chosen.table} WHERE prefix = '{PREFIX}'"
    if after:
        # Not the row value ``(start, key) < (?, ?)``: SQLite would scan the index from its top
        # for it. ``start <= mark`` is a range of the index; the rest only breaks ties.
        sql += f" AND {start} <= {mark} AND ({start} < {mark} OR key < {p})"
    sql += f" ORDER BY {start} DESC, key DESC LIMIT {p}"
    return sql, ((after[0], after[0], after[1], size) if after else (size,))


def unrecorded_pages(store: BaseStore, size: int) -> Iterator[list[str]]:
    """The threads with checkpoints and no run record (runs made from Python with ``open_db``'s
    checkpointer, other graphs' threads), ``size`` at a time, by thread id: keyset pages over
    the checkpoints table's primary key, each asking the store's for the records, so reading
    them all is linear. Nothing for a store of another kind (its checkpoints are elsewhere)."""
    backend = store_backend(store)
    if backend is None:
        return
    yield from _unrecorded(store, backend.dialect, size)


def _unrecorded(store: Any, dialect: Any, size: int) -> Iterator[list[str]]:
    p = dialect.param
    after: str | None = None
    while True:
        later = f" AND c.thread_id > {p}" if after is not None else ""
        sql = (
            f"SELECT DISTINCT c.thread_id FROM checkpoints c WHERE c.checkpoint_ns = ''{later} "
            f"AND NOT EXISTS (SELECT 1 FROM store s WHERE s.prefix = '{PREFIX}' "
            f"AND s.key = c.thread_id) ORDER BY c.thread_id LIMIT {p}"
        )
        params = (after, size) if after is not None else (size,)
        with dialect.cursor(store) as cursor:
            rows = dialect.rows(cursor, sql, params)
        yield [row[0] for row in rows]
        if len(rows) < size:
            return
        after = rows[-1][0]


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


def has_index(connection: Any, backend: str | Backend) -> bool:
    """Whether the index exists, asked over a connection or a cursor of the backend."""
    chosen = backend_named(backend) if isinstance(backend, str) else backend
    return chosen.dialect.has_index(connection)
