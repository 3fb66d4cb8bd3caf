"""Pruning a finished thread keeps exactly what show and a new run need, on SQLite and
PostgreSQL, and refuses a thread that can still be resumed."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from reactgraph import build_graph
from reactgraph.nodes.calling.providers import ModelCallError
from reactgraph.storage.database import open_db, thread_status
from reactgraph.storage.pruning import NotFinished, prune_thread
from tests.fakes import ToolLog, action, answer, fake_model, three_turn_model


@pytest.mark.parametrize("variant", ["transcript", "notes_compaction"])
def test_a_pruned_thread_reads_the_same_and_takes_a_new_run(db: str, variant: str) -> None:
    thread = f"prune-{variant}-{time.time_ns()}"
    config = {"configurable": {"thread_id": thread}}
    extra = {"context_window": 100_000} if variant == "notes_compaction" else {}
    with open_db(db) as (saver, store):
        objects = {"store": store} if variant == "notes_compaction" else {}
        replies = [action("echo", str(i)) for i in range(4)]
        if variant == "notes_compaction":
            replies[1] = "Action: update_notes[- [x] half way]"
        model = fake_model(*replies, answer("done"))
        graph = build_graph(
            variant,
            model=model,
            tools=[ToolLog().echo()],
            checkpointer=saver,
            **objects,
            **extra,
        )
        before = graph.invoke({"question": "q"}, config)
        assert len(list(graph.get_state_history(config))) > 10
        prune_thread(graph, db, thread)
        after = graph.get_state(config)
        assert after.values == before and thread_status(graph, thread) == "finished"
        assert len(list(graph.get_state_history(config))) == 1
        again = build_graph(
            variant,
            model=fake_model(answer("second")),
            tools=[ToolLog().echo()],
            checkpointer=saver,
            **objects,
            **extra,
        )
        out = again.invoke({"question": "next"}, config)
        assert out["answer"] == "second" and len(out["messages"]) > len(before["messages"])
        if variant == "notes_compaction":
            assert out["notes"] == "- [x] half way"


def test_an_interrupted_thread_is_not_pruned(tmp_path: Path) -> None:
    def broken(messages: list) -> str:
        raise ConnectionError("down")

    db = str(tmp_path / "runs.sqlite")
    config = {"configurable": {"thread_id": "cut"}}
    with open_db(db) as (saver, _):
        graph = build_graph(
            "transcript",
            model=fake_model(action("echo", "1"), broken),
            tools=[ToolLog().echo()],
            checkpointer=saver,
            model_retries=0,
        )
        with pytest.raises(ModelCallError):
            graph.invoke({"question": "q"}, config)
        with pytest.raises(NotFinished):
            prune_thread(graph, db, "cut")
        assert thread_status(graph, "cut") == "interrupted"
    with sqlite3.connect(db) as connection:
        (rows,) = connection.execute("SELECT count(*) FROM checkpoints").fetchone()
    assert rows > 3


def _finished_thread(db: str, thread: str) -> tuple[object, dict]:
    """A finished 3-turn thread of ``db`` with its run record; its final values."""
    from reactgraph.storage.database import new_record

    with open_db(db) as (saver, store):
        new_record(thread, "q", "transcript", "scripted", None, None, {}).save(store)
        graph = build_graph(
            "transcript",
            model=three_turn_model(),
            tools=[ToolLog().echo()],
            checkpointer=saver,
        )
        return graph, graph.invoke({"question": "q"}, {"configurable": {"thread_id": thread}})


@pytest.mark.parametrize("order", ["first-snapshot-deletes-first", "last-snapshot-deletes-first"])
def test_two_prunes_of_one_thread_at_once_keep_its_final_state(db: str, order: str) -> None:
    from reactgraph.storage.pruning import _delete_older, _snapshot

    thread = f"twice-{time.time_ns()}"
    config = {"configurable": {"thread_id": thread}}
    _, before = _finished_thread(db, thread)
    with open_db(db) as (saver, _):
        graph = build_graph("transcript", model=fake_model(), tools=[], checkpointer=saver)
        # Interleaved as a `prune THREAD` and a `batch --prune` worker could: both snapshots
        # are written before either delete runs.
        a = _snapshot(graph, config)
        b = _snapshot(graph, config)
        for keep in [a, b] if order == "first-snapshot-deletes-first" else [b, a]:
            _delete_older(db, thread, keep)
        assert graph.get_state(config).values == before
        assert thread_status(graph, thread) == "finished"
        assert [
            s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)
        ] == [b]


def test_prune_keeps_a_thread_another_process_is_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from reactgraph.app.cli import main
    from reactgraph.storage.database import thread_lock

    db = str(tmp_path / "runs.sqlite")
    _finished_thread(db, "busy")
    _finished_thread(db, "idle")
    with thread_lock(db, "busy"):  # as a batch worker holds the thread it runs
        assert main(["prune", "busy", "--db", db]) == 0
        assert main(["prune", "--finished", "--db", db]) == 0
    printed = capsys.readouterr()
    assert printed.err.count("thread busy is running in another process; kept whole") == 2
    assert "pruned 1 finished thread(s)" in printed.out  # idle, by --finished
    with sqlite3.connect(db) as connection:
        rows = dict(connection.execute("SELECT thread_id, count(*) FROM checkpoints GROUP BY 1"))
    assert rows["idle"] == 1 and rows["busy"] > 3


KILLED_AFTER_WRITES = """
import os, sys
from langgraph.checkpoint.sqlite import SqliteSaver
from reactgraph import build_graph
from reactgraph.graph import DURABILITY
from reactgraph.storage.database import new_record, open_db
from tests.fakes import ToolLog, three_turn_model

db, kill_at = sys.argv[1], int(sys.argv[2])
real, calls = SqliteSaver.put_writes, [0]

def put_writes(self, *args, **kwargs):
    real(self, *args, **kwargs)
    calls[0] += 1
    if calls[0] == kill_at:
        os._exit(9)  # the step's writes are stored; its checkpoint never will be

SqliteSaver.put_writes = put_writes
with open_db(db) as (saver, store):
    new_record("live", "q", "transcript", "scripted", None, None, {}).save(store)
    graph = build_graph(
        "transcript", model=three_turn_model(), tools=[ToolLog().echo()], checkpointer=saver
    )
    graph.invoke({"question": "q"}, {"configurable": {"thread_id": "live"}}, durability=DURABILITY)
"""


@pytest.mark.kills
@pytest.mark.parametrize("kill_at", [2, 3])
def test_prune_finished_keeps_a_thread_killed_between_its_writes_and_checkpoint(
    kill_at: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import subprocess
    import sys

    from reactgraph.app.cli import main

    db = str(tmp_path / "runs.sqlite")
    root = Path(__file__).resolve().parents[1]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_WRITES, db, str(kill_at)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == 9, killed.stderr
    with sqlite3.connect(db) as connection:
        (before,) = connection.execute("SELECT count(*) FROM checkpoints").fetchone()
    assert main(["prune", "--finished", "--db", db]) == 0
    assert "pruned 0 finished thread(s); 1 not finished" in capsys.readouterr().out
    with sqlite3.connect(db) as connection:
        (after,) = connection.execute("SELECT count(*) FROM checkpoints").fetchone()
    assert after == before
    with open_db(db) as (saver, _):
        log = ToolLog()
        graph = build_graph(
            "transcript", model=three_turn_model(), tools=[log.echo()], checkpointer=saver
        )
        assert thread_status(graph, "live") == "interrupted"
        out = graph.invoke(None, {"configurable": {"thread_id": "live"}})
    assert out["answer"] == "done" and len(out["turns"]) == 3


def test_run_many_resumes_a_thread_its_question_left_interrupted(tmp_path: Path) -> None:
    import asyncio

    from reactgraph.batch import run_many
    from reactgraph.nodes.vocabulary.standing import status_of
    from reactgraph.storage.database import aopen_db

    def broken(messages: list) -> str:
        raise ConnectionError("down")

    async def main() -> list:
        async with aopen_db(str(tmp_path / "runs.sqlite")) as (saver, _):
            log = ToolLog()
            cut = build_graph(
                "transcript",
                model=fake_model(action("echo", "1"), broken),
                tools=[log.echo()],
                checkpointer=saver,
                model_retries=0,
            )
            first = [r async for r in run_many(cut, ["q"], thread_prefix="p")]
            state = await cut.aget_state({"configurable": {"thread_id": "p-0"}})
            assert first[0]["error"] and status_of(state) == "interrupted"
            graph = build_graph(
                "transcript", model=three_turn_model(), tools=[log.echo()], checkpointer=saver
            )
            again = [r async for r in run_many(graph, ["q"], thread_prefix="p")]
            return [again[0], log.calls]

    result, calls = asyncio.run(main())
    assert (result["answer"], result["turns"], result["error"]) == ("done", 3, None)
    assert calls == [("echo", "1"), ("echo", "2")]  # echo 1 ran once: the run went on
