"""Two workers never both make progress on one thread: the lock, and writes guarded by it, on
SQLite and on PostgreSQL (where a lock can vanish with its connection)."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reactgraph import build_graph
from reactgraph.storage.database import open_db
from reactgraph.storage.locks import GuardedSaver, LockLost, ThreadBusy, thread_lock
from tests.fakes import answer, fake_model
from tests.test_persistence import postgres_url

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_a_second_holder_is_refused_and_the_lock_is_released(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    with thread_lock(db, "t") as lease:
        lease.check()
        with pytest.raises(ThreadBusy), thread_lock(db, "t"):
            pass
        with thread_lock(db, "other"):
            pass
    with thread_lock(db, "t"):
        pass


def test_a_guarded_saver_refuses_to_write_a_thread_it_does_not_hold(tmp_path: Path) -> None:
    with open_db(str(tmp_path / "runs.sqlite")) as (saver, _):
        graph = build_graph(
            "transcript",
            model=fake_model(answer("ok")),
            tools=[],
            checkpointer=GuardedSaver(saver, {}),
        )
        with pytest.raises(LockLost, match="without holding its lock"):
            graph.invoke({"question": "q"}, {"configurable": {"thread_id": "t"}})


WORKER = textwrap.dedent(
    """
    import json, sys, time
    from reactgraph import build_graph
    from reactgraph.storage.locks import GuardedSaver, LockLost, thread_lock
    from reactgraph.storage.database import open_db
    from reactgraph.scripted import ScriptedChatModel
    from tests.fakes import ToolLog

    db, thread, mode, work = sys.argv[1:5]

    def reply(messages):
        seen = sum(str(m.content).startswith("Observation:") for m in messages)
        with open(work + "/calls.log", "a") as log:
            log.write(f"{mode} {seen}\\n")
        return "Final Answer: done" if seen >= 3 else f"Action: echo[{seen}]"

    model = ScriptedChatModel(replies=[reply] * 10, latency_s=1.5 if mode == "a" else 0)
    with open_db(db) as (saver, _), thread_lock(db, thread) as lease:
        graph = build_graph("transcript", model=model, tools=[ToolLog().echo()],
                            checkpointer=GuardedSaver(saver, {thread: lease}))
        config = {"configurable": {"thread_id": thread}}
        try:
            out = graph.invoke({"question": "q"} if mode == "a" else None, config)
        except LockLost as error:
            print("LOST", error)
            sys.exit(3)
    print(json.dumps({"answer": out["answer"]}))
    """
)


def test_a_postgres_worker_that_loses_its_lock_stops_before_writing(tmp_path: Path) -> None:
    import psycopg

    db = postgres_url()
    thread = f"lease-{time.time_ns()}"
    first = subprocess.Popen(
        [sys.executable, "-c", WORKER, db, thread, "a", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    calls = tmp_path / "calls.log"
    deadline = time.time() + 60
    while (
        not calls.exists() or len(calls.read_text().splitlines()) < 2
    ) and time.time() < deadline:
        time.sleep(0.05)  # until worker a is in its second model call
    with psycopg.connect(db, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (f"reactgraph-lock:{thread}"[:63],),
        ).fetchall()
    assert killed == [(True,)]
    second = subprocess.run(
        [sys.executable, "-c", WORKER, db, thread, "b", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out, err = first.communicate(timeout=120)
    assert second.returncode == 0 and '"answer": "done"' in second.stdout, second.stderr
    assert first.returncode == 3 and "LOST" in out, (out, err)
    # Only one line of history: no checkpoint has two children.
    with open_db(db) as (saver, _):
        parents = collections.Counter(
            c.parent_config["configurable"]["checkpoint_id"]
            for c in saver.list({"configurable": {"thread_id": thread}})
            if c.parent_config
        )
    assert parents and max(parents.values()) == 1, parents
