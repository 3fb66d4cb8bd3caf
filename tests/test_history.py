"""Reading a thread's history in time linear in its checkpoints (issue 20, item 10): the
SQLite savers of ``open_db``/``aopen_db`` give LangGraph exactly what its own saver gives, for
every checkpoint, and read each checkpoint's rows a bounded number of times."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from reactgraph import build_graph
from reactgraph.storage import aopen_db, open_db
from reactgraph.storage.compression import serializer
from reactgraph.storage.history import IndexedSqliteSaver
from tests.fakes import ToolLog, action, answer, count_index_builds, fake_model

DELTA = ("turns", "messages", "compactions", "notes", "summary", "question", "settings",
         "thread_id", "run")  # fmt: skip


def _graph(saver: Any, replies: list[str], variant: str = "transcript", **options: Any) -> Any:
    return build_graph(variant, model=fake_model(*replies), tools=[ToolLog().echo()],
                       checkpointer=saver, **options)  # fmt: skip


def _echoes(n: int, last: str = "done") -> list[str]:
    return [*[action("echo", str(i)) for i in range(n)], answer(last)]


def _write_threads(db: str, tmp_path: Path) -> None:
    """A thread with two runs and a time-travel fork, and a notes thread."""
    with open_db(db) as (saver, _):
        config = {"configurable": {"thread_id": "t"}}
        graph = _graph(saver, [*_echoes(6), *_echoes(3, "again")], max_turns=20)
        graph.invoke({"question": "first"}, config)
        graph.invoke({"question": "second"}, config)
        middle = list(graph.get_state_history(config))[12]
        _graph(saver, _echoes(2, "forked"), max_turns=20).invoke(None, middle.config)
        notes = {"configurable": {"thread_id": "n"}}
        _graph(saver, [action("update_notes", "- a"), *_echoes(4)], "notes",
               notes_dir=str(tmp_path / "notes")).invoke({"question": "q"}, notes)  # fmt: skip


def _plain(db: str) -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(db, check_same_thread=False), serde=serializer())


def _comparable(history: dict[str, Any]) -> dict[str, Any]:
    """A channel's rebuilt value is what LangGraph compares: seed and writes may differ in
    how they split it, so compare the channel rebuilt from each."""
    return {k: (v.get("seed", None), [w[2] for w in v["writes"]]) for k, v in history.items()}


def _states(graph: Any, thread: str) -> list[tuple[Any, Any, Any]]:
    return [
        (s.config["configurable"]["checkpoint_id"], s.values, s.next)
        for s in graph.get_state_history({"configurable": {"thread_id": thread}})
    ]


def test_the_history_reads_the_same_as_langgraphs_own_saver(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    _write_threads(db, tmp_path)
    plain = _plain(db)
    try:
        with open_db(db, read_only=True) as (saver, _):
            assert isinstance(saver, IndexedSqliteSaver)
            for thread, variant in (("t", "transcript"), ("n", "notes")):
                ours = _states(_graph(saver, [], variant), thread)
                theirs = _states(_graph(plain, [], variant), thread)
                assert len(ours) == len(theirs) > 10
                assert ours == theirs
                # And again, now that the second read of each checkpoint goes the usual way.
                assert _states(_graph(saver, [], variant), thread) == theirs
    finally:
        plain.conn.close()


def test_the_async_saver_reads_the_same_history(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    _write_threads(db, tmp_path)
    plain = _plain(db)

    async def ours() -> list[Any]:
        async with aopen_db(db) as (saver, _):
            graph = _graph(saver, [])
            config = {"configurable": {"thread_id": "t"}}
            return [(s.config["configurable"]["checkpoint_id"], s.values, s.next)
                    async for s in graph.aget_state_history(config)]  # fmt: skip

    try:
        assert asyncio.run(ours()) == _states(_graph(plain, []), "t")
    finally:
        plain.conn.close()


def _decodes(saver: Any, graph: Any, thread: str) -> int:
    """How many stored values (checkpoints and writes) reading the whole history decodes."""
    count = 0
    loads = saver.serde.loads_typed

    def counted(data: Any) -> Any:
        nonlocal count
        count += 1
        return loads(data)

    saver.serde.loads_typed = counted
    try:
        list(graph.get_state_history({"configurable": {"thread_id": thread}}))
    finally:
        saver.serde.loads_typed = loads
    return count


@pytest.mark.parametrize("indexed", [True, False], ids=["ours", "langgraph"])
def test_reading_the_history_decodes_each_row_a_bounded_number_of_times(
    tmp_path: Path, indexed: bool
) -> None:
    counts = {}
    for turns in (20, 40):
        db = str(tmp_path / f"{turns}.sqlite")
        with open_db(db) as (saver, _):
            config = {"configurable": {"thread_id": "t"}}
            _graph(saver, _echoes(turns - 1), max_turns=turns + 5).invoke({"question": "q"}, config)
            rows = sum(saver.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                       for t in ("checkpoints", "writes"))  # fmt: skip
        if indexed:
            with open_db(db, read_only=True) as (saver, _):
                counts[turns] = (_decodes(saver, _graph(saver, []), "t"), rows)
        else:
            plain = _plain(db)
            counts[turns] = (_decodes(plain, _graph(plain, []), "t"), rows)
            plain.conn.close()
    for decodes, rows in counts.values():
        if indexed:  # a pass for LangGraph's list, one walk for the first checkpoint read
            assert decodes <= 3 * rows
    (small, _), (large, _) = counts[20], counts[40]
    if indexed:
        assert large <= 2.2 * small  # linear: twice the turns, twice the reads
    else:
        assert large > 3 * small  # LangGraph's walk per checkpoint: quadratic


def test_reading_the_history_indexes_the_messages_once_not_once_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step's stored writes go through the ``messages`` reducer once, in order, so its id
    index is carried from one checkpoint to the next (``tests/test_reducers.py``)."""
    db = str(tmp_path / "runs.sqlite")
    with open_db(db) as (saver, _):
        config = {"configurable": {"thread_id": "t"}}
        _graph(saver, _echoes(39), max_turns=45).invoke({"question": "q"}, config)
    built = count_index_builds(monkeypatch)
    with open_db(db, read_only=True) as (saver, _):
        states = _states(_graph(saver, []), "t")
    assert len(states) > 100 and len(states[0][1]["messages"]) == 80
    assert built[0] <= 2
