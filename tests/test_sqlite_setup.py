"""A SQLite file's store tables are set up in one transaction (``migrate_store``): a command
stopped anywhere in its setup leaves a file the next one opens, a file left half-migrated by
LangGraph's own ``setup`` (a column added, its version unrecorded) is mended, and many openers
of a fresh file at once all succeed."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.sqlite import SqliteStore

from reactgraph.storage.backends.sqlite import migrate_store
from reactgraph.storage.database import aopen_db, open_db
from tests.fakes import open_at_once


def schema(path: Path) -> list[tuple[Any, ...]]:
    """The file's tables, indexes and columns, and the store's recorded migrations."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        found = connection.execute(
            "SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
            " ORDER BY name"
        ).fetchall()
        columns = connection.execute(
            "SELECT name FROM pragma_table_info('store') ORDER BY cid"
        ).fetchall()
        done = connection.execute("SELECT v FROM store_migrations ORDER BY v").fetchall()
    return [*found, *columns, *done]


def tables(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return [name for (name,) in connection.execute("SELECT name FROM sqlite_master")]


def langgraphs_own(path: Path) -> list[tuple[Any, ...]]:
    """The schema LangGraph's ``SqliteStore.setup`` makes of a fresh file."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        SqliteStore(connection).setup()
    return schema(path)


def opened(path: Path) -> list[tuple[Any, ...]]:
    """The schema of a fresh file opened by reactgraph (checkpoints, store, the records' index)."""
    with open_db(str(path)):
        pass
    return schema(path)


def test_the_migrations_make_what_langgraphs_setup_makes(tmp_path: Path) -> None:
    """The one place that runs LangGraph's ``SqliteStore.MIGRATIONS`` itself: if a release
    changes them (or how they are recorded), this fails."""
    ours, theirs = tmp_path / "ours.sqlite", tmp_path / "theirs.sqlite"
    with contextlib.closing(sqlite3.connect(ours, isolation_level=None)) as connection:
        migrate_store(connection, SqliteStore.MIGRATIONS)
        migrate_store(connection, SqliteStore.MIGRATIONS)  # twice: nothing left to run
    assert schema(ours) == langgraphs_own(theirs)
    assert [row for row in schema(ours) if len(row) == 1][-1] == (len(SqliteStore.MIGRATIONS) - 1,)


class Stopping:
    """A connection that stops (as a Ctrl-C does) at its ``at``-th statement."""

    def __init__(self, connection: sqlite3.Connection, at: int) -> None:
        self.connection, self.at, self.count = connection, at, 0

    @property
    def in_transaction(self) -> bool:
        return self.connection.in_transaction

    def execute(self, sql: str, *args: Any) -> Any:
        self.count += 1
        if self.count == self.at and sql not in ("ROLLBACK", "COMMIT"):
            raise KeyboardInterrupt
        return self.connection.execute(sql, *args)


def test_a_stop_at_any_statement_of_the_setup_leaves_a_file_that_opens(tmp_path: Path) -> None:
    reference = opened(tmp_path / "reference.sqlite")
    stops = 0
    for at in range(1, 100):
        path = tmp_path / f"stopped-{at}.sqlite"
        stopping = Stopping(sqlite3.connect(path, isolation_level=None), at)
        try:
            migrate_store(stopping, SqliteStore.MIGRATIONS)
        except KeyboardInterrupt:
            stops += 1
            assert tables(path) == [], at  # all of it or none of it
        stopping.connection.close()
        if stopping.count < at:
            break  # the setup ran through: every statement has had its stop
        with open_db(str(path)) as (_saver, store):
            store.put(("runs",), "k", {"v": 1})
        assert schema(path) == reference, at
    assert stops > len(SqliteStore.MIGRATIONS)  # each migration's statements, and its record


class RolledBack(Stopping):
    """A connection whose ``at``-th statement fails after SQLite has rolled the transaction back
    itself (as a full disk or an I/O error does)."""

    def execute(self, sql: str, *args: Any) -> Any:
        self.count += 1
        if self.count == self.at:
            self.connection.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        return self.connection.execute(sql, *args)


def test_a_failure_sqlite_rolled_back_itself_is_the_error_raised(tmp_path: Path) -> None:
    path = tmp_path / "full.sqlite"
    failing = RolledBack(sqlite3.connect(path, isolation_level=None), at=3)
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        migrate_store(failing, SqliteStore.MIGRATIONS)
    failing.connection.close()
    assert tables(path) == []


def test_a_file_left_half_migrated_by_langgraphs_setup_is_mended(tmp_path: Path) -> None:
    """What a Ctrl-C between LangGraph's ALTER TABLE and its version's INSERT left: the
    ``expires_at`` column, its migration unrecorded ("duplicate column name" on every open)."""
    reference = opened(tmp_path / "reference.sqlite")
    path = tmp_path / "half.sqlite"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        migrate_store(connection, SqliteStore.MIGRATIONS[:2])
        connection.executescript(SqliteStore.MIGRATIONS[2])  # the column, no version
    with open_db(str(path)) as (_saver, store):
        store.put(("runs",), "k", {"v": 1})
        assert store.get(("runs",), "k").value == {"v": 1}
    assert schema(path) == reference


def test_many_openers_of_a_fresh_file_all_succeed(tmp_path: Path) -> None:
    assert open_at_once(str(tmp_path / "fresh.sqlite")) == []


def test_the_async_opening_migrates_the_same_way(tmp_path: Path) -> None:
    reference = opened(tmp_path / "reference.sqlite")
    path = tmp_path / "half.sqlite"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        migrate_store(connection, SqliteStore.MIGRATIONS[:3])
        connection.executescript(SqliteStore.MIGRATIONS[3])  # ttl_minutes, no version

    async def put() -> None:
        async with aopen_db(str(path)) as (_saver, store):
            await store.aput(("runs",), "k", {"v": 1})

    asyncio.run(put())
    assert schema(path) == reference


@pytest.mark.parametrize("script", ["", "-- only a comment", "SELECT ';' ; SELECT 2"])
def test_a_scripts_statements_end_where_sqlite_ends_them(script: str) -> None:
    from reactgraph.storage.backends.sqlite import _statements

    expected = {"": [], "-- only a comment": []}.get(script, ["SELECT ';' ;", " SELECT 2;"])
    assert list(_statements(script)) == expected
