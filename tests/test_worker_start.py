"""A database fault while the batch workers start (issue 45, 6) is the one line that names the
database, as at any other moment: never a worker's traceback, nor every question reported as
``WorkerDied: no worker left``. And a resume of an unknown thread stores nothing."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from reactgraph.app.pool import Job, run_parallel
from reactgraph.storage.database import aopen_db
from reactgraph.storage.errors import DatabaseError


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens on it once closed


DOWN = f"postgresql://postgres@127.0.0.1:{_closed_port()}/reactgraph_down"


@contextlib.asynccontextmanager
async def down_runner() -> AsyncIterator[Any]:
    """An ``OpenRunner`` whose database is down, opened as the batch's workers open theirs."""
    async with aopen_db(DOWN):
        yield None  # never reached


def test_the_async_open_names_the_database_in_one_line() -> None:
    import asyncio

    async def opened() -> None:
        async with aopen_db(DOWN):
            pass

    with pytest.raises(DatabaseError) as raised:
        asyncio.run(opened())
    assert "127.0.0.1" in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.slow
def test_a_database_down_while_workers_start_is_the_database_error(
    capfd: pytest.CaptureFixture[str],
) -> None:
    jobs = [Job(index, f"q{index}", f"t{index}") for index in range(6)]
    with pytest.raises(DatabaseError) as raised:
        list(run_parallel(down_runner, jobs, workers=2, concurrency=2))
    assert "127.0.0.1" in str(raised.value) and "WorkerDied" not in str(raised.value)
    assert "Traceback" not in capfd.readouterr().err


def test_resume_of_an_unknown_thread_stores_no_row(tmp_path: Any) -> None:
    import sqlite3

    from tests.inprocess import run_main

    db = tmp_path / "runs.sqlite"
    assert run_main("ask", "q", "--db", str(db), "--base-url", "http://127.0.0.1:9").returncode
    with sqlite3.connect(db) as conn:
        before = [
            conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("checkpoints", "writes")
        ]
    result = run_main("resume", "no-such-thread", "--db", str(db))
    assert result.returncode != 0 and "no-such-thread" in result.stdout + result.stderr
    with sqlite3.connect(db) as conn:
        after = [
            conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("checkpoints", "writes")
        ]
        ghost = conn.execute("SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'no-such-thread'")
        assert ghost.fetchone()[0] == 0
    assert after == before
