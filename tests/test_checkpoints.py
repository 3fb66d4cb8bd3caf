"""Checkpoints that grow linearly with a run, on every saver, sync and async: state and history,
time travel, resuming, and threads written before the transcript was stored as deltas."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import build_graph
from reactgraph.scripted import ScriptedChatModel
from reactgraph.storage.database import aopen_db, open_db, thread_status
from tests.fakes import ToolLog, action, answer, fake_model
from tests.test_persistence import database_at

ROOT = Path(__file__).resolve().parents[1]
OLD_THREADS = ROOT / "tests" / "data" / "old-threads.sqlite"


@contextmanager
def saver_for(kind: str, tmp_path: Path) -> Iterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
    else:
        with open_db(database_at(kind, tmp_path)) as (saver, _):
            yield saver


@asynccontextmanager
async def asaver_for(kind: str, tmp_path: Path) -> AsyncIterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
    else:
        async with aopen_db(database_at(kind, tmp_path)) as (saver, _):
            yield saver


def echo_model(steps: int) -> Any:
    return fake_model(*[action("echo", str(i)) for i in range(steps)], answer("done"))


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_state_history_and_time_travel_on_every_saver(kind: str, tmp_path: Path) -> None:
    thread = f"travel-{kind}-{time.time_ns()}"
    config = {"configurable": {"thread_id": thread}}
    with saver_for(kind, tmp_path) as saver:
        graph = build_graph(
            "transcript", model=echo_model(5), tools=[ToolLog().echo()], checkpointer=saver
        )
        out = graph.invoke({"question": "q"}, config)
        assert len(out["turns"]) == 6 and graph.get_state(config).values["turns"] == out["turns"]
        history = list(graph.get_state_history(config))
        lengths = [len(h.values.get("turns") or []) for h in history]
        assert lengths == sorted(lengths, reverse=True)  # each snapshot: the turns of its moment
        for snapshot in history:
            turns = snapshot.values.get("turns") or []
            assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
            assert turns == out["turns"][: len(turns)]
        # Travel back to the moment after turn 2 and go on from there, on a fork.
        old = [h for h in history if len(h.values.get("turns") or []) == 2][-1]
        assert old.next == ("call_model",)
        graph = build_graph(
            "transcript",
            model=fake_model(answer("forked")),
            tools=[ToolLog().echo()],
            checkpointer=saver,
        )
        forked = graph.invoke(None, old.config)
        assert forked["answer"] == "forked"
        assert forked["turns"][:2] == out["turns"][:2] and len(forked["turns"]) == 3


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_an_async_run_stopped_by_a_fault_resumes_on_every_saver(kind: str, tmp_path: Path) -> None:
    thread = f"resume-{kind}-{time.time_ns()}"
    config = {"configurable": {"thread_id": thread}}
    log = ToolLog()

    def broken(messages: list) -> str:
        raise ConnectionError("network down")

    async def main() -> dict:
        async with asaver_for(kind, tmp_path) as saver:
            model = fake_model(action("echo", "1"), action("echo", "2"), broken)
            graph = build_graph(
                "notes",
                model=model,
                tools=[log.echo()],
                checkpointer=saver,
                model_retries=0,
                notes_dir=str(tmp_path / "notes"),
            )
            with pytest.raises(Exception, match="network down"):
                await graph.ainvoke({"question": "q"}, config)
            graph = build_graph(
                "notes",
                model=fake_model(answer("ok")),
                tools=[log.echo()],
                checkpointer=saver,
                notes_dir=str(tmp_path / "notes"),
            )
            return await graph.ainvoke(None, config)

    out = asyncio.run(main())
    assert out["answer"] == "ok" and [t["turn"] for t in out["turns"]] == [1, 2, 3]
    assert log.calls == [("echo", "1"), ("echo", "2")]


def checkpoint_sizes(db: Path, thread: str) -> list[int]:
    """Bytes of each checkpoint row of the thread, in order."""
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT length(checkpoint) + length(metadata) FROM checkpoints "
            "WHERE thread_id = ? ORDER BY checkpoint_id",
            (thread,),
        ).fetchall()
    return [size for (size,) in rows]


@tool
def page(number: str) -> str:
    """Returns a 2,000-character page."""
    return (f"page {number}: " + "lorem ipsum dolor sit amet " * 80)[:2000]


def test_bytes_per_checkpoint_stay_bounded_as_a_run_grows(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    replies = [f"Thought: read page {i}.\nAction: page[{i}]" for i in range(300)]
    with open_db(str(db)) as (saver, _):
        graph = build_graph(
            "notes",
            model=ScriptedChatModel(replies=[*replies, "Final Answer: done"]),
            tools=[page],
            checkpointer=saver,
            max_turns=400,
            notes_dir=str(tmp_path / "notes"),
        )
        graph.invoke({"question": "Read every page."}, {"configurable": {"thread_id": "long"}})
    sizes = checkpoint_sizes(db, "long")
    # Three checkpoints a turn; look at a stretch around turn 30 and one around turn 300,
    # leaving out snapshot steps (the largest rows of each stretch).
    early = sorted(sizes[85:95])[:8]
    late = sorted(sizes[885:895])[:8]
    assert max(late) < 3 * max(early), (early, late)
    with sqlite3.connect(db) as connection:
        (writes,) = connection.execute("SELECT sum(length(value)) FROM writes").fetchone()
    raw = 300 * 2000
    assert writes < 8 * raw  # each turn's text is written once (turn record and chat message)


def copied_old_threads(tmp_path: Path) -> str:
    db = tmp_path / "old.sqlite"
    shutil.copy(OLD_THREADS, db)
    return str(db)


def test_threads_written_before_deltas_read_the_same(tmp_path: Path) -> None:
    db = copied_old_threads(tmp_path)
    with open_db(db) as (saver, _):
        graph = build_graph("transcript", model=fake_model(), tools=[], checkpointer=saver)
        values = graph.get_state({"configurable": {"thread_id": "old-done"}}).values
        assert [t["action_input"] for t in values["turns"]] == ["1", "2", None]
        assert values["answer"] == "two" and values["status"] == "answered"
        assert thread_status(graph, "old-done") == "finished"
        history = list(graph.get_state_history({"configurable": {"thread_id": "old-done"}}))
        assert [len(h.values.get("turns") or []) for h in history][:3] == [3, 2, 2]


def test_an_interrupted_old_thread_resumes_and_an_old_notes_thread_goes_on(tmp_path: Path) -> None:
    db = copied_old_threads(tmp_path)
    log = ToolLog()
    with open_db(db) as (saver, store):
        graph = build_graph(
            "compaction",
            model=fake_model(answer("resumed")),
            tools=[log.echo()],
            checkpointer=saver,
            context_window=100_000,
        )
        cut = {"configurable": {"thread_id": "old-cut"}}
        assert thread_status(graph, "old-cut") == "interrupted"
        out = graph.invoke(None, cut)
        assert out["answer"] == "resumed" and [t["turn"] for t in out["turns"]] == [1, 2, 3]
        assert log.calls == []  # the old run's completed tool calls are not run again
        notes = build_graph(
            "notes",
            model=fake_model(answer("went on")),
            tools=[log.echo()],
            checkpointer=saver,
            store=store,
        )
        out = notes.invoke({"question": "next"}, {"configurable": {"thread_id": "old-notes"}})
        assert out["notes"] == "- [x] one" and out["answer"] == "went on"


def test_show_reads_an_old_thread(tmp_path: Path) -> None:
    db = copied_old_threads(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "reactgraph.app.cli", "show", "old-done", "--db", db],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Final Answer: two" in result.stdout and "3 turns" in result.stdout


@tool
def dirty(text: str) -> str:
    """Returns text no PostgreSQL column can hold as it is."""
    return "nul\x00byte and a lone \ud800 surrogate"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_text_no_backend_can_store_is_made_storable_visibly(kind: str, tmp_path: Path) -> None:
    thread = f"dirty-{kind}-{time.time_ns()}"
    config = {"configurable": {"thread_id": thread}}
    replies = [
        "Thought: a \x00 in my thought.\nAction: dirty[x]",
        "Action: update_notes[note \x00 with a NUL]",
        "Final Answer: done \ud800",
    ]
    with saver_for(kind, tmp_path) as saver:
        graph = build_graph(
            "notes",
            model=fake_model(*replies),
            tools=[dirty],
            checkpointer=saver,
            notes_dir=str(tmp_path / "notes"),
        )
        out = graph.invoke({"question": "q"}, config)
        assert out["status"] == "answered" and out["answer"] == "done \ufffd"
        assert out["turns"][0]["observation"] == "nul\ufffdbyte and a lone \ufffd surrogate"
        assert "\ufffd" in out["turns"][0]["reply"] and out["notes"] == "note \ufffd with a NUL"
        assert graph.get_state(config).values["turns"] == out["turns"]
