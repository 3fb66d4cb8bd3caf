"""Storage sits behind one backend interface (``reactgraph.storage.backends``): every registered
backend has all of it, the address alone chooses one, the app never asks which it has, every
storage test runs on each of them, and a third backend is one module plus one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reactgraph import build_graph
from reactgraph.storage import backends
from reactgraph.storage.backends import Backend, database_backend, registered
from reactgraph.storage.database import RunRecord, new_record, open_db
from reactgraph.storage.locks import ThreadBusy, thread_lock
from reactgraph.storage.pruning import prune_thread
from reactgraph.storage.snapshots import thread_status
from tests.fakes import action, answer, fake_model
from tests.test_persistence import TEST_ADDRESSES

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = sorted({n for n in vars(Backend) if not n.startswith("_")} | set(Backend.__annotations__))


@pytest.mark.parametrize("backend", registered(), ids=lambda b: b.name)
def test_every_backend_has_the_whole_interface(backend: Backend) -> None:
    missing = [name for name in MEMBERS if not hasattr(backend, name)]
    assert not missing, f"{backend.name} lacks {missing}"
    assert backend.name in TEST_ADDRESSES, f"no test address for the {backend.name} backend"


def test_the_address_chooses_the_backend() -> None:
    assert database_backend("postgresql://u@h/db").name == "postgres"
    assert database_backend("postgres://h/db").name == "postgres"
    assert database_backend("runs/reactgraph.sqlite").name == "sqlite"
    assert database_backend("postgresql.sqlite").name == "sqlite"
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="a database is a SQLite path"):
            database_backend(bad)  # type: ignore[arg-type]


def test_the_tests_db_fixture_runs_on_every_registered_backend() -> None:
    assert set(TEST_ADDRESSES) == {b.name for b in registered()}


def test_nothing_outside_the_backends_asks_which_one_it_has() -> None:
    """No driver import and no backend name outside storage's backend modules (and the
    SQLite saver's own index, the PostgreSQL setup lock)."""
    own = {"graphs/storage/backends", "graphs/storage/history.py", "graphs/storage/setuplock.py"}
    asks = re.compile(r"import (sqlite3|psycopg)|from psycopg|backend.*\.name\b|is_postgres")
    found = []
    for path in sorted((ROOT / "graphs").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if any(relative.startswith(o) for o in own):
            continue
        lines = path.read_text().splitlines()
        found += [f"{relative}: {line.strip()}" for line in lines if asks.search(line)]
    assert not found, found


def test_a_third_backend_is_one_module_and_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(backends, "_MODULES", ("tests.fakes", *backends._MODULES))
    db = "memory://third"
    assert database_backend(db).name == "memory"
    with open_db(db) as (saver, store), thread_lock(db, "t1"):
        with pytest.raises(ThreadBusy), thread_lock(db, "t1"):
            pass
        graph = build_graph(
            "transcript",
            model=fake_model(action("echo", "x"), answer("done")),
            tools=[],
            checkpointer=saver,
        )
        graph.invoke({"question": "q"}, {"configurable": {"thread_id": "t1"}})
        new_record("t1", "q", "transcript", "m", None, None, {}).save(store)
        assert [r.thread_id for r in RunRecord.each(store)] == ["t1"]
        assert thread_status(graph, "t1") == "finished"
        prune_thread(graph, db, "t1")
        assert graph.get_state({"configurable": {"thread_id": "t1"}}).values["answer"] == "done"


def test_a_command_on_sqlite_does_not_import_the_postgres_driver() -> None:
    """A driver's errors are asked for when an exception is handled (``faults()``), so a command
    on SQLite never pays for importing psycopg (0.1-0.2 s of its start-up)."""
    import subprocess
    import sys

    code = (
        "import sys, reactgraph.app.run_commands, reactgraph.app.live, reactgraph.app.options;"
        "print('psycopg' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_drivers_errors_are_caught_once_it_is_in_use() -> None:
    import sqlite3

    import psycopg

    assert {sqlite3.Error, psycopg.Error} <= set(backends.faults())
