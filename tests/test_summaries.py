"""``threads`` and ``show`` read a thread's summary (``reactgraph.storage.summaries``) with plain
SQL, and print exactly what LangGraph's read of the thread prints: for every way a run ends or
pauses, the same database is listed and shown with its summaries, then without them (each
thread read through LangGraph), and the outputs compared. A summary saved before a kill never
makes a thread that went on since look finished, and reading summarized threads imports nothing
of LangGraph (checked by the modules a fresh interpreter holds; bench/readers.py times it)."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from reactgraph.storage.summaries import PREFIX
from tests.fakes import FakeOpenAIServer, Fault, seed_responder
from tests.inprocess import run_main
from tests.test_cli import cli, popen
from tests.test_startup import HEAVY, modules_after, tops

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow

QUESTION = "How many years passed between the founding of the two towns?"


def summaries(db: Path) -> dict[str, bytes]:
    with contextlib.closing(sqlite3.connect(db)) as connection:
        rows = connection.execute("SELECT key, value FROM store WHERE prefix = ?", (PREFIX,))
        return dict(rows.fetchall())


def drop_summaries(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("DELETE FROM store WHERE prefix = ?", (PREFIX,))


def shown(db: Path, threads: list[str]) -> list[str]:
    """What ``threads`` and each ``show`` print, at a fixed width."""
    env = {"COLUMNS": "120"}
    outputs = [run_main("threads", "--db", str(db), env=env)]
    outputs += [run_main("show", thread, "--db", str(db), env=env) for thread in threads]
    for result in outputs:
        assert result.returncode == 0, result.stderr
    return [result.stdout for result in outputs]


def ask(server: FakeOpenAIServer, db: Path, thread: str, *more: str) -> list[str]:
    return ["ask", QUESTION, "--base-url", server.url, "--db", str(db), "--thread", thread, *more]


def answered_thread(server: FakeOpenAIServer, db: Path, thread: str) -> Path:
    """``db`` holding ``thread``, the seed question asked and answered on ``server``."""
    server.responder = seed_responder
    assert run_main(*ask(server, db, thread)).returncode == 0
    return db


def every_ending(server: FakeOpenAIServer, db: Path) -> dict[str, str]:
    """One thread per ending (and per pause): thread id -> the status ``threads`` gives it."""
    server.responder = seed_responder
    assert run_main(*ask(server, db, "answered")).returncode == 0
    run_main(*ask(server, db, "budget", "--max-run-tokens", "1"))
    server.responder = lambda _body: "I am still thinking."
    run_main(*ask(server, db, "stuck"))
    server.responder = lambda _body: Fault(401, "the key is not valid")
    run_main(*ask(server, db, "interrupted"))
    server.responder = seed_responder
    waiting = cli(*ask(server, db, "waiting", "--approve", "calculator"), stdin=subprocess.DEVNULL)
    assert "awaiting_approval" in waiting.stdout, (waiting.stdout, waiting.stderr)
    return {
        "answered": "answered",
        "budget": "budget_exhausted",
        "stuck": "stuck",
        "interrupted": "interrupted",
        "waiting": "awaiting_approval",
    }


def status_in(listing: str, thread: str) -> str:
    (row,) = [line for line in listing.splitlines() if line.startswith(thread + " ")]
    return row.split()[2]


def test_every_ending_reads_the_same_from_its_summary_as_through_langgraph(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db = tmp_path / "runs.sqlite"
    statuses = every_ending(openai_server, db)
    assert set(summaries(db)) == set(statuses)  # every run saved its summary
    fast = shown(db, list(statuses))
    for thread, status in statuses.items():
        assert status_in(fast[0], thread) == status, fast[0]
    reads = [["threads", "--db", str(db)], *(["show", t, "--db", str(db)] for t in statuses)]
    assert not tops(modules_after(*reads)) & set(HEAVY)  # each one read from its summary
    drop_summaries(db)
    assert shown(db, list(statuses)) == fast


def test_reading_summarized_threads_imports_no_langgraph(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db = answered_thread(openai_server, tmp_path / "runs.sqlite", "t1")
    loaded = modules_after(["threads", "--db", str(db)], ["show", "t1", "--db", str(db)])
    assert "reactgraph.app.viewing" in loaded and "reactgraph.storage.summaries" in loaded
    assert not tops(loaded) & set(HEAVY), sorted(tops(loaded) & set(HEAVY))
    # Without its summary the thread is read through LangGraph, as before.
    drop_summaries(db)
    assert "langgraph" in tops(modules_after(["threads", "--db", str(db)]))


def test_a_run_killed_after_a_summary_is_never_listed_as_finished(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A finished thread's summary stays behind when a follow-up question on it is killed
    mid-run: the thread's newest checkpoint is no longer the summary's, so it is listed (and
    shown) as interrupted, exactly as LangGraph's read says."""
    db = answered_thread(openai_server, tmp_path / "runs.sqlite", "t")
    before = summaries(db)["t"]
    asked = len(openai_server.requests)
    gate = openai_server.hold()
    follow_up = ["And in months?", "--base-url", openai_server.url, "--db", str(db)]
    process = popen("ask", *follow_up, "--thread", "t")
    try:
        deadline = time.monotonic() + 300  # a bound against a hang, not a wait for work
        while len(openai_server.requests) == asked and process.poll() is None:
            assert time.monotonic() < deadline, "the follow-up never called the model"
            time.sleep(0.05)
        process.kill()
    finally:
        process.communicate()
        gate.set()
    assert summaries(db)["t"] == before  # the stale summary is still there
    fast = shown(db, ["t"])
    assert status_in(fast[0], "t") == "interrupted", fast[0]
    # `resume` finishes it and saves the summary anew.
    assert run_main("resume", "t", "--db", str(db)).returncode == 0
    assert summaries(db)["t"] != before
    resumed = shown(db, ["t"])
    assert status_in(resumed[0], "t") == "answered", resumed[0]
    drop_summaries(db)
    assert shown(db, ["t"]) == resumed


def test_a_damaged_summary_or_checkpoint_is_read_through_langgraph(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db = tmp_path / "runs.sqlite"
    openai_server.responder = seed_responder
    for thread in ("a", "b"):
        assert run_main(*ask(openai_server, db, thread)).returncode == 0
    fast = shown(db, ["a", "b"])
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        connection.execute(
            "UPDATE store SET value = ? WHERE prefix = ? AND key = 'a'", (b"{not json", PREFIX)
        )
    assert shown(db, ["a", "b"]) == fast
    with contextlib.closing(sqlite3.connect(db)) as connection, connection:
        (newest,) = connection.execute(
            "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = 'b'"
        ).fetchone()
        connection.execute(
            "UPDATE checkpoints SET checkpoint = x'00ff' WHERE thread_id = 'b' "
            "AND checkpoint_id = ?",
            (newest,),
        )
    listing = shown(db, ["a"])[0]
    assert status_in(listing, "b") == "damaged", listing


def test_a_batchs_runs_leave_summaries_read_as_langgraph_reads_them(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """``batch`` (and ``eval``, through the same runner) saves each run's summary where it
    ends, or pauses for an approval."""
    db = tmp_path / "runs.sqlite"
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "one", "question": "Q1?"}\n{"id": "two", "question": "Q2?"}\n')
    openai_server.responder = seed_responder
    run = run_main(
        "batch", str(questions), "--out", str(tmp_path / "r.jsonl"), "--workers", "1",
        "--base-url", openai_server.url, "--db", str(db), "--approve", "calculator",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    threads = list(summaries(db))
    assert len(threads) == 2
    fast = shown(db, threads)
    assert fast[0].count("awaiting_approval") == 2, fast[0]
    drop_summaries(db)
    assert shown(db, threads) == fast


def test_a_pruned_thread_keeps_a_fresh_summary(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """``prune`` writes the thread's final state as a new checkpoint, then its summary anew."""
    db = answered_thread(openai_server, tmp_path / "runs.sqlite", "t")
    before = summaries(db)["t"]
    fast = shown(db, ["t"])
    assert run_main("prune", "t", "--db", str(db)).returncode == 0
    assert summaries(db)["t"] != before
    reads = [["threads", "--db", str(db)], ["show", "t", "--db", str(db)]]
    assert not tops(modules_after(*reads)) & set(HEAVY)  # read from the new summary
    assert shown(db, ["t"]) == fast


def test_a_summary_holds_every_value_the_listings_print() -> None:
    """Each key of the state that ``threads``, ``show`` or the approval prompt reads is in a
    summary (``SHOWN``): a key read but not saved would print differently from a summary."""
    import re

    from reactgraph.storage.summaries import SHOWN

    root = Path(__file__).resolve().parents[1] / "graphs" / "app"
    read = set()
    for name in ("console.py", "viewing.py", "approving.py"):
        text = (root / name).read_text("utf-8")
        read |= set(re.findall(r"values(?:\.get\(|\[)[\"']([a-z_]+)[\"']", text))
    assert read and read <= set(SHOWN), read - set(SHOWN)
