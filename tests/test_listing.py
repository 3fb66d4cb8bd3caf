"""The listings (``threads``, ``prune --finished``) page through the run records in time linear
in their number, on SQLite and PostgreSQL: each page is one query reading its own rows, in an
index's order, never a sort of every record. Every record is seen exactly once, newest run
first, while records are saved, added and deleted meanwhile. And LangGraph's ``store`` table,
which ``reactgraph.storage.listing`` reads in SQL, still has the columns and key it expects."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.store.memory import InMemoryStore

from reactgraph.storage import listing
from reactgraph.storage.backends import postgres as postgres_backend
from reactgraph.storage.database import RUNS, RunRecord, aopen_db, new_record, open_db
from tests.test_postgres_setup import fresh_database

STORE_COLUMNS = ["prefix", "key", "value", "created_at", "updated_at", "expires_at", "ttl_minutes"]


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A database of its own for this module (other tests write run records to ``test``)."""
    with fresh_database() as db:
        yield db


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of each kind."""
    if request.param == "sqlite":
        yield str(tmp_path / "runs.sqlite")
        return
    url = request.getfixturevalue("postgres")
    yield url
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("DELETE FROM store")


def records(store: Any, count: int, tied: int = 5) -> list[RunRecord]:
    """``count`` saved records, the last ``tied`` of them started at the very same time (the
    key breaks the tie); newest first, as a listing gives them."""
    made = [
        new_record(f"t{n:03}", f"q{n}", "transcript", "m", None, None, {}) for n in range(count)
    ]
    same = made[-1].created
    made[-tied:] = [dataclasses.replace(record, created=same) for record in made[-tied:]]
    for record in made:
        record.save(store)
    return sorted(made, key=lambda r: (r.created, r.thread_id), reverse=True)


@pytest.mark.parametrize("page", [1, 7, 500])
def test_every_record_once_newest_first_while_records_change(db: str, page: int) -> None:
    with open_db(db) as (_, store):
        expected = records(store, 40)
        ids = [r.thread_id for r in expected]
        seen: list[str] = []
        for record in RunRecord.each(store, page=page):
            seen.append(record.thread_id)
            if len(seen) == 10:
                # Saved again (``resume --model``): one still to come, one already given.
                RunRecord.load(store, ids[25]).moved_to("other", None).save(store)
                RunRecord.load(store, ids[3]).moved_to("other", None).save(store)
                new_record("late", "q", "transcript", "m", None, None, {}).save(store)
                store.delete(RUNS, seen[-1])  # where the listing stands
                store.delete(RUNS, ids[30])  # one still to come
        # Each record there throughout once, in order; one deleted meanwhile at most once (its
        # page may have been read already), and "late" not at all (it started afterwards).
        assert [t for t in seen if t != ids[30]] == [t for t in ids if t != ids[30]]
        assert seen.count(ids[30]) == (1 if page > 10 else 0) and "late" not in seen
        assert [r.thread_id for r in RunRecord.all(store)] == ["late"] + [
            t for t in ids if t not in (ids[9], ids[30])
        ]


def test_a_listing_is_one_query_a_page_each_reading_its_own_rows(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pages: list[int] = []
    read_page = listing.read_page

    def counted(*args: Any) -> list[Any]:
        rows = read_page(*args)
        pages.append(len(rows))
        return rows

    monkeypatch.setattr(listing, "read_page", counted)
    with open_db(db) as (_, store):
        made = records(store, 95)
        assert sum(1 for _ in RunRecord.each(store, page=10)) == 95
    assert pages == [10] * 9 + [5]
    middle = made[50]
    if db.startswith("postgresql"):
        for after in (None, (json.dumps(middle.created), middle.thread_id)):
            assert postgres_plan(db, after) == ("Index Scan", listing.INDEX, 10)
    else:
        for after in (None, (middle.created, middle.thread_id)):
            plan = sqlite_plan(db, True, after)
            assert f"USING INDEX {listing.INDEX}" in plan and "TEMP B-TREE" not in plan, plan
            assert ("SEARCH" if after else "SCAN") in plan, plan


def sqlite_plan(db: str, by_start: bool, after: tuple[Any, str] | None) -> str:
    sql, params = listing.page_query("sqlite", by_start, 10, after)
    with sqlite3.connect(db) as connection:
        return " / ".join(
            row[-1] for row in connection.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        )


def postgres_plan(db: str, after: tuple[Any, str] | None) -> tuple[str, str, int]:
    """The scan under a page's LIMIT, planned as the listing plans it: its kind, its index and
    how many rows it read (a plan that sorted the records would have a Sort there)."""
    sql, params = listing.page_query("postgres", True, 10, after)
    with psycopg.connect(db, autocommit=True) as connection, connection.transaction():
        connection.execute(postgres_backend.PLANNER)
        [[plan]] = connection.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params).fetchall()
    top = plan[0]["Plan"]
    assert top["Node Type"] == "Limit", top
    [scan] = top["Plans"]
    return scan["Node Type"], scan.get("Index Name", ""), scan["Actual Rows"]


def steps(connection: sqlite3.Connection, read: Any) -> int:
    """How many SQLite virtual-machine steps (in hundreds) ``read()`` takes on the connection."""
    count = [0]

    def step() -> int:
        count[0] += 1
        return 0

    connection.set_progress_handler(step, 100)
    try:
        read()
    finally:
        connection.set_progress_handler(None, 100)
    return count[0]


@pytest.mark.parametrize("indexed", [True, False])
def test_sqlite_work_grows_linearly_with_the_records(tmp_path: Path, indexed: bool) -> None:
    """Four times the records, about four times the steps (OFFSET paging: sixteen times)."""
    work = []
    for count in (300, 1200):
        db = str(tmp_path / f"{count}.sqlite")
        with open_db(db) as (_, store):
            records(store, count)
            if not indexed:  # a file from before the index, only read since
                store.conn.execute(f"DROP INDEX {listing.INDEX}")
        with open_db(db, read_only=True) as (_, store):
            every = lambda: sum(1 for _ in RunRecord.each(store, page=10))  # noqa: E731
            assert every() == count
            work.append(steps(store.conn, every))
    assert work[1] < 5 * work[0], work
    if not indexed:
        plan = sqlite_plan(db, False, (None, "t050"))
        assert "sqlite_autoindex_store_1 (prefix=? AND key>?)" in plan, plan


def test_a_file_read_only_since_before_the_index_is_listed_by_thread_id(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    with open_db(db) as (_, store):
        made = records(store, 23)
        store.conn.execute(f"DROP INDEX {listing.INDEX}")
    with open_db(db, read_only=True) as (_, store):
        listed = [r.thread_id for r in RunRecord.each(store, page=7)]
    assert listed == sorted(r.thread_id for r in made)
    with open_db(db) as (_, store):  # any command that writes adds the index
        assert [r.thread_id for r in RunRecord.each(store, page=7)] == [r.thread_id for r in made]


def test_the_async_opener_creates_the_index_too(db: str) -> None:
    async def open_it() -> None:
        async with aopen_db(db):
            pass

    asyncio.run(open_it())
    if db.startswith("postgresql"):
        with psycopg.connect(db) as connection:
            assert connection.execute("SELECT to_regclass(%s)", (listing.INDEX,)).fetchone()[0]
    else:
        with sqlite3.connect(db) as connection:
            assert listing.has_index(connection, "sqlite")


def test_a_record_without_a_start_time_ends_no_listing(db: str) -> None:
    with open_db(db) as (_, store):
        made = records(store, 6)
        store.put(RUNS, "no-start", {"thread_id": "no-start"})
        store.put(RUNS, "null-start", {"thread_id": "null-start", "created": None})
        listed = [key for page in listing.record_pages(store, 1) for key, _ in page]
    assert listed[:6] == [r.thread_id for r in made]
    assert sorted(listed[6:]) == ["no-start", "null-start"]


@pytest.mark.parametrize("page", [1, 7, 500])
def test_another_store_is_paged_with_search(page: int) -> None:
    store = InMemoryStore()
    made = records(store, 23)
    seen = []
    for record in RunRecord.each(store, page=page):
        seen.append(record.thread_id)
        if len(seen) == 5:  # pushes the rest back by one: none is given twice
            new_record("late", "q", "transcript", "m", None, None, {}).save(store)
    assert sorted(t for t in seen if t != "late") == sorted(r.thread_id for r in made)
    assert len(seen) == len(set(seen))


def test_langgraph_store_table_is_the_one_the_listing_reads(db: str) -> None:
    """Fails if LangGraph changes its ``store`` table: see ``reactgraph.storage.listing``."""
    with open_db(db) as (_, store):
        made = records(store, 12)
        store.put(("reactgraph", "notes"), "n1", {"created": 9e99})  # another namespace
        searched = [item.key for item in store.search(RUNS, limit=100)]
        listed = [r.thread_id for r in RunRecord.each(store, page=5)]
    assert sorted(listed) == sorted(searched) == sorted(r.thread_id for r in made)
    if db.startswith("postgresql"):
        with psycopg.connect(db) as connection:
            columns = connection.execute(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_name = 'store' AND table_schema = current_schema()"
                " ORDER BY ordinal_position"
            ).fetchall()
            key = connection.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'store'::regclass"
                " AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)"
            ).fetchall()
        assert [name for name, _ in columns] == STORE_COLUMNS
        assert dict(columns)["value"] == "jsonb" and dict(columns)["key"] == "text"
    else:
        with sqlite3.connect(db) as connection:
            info = connection.execute("PRAGMA table_info(store)").fetchall()
        columns = [(row[1], row[2].lower()) for row in info]
        key = sorted((row[5], row[1]) for row in info if row[5])
        key = [(name,) for _, name in key]
        assert [name for name, _ in columns] == STORE_COLUMNS
        assert dict(columns)["value"] == "text" and dict(columns)["key"] == "text"
    assert key == [("prefix",), ("key",)]
