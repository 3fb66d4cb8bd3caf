"""Long runs with a checkpointer: storage against the raw transcript, time per turn as the run
grows, the resume after a SIGKILL near the end, and ``reactgraph show`` of the thread.

Each 1,000-turn run is a child process (``bench/longrun.py``) that prints every turn's time;
the parent kills it at turn ``TURNS``, then resumes the thread.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from common import BENCH, ToolCallingScript, mb, page, prebuilt_agent, table, verdict
from longrun import CAP, QUESTION, TURNS, open_graph, raw_chars, wal_size

from reactgraph.storage.database import open_db

PREBUILT_TURNS = 200  # its storage grows with the square of the run: 1,000 would be gigabytes
POSTGRES = os.environ.get("REACTGRAPH_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


def killed_run(variant: str, folder: str) -> dict[str, Any]:
    """Run to turn ``TURNS``, SIGKILL, measure, resume to the end, time ``show``."""
    db, thread = f"{folder}/{variant}.sqlite", f"long-{variant}"
    command = [sys.executable, str(BENCH / "longrun.py"), variant, db, thread]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    times: list[float] = []
    assert process.stdout is not None
    for line in process.stdout:
        times.append(float(line.split()[1]))
        if len(times) >= TURNS:
            process.send_signal(signal.SIGKILL)
            break
    process.wait()
    size_at_kill = os.path.getsize(db) + wal_size(db)
    config = {"configurable": {"thread_id": thread}}
    with open_db(db, read_only=True) as (saver, _):
        at_kill = open_graph(variant, saver, folder).get_state(config).values["turns"]
    # Timed as a user's resume is: open the database, build the graph, take the first step.
    started = time.perf_counter()
    with open_db(db) as (saver, _):
        graph = open_graph(variant, saver, folder)
        first_step = None
        for _ in graph.stream(None, config, stream_mode="updates"):
            first_step = first_step or time.perf_counter() - started
        final = graph.get_state(config).values
    command = [str(Path(sys.executable).with_name("reactgraph")), "show", thread, "--db", db]
    started = time.perf_counter()
    shown = subprocess.run(command, capture_output=True, text=True)
    show_s = time.perf_counter() - started
    assert shown.returncode == 0, shown.stderr
    started = time.perf_counter()
    subprocess.run([*command[:1], "--version"], capture_output=True, check=True)
    start_s = time.perf_counter() - started
    return {
        "turns_at_kill": len(at_kill),
        "size_at_kill": size_at_kill,
        "times": times,
        "resume_first_step_s": first_step,
        "status": final["status"],
        "final_turns": len(final["turns"]),
        "size_final": os.path.getsize(db) + wal_size(db),
        "raw_final": raw_chars(final["turns"]),
        "show_s": show_s,
        "start_s": start_s,
    }


def prebuilt_run(folder: str) -> dict[str, Any]:
    """The prebuilt agent, same tool, ``PREBUILT_TURNS`` turns, on a SQLite file."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = f"{folder}/prebuilt.sqlite"
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    model = ToolCallingScript(turns=PREBUILT_TURNS, tool_name="page")
    agent = prebuilt_agent(model, [page], checkpointer=saver)
    config = {"configurable": {"thread_id": "g"}, "recursion_limit": 4 * PREBUILT_TURNS}
    times, last = [], time.perf_counter()
    for update in agent.stream({"messages": [("user", QUESTION)]}, config, stream_mode="updates"):
        if "tools" in update:
            now = time.perf_counter()
            times.append(now - last)
            last = now
    messages = agent.get_state(config).values["messages"]
    raw = sum(len(str(m.content)) for m in messages)
    saver.conn.close()
    return {"times": times, "size": os.path.getsize(db) + wal_size(db), "raw": raw}


def postgres_bytes(variant: str) -> tuple[int, int] | None:
    """Bytes of one 1,000-turn thread in the checkpoint tables, and its raw transcript."""
    thread = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        with open_db(POSTGRES) as (saver, _), tempfile.TemporaryDirectory() as folder:
            graph = open_graph(variant, saver, folder)
            out = graph.invoke({"question": QUESTION}, {"configurable": {"thread_id": thread}})
            total = _thread_bytes(thread)
            saver.delete_thread(thread)
            return total, raw_chars(out["turns"])
    except Exception as error:  # no server here: say so, measure the rest
        print(f"- PostgreSQL not measured: {type(error).__name__}: {error}")
        return None


def _thread_bytes(thread: str) -> int:
    """Stored bytes (as PostgreSQL keeps them, compressed where it compresses) of a thread's
    rows in the checkpoint tables."""
    import psycopg

    total = 0
    with psycopg.connect(POSTGRES) as connection:
        for name in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            query = (
                f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {name} t WHERE thread_id = %s"
            )
            total += int(connection.execute(query, (thread,)).fetchone()[0])
    return total


def _ms(times: list[float], start: int, stop: int) -> float:
    return statistics.median(times[start:stop]) * 1000


def bench_storage(repeats: int) -> None:
    print(
        f"## Long runs with a checkpointer: {TURNS:,} turns, 2,000-character observations\n\n"
        f"One thread on a SQLite file, an instant scripted model, the cap raised to {CAP:,}. "
        f"Each run is SIGKILLed at turn {TURNS:,}, resumed, and run to its end; the file is "
        f"measured then (closed, so its WAL is folded in). The prebuilt agent runs "
        f"{PREBUILT_TURNS} turns: its storage grows with the square of the run. ms/turn are "
        "medians over turns 11-40 and the 30 before the kill.\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        ours = {v: killed_run(v, folder) for v in ("transcript", "notes")}
        prebuilt = prebuilt_run(folder)
    early, late = _ms(prebuilt["times"], 10, 40), _ms(prebuilt["times"], -30, None)
    rows = [
        ("LangGraph prebuilt agent", PREBUILT_TURNS, mb(prebuilt["size"]), mb(prebuilt["raw"]),
         f"{prebuilt['size'] / prebuilt['raw']:.0f}x", f"{early:.2f}", f"{late:.2f}",
         f"{late / early:.2f}x", "-", "-")
    ]  # fmt: skip
    goals = []
    for variant, run in ours.items():
        early, late = _ms(run["times"], 10, 40), _ms(run["times"], -30, None)
        ratio, first = run["size_final"] / run["raw_final"], run["resume_first_step_s"]
        rows.append(
            (f"reactgraph {variant}", run["final_turns"], mb(run["size_final"]),
             mb(run["raw_final"]), f"{ratio:.1f}x", f"{early:.2f}", f"{late:.2f}",
             f"{late / early:.2f}x", f"{first:.3f}", f"{run['show_s']:.2f}")
        )  # fmt: skip
        goals.append(
            f"- {variant}: file / raw {ratio:.1f}x (goal <= 10x: {verdict(ratio <= 10)}); ms/turn "
            f"at turn {TURNS:,} / turn 20 {late / early:.2f}x (goal <= 1.5x: "
            f"{verdict(late <= 1.5 * early)}); resume's first step {first:.3f} s (goal <= 1 s: "
            f"{verdict(first <= 1)}); `reactgraph show` {run['show_s']:.2f} s as a command "
            f"(goal <= 1 s: {verdict(run['show_s'] <= 1)}), of which starting the command "
            f"(`reactgraph --version`) takes {run['start_s']:.2f} s; at the "
            f"kill ({run['turns_at_kill']} turns) the file and its WAL held "
            f"{mb(run['size_at_kill'])}; the run ended {run['status']}"
        )
    header = ("contender", "turns", "SQLite file", "raw transcript", "file / raw", "ms/turn @20",
              f"ms/turn @{TURNS}", "ratio", "resume: first step (s)", "show (s)")  # fmt: skip
    table(header, rows)
    print("\n".join(goals))
    for variant in ("transcript", "notes"):
        measured = postgres_bytes(variant)
        if measured:
            size, raw = measured
            print(
                f"- PostgreSQL, {variant}, {CAP:,} turns: {mb(size)} in the checkpoint tables "
                f"for {mb(raw)} of transcript = {size / raw:.1f}x (goal <= 10x: "
                f"{verdict(size <= 10 * raw)})"
            )
    print()


if __name__ == "__main__":
    bench_storage(1)
