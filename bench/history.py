"""How reading a thread grows with its turns: ``reactgraph show`` (its state), the whole
``get_state_history``, and a time travel (``invoke(None, old_config)`` from the middle), on
SQLite files written by the long run of ``bench/longrun.py`` (2,000-character pages); and what
a large question costs on disk.

``python bench/history.py [TURNS ...]`` measures reactgraph's saver (``open_db``) and, up to
``PLAIN_MAX`` turns, LangGraph's own ``SqliteSaver`` on the same file.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import tempfile
import time
from typing import Any

from common import table, verdict
from longrun import QUESTION, open_graph

from reactgraph import build_graph
from reactgraph.scripted import ScriptedChatModel
from reactgraph.storage import open_db
from reactgraph.storage.compression import serializer

TURNS = (100, 250, 500, 1000)
PLAIN_MAX = int(os.environ.get("BENCH_PLAIN_MAX", "250"))  # quadratic: minutes beyond


def write_thread(db: str, folder: str, turns: int) -> None:
    """A finished run of ``turns`` turns on ``db`` (thread "t")."""
    import longrun

    longrun.CAP = turns
    with open_db(db) as (saver, _):
        graph = open_graph("transcript", saver, folder)
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 10 * turns}
        graph.invoke({"question": QUESTION}, config)


def reads(saver: Any) -> dict[str, float]:
    """Seconds for show's read, the whole history (and the CPU time it took this process: the
    machine is shared), and a time travel from its middle."""
    graph = build_graph("transcript", model=ScriptedChatModel(), tools=[], checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    started = time.perf_counter()
    state = graph.get_state(config)
    show = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    history = list(graph.get_state_history(config))
    whole, whole_cpu = time.perf_counter() - started, time.process_time() - cpu
    middle = history[len(history) // 2]
    assert len(state.values["turns"]) >= len(middle.values["turns"])
    started = time.perf_counter()
    travel = graph.get_state(middle.config)  # what a time travel reads before its first step
    travel_s = time.perf_counter() - started
    assert travel.values["turns"] == middle.values["turns"]
    return {"show": show, "history": whole, "history_cpu": whole_cpu, "travel": travel_s,
            "checkpoints": len(history)}  # fmt: skip


def plain_reads(db: str) -> dict[str, float]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(db, check_same_thread=False)
    try:
        return reads(SqliteSaver(connection, serde=serializer()))
    finally:
        connection.close()


def bench_history(turn_counts: tuple[int, ...] = TURNS) -> None:
    print(
        "## Reading a long thread: show, the whole history, a time travel\n\n"
        "A finished transcript run on a SQLite file (2,000-character pages, an instant "
        "scripted model); seconds for `get_state` (what `show` reads), the whole "
        "`get_state_history`, and `get_state` of the middle checkpoint (what a time travel "
        f"reads before its first step). LangGraph's own `SqliteSaver` up to {PLAIN_MAX} turns. "
        "The history's CPU time is this process's (`time.process_time`); the load is the "
        "machine's 1-minute load average as each read began.\n"
    )
    rows, per_checkpoint, cpus = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        for turns in turn_counts:
            db = f"{folder}/t{turns}.sqlite"
            write_thread(db, folder, turns)
            load = os.getloadavg()[0]
            with open_db(db, read_only=True) as (saver, _):
                ours = reads(saver)
            plain = plain_reads(db) if turns <= PLAIN_MAX else None
            per_checkpoint.append((turns, ours["history"] / ours["checkpoints"]))
            cpus.append(ours["history_cpu"] / ours["checkpoints"])
            rows.append(
                (f"{turns:,}", f"{ours['checkpoints']:,}", f"{ours['show']:.3f}",
                 f"{ours['history']:.2f}", f"{ours['history_cpu']:.2f}", f"{load:.1f}",
                 f"{ours['travel']:.3f}",
                 f"{plain['history']:.2f}" if plain else "-",
                 f"{plain['show']:.3f}" if plain else "-")
            )  # fmt: skip
    header = ("turns", "checkpoints", "show (s)", "history (s)", "history CPU (s)", "load",
              "time travel read (s)",
              "LangGraph SqliteSaver: history (s)", "LangGraph: show (s)")  # fmt: skip
    table(header, rows)
    last_turns, last = per_checkpoint[-1]
    first_turns, first = per_checkpoint[0]
    history_s, cpu_s = float(rows[-1][3]), float(rows[-1][4])
    print(
        f"- whole history of {last_turns:,} turns: {history_s:.2f} s wall (goal <= 10 s: "
        f"{verdict(history_s <= 10)}), {cpu_s:.2f} s CPU ({verdict(cpu_s <= 10)}); per "
        f"checkpoint {first * 1000:.2f} ms wall, {cpus[0] * 1000:.2f} ms CPU at "
        f"{first_turns:,} turns, {last * 1000:.2f} ms wall, {cpus[-1] * 1000:.2f} ms CPU at "
        f"{last_turns:,}\n"
    )


def question_bytes(chars: int, turns: int, folder: str) -> int:
    """The SQLite file of one ``turns``-turn run whose question has ``chars`` characters of
    text zlib cannot shrink much (random letters)."""
    import random
    import string

    rng = random.Random(1)
    question = "".join(rng.choice(string.ascii_letters + " ") for _ in range(chars))
    replies = [f"Thought: t\nAction: page[{i}]" for i in range(turns - 1)]
    replies.append("Thought: done\nFinal Answer: done")
    db = f"{folder}/q{chars}-{turns}.sqlite"
    with open_db(db) as (saver, _):
        from common import page

        model = ScriptedChatModel(replies=replies)
        graph = build_graph("transcript", model=model, tools=[page], checkpointer=saver)
        graph.invoke({"question": question}, {"configurable": {"thread_id": "q"}})
    return os.path.getsize(db) + sum(
        os.path.getsize(p) for p in (f"{db}-wal",) if os.path.exists(p)
    )


def bench_question() -> None:
    print("## A large question on disk\n\nOne transcript run on a SQLite file.\n")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for chars, turns in ((100_000, 11), (10_000_000, 5)):
            size = question_bytes(chars, turns, folder)
            rows.append((f"{chars:,}", turns, f"{size / 1e6:.2f} MB", f"{size / chars:.1f}x"))
    table(("question (chars)", "turns", "SQLite file", "file / question"), rows)


def bench(repeats: int = 1) -> None:
    """The benchmark's ``history`` section."""
    bench_question()
    bench_history()


if __name__ == "__main__":
    counts = tuple(int(n) for n in sys.argv[1:]) or TURNS
    bench_question()
    bench_history(counts)
