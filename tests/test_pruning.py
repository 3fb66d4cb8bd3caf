"""Pruning a finished thread keeps exactly what show and a new run need, on SQLite and
PostgreSQL, and refuses a thread that can still be resumed."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from reactgraph import build_graph
from reactgraph.nodes.providers import ModelCallError
from reactgraph.storage.database import open_db, thread_status
from reactgraph.storage.pruning import NotFinished, prune_thread
from tests.fakes import ToolLog, action, answer, fake_model
from tests.test_persistence import postgres_url


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("variant", ["transcript", "notes_compaction"])
def test_a_pruned_thread_reads_the_same_and_takes_a_new_run(
    kind: str, variant: str, tmp_path: Path
) -> None:
    db = str(tmp_path / "runs.sqlite") if kind == "sqlite" else postgres_url()
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
