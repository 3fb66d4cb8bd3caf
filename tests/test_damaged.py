"""One damaged checkpoint row (flipped bytes, a truncated blob, an unknown codec name), or one
damaged run record (a field missing or of the wrong type, a value that is no record), costs one
thread, never every listing: ``show`` and ``resume`` of it are one line naming it (exit 2),
``threads`` lists every other thread and marks it damaged, ``prune --finished`` skips it with a
warning and prunes the others."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from reactgraph import build_graph
from reactgraph.app.cli import main
from reactgraph.storage.database import new_record, open_db
from reactgraph.storage.listing import PREFIX
from tests.fakes import ToolLog, three_turn_model

DAMAGES = {
    "flipped": lambda kind, blob: (
        kind,
        blob[:8] + bytes(b ^ 0x5A for b in blob[8:40]) + blob[40:],
    ),
    "truncated": lambda kind, blob: (kind, blob[: len(blob) // 2]),
    "codec": lambda kind, blob: ("msgpack+lz9", blob),
}


def finished_threads(db: str) -> None:
    """Three finished threads, ``good-1``, ``bad`` and ``good-2``, each with its record."""
    with open_db(db) as (saver, store):
        for thread in ("good-1", "bad", "good-2"):
            new_record(thread, f"question {thread}", "transcript", "m", None, None, {}).save(store)
            graph = build_graph(
                "transcript", model=three_turn_model(), tools=[ToolLog().echo()], checkpointer=saver
            )
            graph.invoke({"question": "q"}, {"configurable": {"thread_id": thread}})


def damaged_db(tmp_path: Path, damage: str) -> str:
    """Three finished threads, ``good-1``, ``bad`` and ``good-2``; one row of ``bad`` damaged."""
    db = str(tmp_path / "runs.sqlite")
    finished_threads(db)
    with sqlite3.connect(db) as connection:
        # The newest checkpoint of the thread: every read of its state decodes it.
        rowid, kind, blob = connection.execute(
            "SELECT rowid, type, checkpoint FROM checkpoints WHERE thread_id = 'bad'"
            " ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchone()
        assert kind == "msgpack+zlib"
        kind, blob = DAMAGES[damage](kind, blob)
        connection.execute(
            "UPDATE checkpoints SET type = ?, checkpoint = ? WHERE rowid = ?", (kind, blob, rowid)
        )
    return db


def one_line(capsys: pytest.CaptureFixture[str], code: int, fragment: str) -> None:
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_one_damaged_row_costs_one_thread(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = damaged_db(tmp_path, damage)
    one_line(capsys, main(["show", "bad", "--db", db]), "thread bad is damaged")
    resume = ["resume", "bad", "--db", db, "--base-url", "http://127.0.0.1:9/v1"]
    one_line(capsys, main(resume), "thread bad is damaged")

    assert main(["threads", "--db", db]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["bad"][2:4] == ["damaged", "?"]
    assert rows["good-1"][2:4] == rows["good-2"][2:4] == ["answered", "3"]

    assert main(["prune", "--finished", "--db", db]) == 0
    printed = capsys.readouterr()
    assert "thread bad is damaged" in printed.err and "kept whole" in printed.err
    assert "pruned 2 finished thread(s); 1 not finished" in printed.out
    assert main(["show", "good-2", "--db", db]) == 0
    assert "answered" in capsys.readouterr().out


def test_listings_read_every_record_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import reactgraph.app.viewing
    import reactgraph.storage.records
    from reactgraph.storage import listing
    from reactgraph.storage.database import RunRecord

    db = str(tmp_path / "runs.sqlite")
    limits: list[int] = []
    with open_db(db) as (_, store):
        for n in range(11):
            new_record(f"t{n:02}", "q", "transcript", "m", None, None, {}).save(store)
        read_page = listing.read_page

        def page(store, dialect, by_start, size, after):
            limits.append(size)
            return read_page(store, dialect, by_start, size, after)

        monkeypatch.setattr(listing, "read_page", page)
        seen = []
        for record in RunRecord.each(store, page=4):
            seen.append(record.thread_id)
            if record.thread_id == "t06":  # one recorded mid-listing: none is lost or repeated
                new_record("late", "q", "transcript", "m", None, None, {}).save(store)
        old = [t for t in seen if t != "late"]
        assert sorted(old) == [f"t{n:02}" for n in range(11)], seen  # each once, none lost
        assert set(limits) == {4}
    # The commands read pages of RECORDS_PAGE (never one search for everything).
    monkeypatch.setattr(reactgraph.storage.records, "RECORDS_PAGE", 3)
    monkeypatch.setattr(reactgraph.app.viewing, "RECORDS_PAGE", 3)
    limits.clear()
    assert main(["threads", "--db", db]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sum(line.split()[:1] == ["thread"] for line in out) == 1  # one header
    assert {line.split()[0] for line in out[1:]} == {f"t{n:02}" for n in range(11)} | {"late"}
    assert limits and max(limits) == 3
    limits.clear()
    assert main(["prune", "--finished", "--db", db]) == 0
    assert "12 not finished" in capsys.readouterr().out and max(limits) == 3


RECORD_DAMAGES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "no created": lambda value: {k: v for k, v in value.items() if k != "created"},
    "no question": lambda value: {k: v for k, v in value.items() if k != "question"},
    "created is text": lambda value: {**value, "created": "yesterday"},
    "question is a number": lambda value: {**value, "question": 42},
    "settings is text": lambda value: {**value, "settings": "x"},
    "unknown variant": lambda value: {**value, "variant": "no-such-variant"},
    "a list": lambda value: [value],
    "a string": lambda value: "damaged",
}


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new database of each kind (PostgreSQL: one of its own, so a listing sees only it)."""
    if request.param == "sqlite":
        yield str(tmp_path / "runs.sqlite")
        return
    from tests.test_postgres_setup import fresh_database

    with fresh_database() as db:
        yield db


def damage_record(db: str, thread: str, damage: str) -> None:
    """The thread's run record replaced, straight in the store's table, as damage would be."""
    where = f"WHERE prefix = '{PREFIX}' AND key = "
    if db.startswith("postgresql"):
        with psycopg.connect(db, autocommit=True) as connection:
            (value,) = connection.execute(
                f"SELECT value FROM store {where} %s", (thread,)
            ).fetchone()
            damaged = json.dumps(RECORD_DAMAGES[damage](value))
            connection.execute(f"UPDATE store SET value = %s::jsonb {where} %s", (damaged, thread))
        return
    with sqlite3.connect(db) as connection:
        (value,) = connection.execute(f"SELECT value FROM store {where} ?", (thread,)).fetchone()
        damaged = json.dumps(RECORD_DAMAGES[damage](json.loads(value))).encode()
        connection.execute(f"UPDATE store SET value = ? {where} ?", (damaged, thread))


@pytest.mark.parametrize("damage", list(RECORD_DAMAGES))
def test_one_damaged_run_record_costs_one_thread(
    damage: str, database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = database
    finished_threads(db)
    damage_record(db, "bad", damage)

    assert main(["threads", "--db", db]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err, printed.err
    rows = {line.split()[0]: line.split() for line in printed.out.splitlines()[1:]}
    assert set(rows) == {"good-1", "bad", "good-2"}, printed.out
    assert rows["bad"][2:4] == ["damaged", "?"]
    assert rows["good-1"][2:4] == rows["good-2"][2:4] == ["answered", "3"]

    expected = "thread bad is damaged: its run record cannot be read"
    one_line(capsys, main(["show", "bad", "--db", db]), expected)
    resume = ["resume", "bad", "--db", db, "--base-url", "http://127.0.0.1:9/v1"]
    one_line(capsys, main(resume), expected)
    ask = ["ask", "q", "--thread", "bad", "--db", db, "--base-url", "http://127.0.0.1:9/v1"]
    one_line(capsys, main(ask), expected)  # a follow-up on it is refused: never written over

    assert main(["prune", "--finished", "--db", db]) == 0
    printed = capsys.readouterr()
    assert f"{expected}" in printed.err and "kept whole" in printed.err, printed.err
    assert "pruned 2 finished thread(s); 1 not finished" in printed.out
    assert main(["prune", "bad", "good-1", "--db", db]) == 0  # named: the same
    printed = capsys.readouterr()
    assert expected in printed.err and "pruned 1 finished thread(s); 1 not" in printed.out
    assert main(["show", "good-2", "--db", db]) == 0
    assert "answered" in capsys.readouterr().out
