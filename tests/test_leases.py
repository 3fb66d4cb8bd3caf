"""``ask``, ``resume`` and the batch and eval workers on PostgreSQL write a run's checkpoints over
the connection that holds the thread's advisory lock: once that lock is gone (its connection
died) the run cannot write again, so a second process that took the thread over never sees its
history forked."""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest

from reactgraph.app.pool import Job
from reactgraph.app.recipe import open_runner
from reactgraph.storage.database import open_db
from reactgraph.storage.locks import Lease
from tests.fakes import SEED, FakeOpenAIServer, scripted_recipe, seed_responder
from tests.test_cli import cli, popen
from tests.test_persistence import postgres_url

# Subprocesses and a server: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow


def children_per_checkpoint(db: str, thread: str) -> collections.Counter[str]:
    with open_db(db) as (saver, _):
        return collections.Counter(
            c.parent_config["configurable"]["checkpoint_id"]
            for c in saver.list({"configurable": {"thread_id": thread}})
            if c.parent_config
        )


def test_an_ask_whose_lock_is_lost_stops_and_a_resume_takes_over(
    openai_server: FakeOpenAIServer,
) -> None:
    db = postgres_url()
    thread = f"lease-ask-{uuid.uuid4().hex[:8]}"
    gate = threading.Event()
    calls = itertools.count(1)

    def respond(body: dict[str, Any]) -> str:
        if next(calls) == 2:  # the ask's second model call waits while its lock is taken away
            gate.wait(200)
        return seed_responder(body)

    openai_server.responder = respond
    url = ["--base-url", openai_server.url, "--db", db]
    # A timeout past the gate's wait: the blocked call is never retried, so the count is exact.
    ask = popen("ask", "How many years?", "--thread", thread, "--timeout", "300", *url)
    try:
        deadline = time.time() + 60
        while len(openai_server.requests) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert len(openai_server.requests) == 2, ask.communicate(timeout=5)
        with psycopg.connect(db, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (f"reactgraph-lock:{thread}"[:63],),
            ).fetchall()
        assert killed == [(True,)]
        resume = cli("resume", thread, *url)
    finally:
        gate.set()
        ask_out, ask_err = ask.communicate(timeout=120)
    assert resume.returncode == 0, resume.stderr
    assert "Answer: 48" in resume.stdout
    # The ask learns it lost the thread at its next write, and stops there: one line, exit 2.
    assert ask.returncode == 2, (ask_out, ask_err)
    assert "Traceback" not in ask_err and "lock on thread" in ask_err, ask_err
    assert f"reactgraph resume {thread}" in ask_err
    # One line of history, and only the step in flight (the ask's second call) ran twice.
    parents = children_per_checkpoint(db, thread)
    assert parents and max(parents.values()) == 1, parents
    assert len(openai_server.requests) == len(SEED) + 1
    show = cli("show", thread, "--db", db)
    assert show.returncode == 0 and "Status: answered" in show.stdout, show.stdout


def test_a_resume_whose_lock_is_lost_stops_before_writing(
    openai_server: FakeOpenAIServer,
) -> None:
    db = postgres_url()
    thread = f"lease-resume-{uuid.uuid4().hex[:8]}"
    url = ["--base-url", openai_server.url, "--db", db]
    # A first ask stopped by spent retries after its first turn: a thread to resume.
    answers = iter([SEED[0]])
    openai_server.responder = lambda body: next(answers, None) or _fault()
    first = cli("ask", "How many years?", "--thread", thread, "--timeout", "5", *url)
    assert first.returncode == 1, first.stderr
    gate = threading.Event()
    calls = itertools.count(1)

    def respond(body: dict[str, Any]) -> str:
        if next(calls) == 1:
            gate.wait(200)
        return seed_responder(body)

    openai_server.responder = respond
    before = len(openai_server.requests)
    resume = popen("resume", thread, "--timeout", "300", *url)
    try:
        deadline = time.time() + 60
        while len(openai_server.requests) < before + 1 and time.time() < deadline:
            time.sleep(0.05)
        with psycopg.connect(db, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (f"reactgraph-lock:{thread}"[:63],),
            )
        second = cli("resume", thread, *url)
    finally:
        gate.set()
        _, err = resume.communicate(timeout=120)
    assert second.returncode == 0 and "Answer: 48" in second.stdout, second.stderr
    assert resume.returncode == 2 and "lock on thread" in err, err
    parents = children_per_checkpoint(db, thread)
    assert parents and max(parents.values()) == 1, parents


def _fault() -> Any:
    from tests.fakes import Fault

    return Fault(400, "no more replies")


def run_jobs(db: str, *jobs: Job) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        async with open_runner(scripted_recipe(db)) as run:
            return list(await asyncio.gather(*(run(job) for job in jobs)))

    return asyncio.run(main())


def test_workers_write_over_their_lock_connections_and_finish() -> None:
    db = postgres_url()
    threads = [f"lease-ok-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    jobs = [Job(i, f"Question {i}?", thread) for i, thread in enumerate(threads)]
    results = run_jobs(db, *jobs)
    assert [(r["answer"], r["status"], r["error"]) for r in results] == [
        (f"Question {i}?", "answered", None) for i in range(3)
    ]
    for thread in threads:
        parents = children_per_checkpoint(db, thread)
        assert parents and max(parents.values()) == 1, parents
    # A finished thread is read, not run again, by the next worker.
    (again,) = run_jobs(db, jobs[0])
    assert again["answer"] == "Question 0?" and again["error"] is None


def test_a_worker_lock_lost_right_after_its_check_writes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The gap between asking whether the lock is held and writing: the lock is lost just
    after the check passed, and the write must still not land."""
    db = postgres_url()
    thread = f"lease-gap-{uuid.uuid4().hex[:8]}"
    check = Lease.check

    def check_then_lose(lease: Lease) -> None:
        check(lease)
        if lease.connection is not None:
            with psycopg.connect(db, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (f"reactgraph-lock:{thread}"[:63],),
                )

    monkeypatch.setattr(Lease, "check", check_then_lose)
    (result,) = run_jobs(db, Job(0, "Is the gap closed?", thread))
    assert (result["error"] or "").startswith("LockLost"), result
    with open_db(db) as (saver, _):
        assert list(saver.list({"configurable": {"thread_id": thread}})) == []
