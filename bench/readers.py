"""The reading commands on a database of 1,000 threads (issue 58's goal: each answers within
0.3 s): ``reactgraph threads``, ``show`` and ``--version``, and ``threads``/``show`` pointed at a
database that does not exist, side by side with ``python -c pass`` (the floor), the import of
the command line's module alone (the floor of every command but ``--version``) and
``python -c "import langgraph.graph"`` (what reading a thread through LangGraph costs first).

The database: the offline demo's run (``tests.fakes.demo_db``), its checkpoints and writes
copied in SQL under 999 more thread ids, each with its run record, so every thread is a whole
finished run as ``reactgraph ask`` leaves it, its summary with it (what ``threads`` and ``show``
read without LangGraph: ``reactgraph.storage.summaries``). Each contender runs once per round,
in turn, so a loaded machine slows them alike; the figures are medians over the rounds (the
load average is printed beside them).

``python bench/readers.py [ROUNDS]``
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from common import PYTHON, command_medians, reactgraph, table, verdict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes import demo_db  # noqa: E402  (a database holding the offline demo's run)

THREADS = 1_000
GOAL_S = 0.3


def thousand_threads(folder: Path) -> str:
    """A database of ``THREADS`` finished runs: the demo's, copied (``t1`` .. ``t1000``)."""
    from reactgraph.app.viewing import reader
    from reactgraph.scripted import DEMO_QUESTION
    from reactgraph.storage.database import new_record, open_db
    from reactgraph.storage.summaries import SUMMARIES, save_summary

    db = demo_db(folder)
    with sqlite3.connect(db) as connection:
        for n in range(2, THREADS + 1):
            for table_name in ("checkpoints", "writes"):
                columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table_name})")]
                chosen = ", ".join("?" if c == "thread_id" else c for c in columns)
                connection.execute(
                    f"INSERT INTO {table_name} ({', '.join(columns)}) "
                    f"SELECT {chosen} FROM {table_name} WHERE thread_id = 't1'",
                    (f"t{n}",),
                )
    with open_db(db) as (saver, store):
        # Each thread's summary, as `ask` leaves it: t1's, saved from its graph, then copied (the
        # copies' rows are t1's, so its fingerprint is theirs).
        save_summary(reader("transcript", saver), store, "t1", db)
        summary = store.get(SUMMARIES, "t1")
        assert summary is not None, "no summary saved for t1"
        for n in range(2, THREADS + 1):
            record = new_record(f"t{n}", DEMO_QUESTION, "transcript", "scripted", None, None, {})
            record.save(store)
            store.put(SUMMARIES, f"t{n}", {**summary.value, "thread_id": f"t{n}"})
    return db


def bench_readers(rounds: int) -> None:
    print(f"\n## The reading commands on {THREADS:,} threads (median wall ms)\n")
    folder = Path(tempfile.mkdtemp(prefix="reactgraph-readers-"))
    db = thousand_threads(folder)
    missing = str(folder / "none.sqlite")
    listed = subprocess.run(reactgraph("threads", "--db", db), capture_output=True, text=True)
    assert listed.stdout.count("answered") == THREADS, listed.stdout[-500:]
    contenders: dict[str, list[str]] = {
        "python -c pass": [PYTHON, "-c", "pass"],
        'python -c "import langgraph.graph"': [PYTHON, "-c", "import langgraph.graph"],
        'python -c "import reactgraph.app.cli"': [PYTHON, "-c", "import reactgraph.app.cli"],
        "reactgraph --version": reactgraph("--version"),
        "reactgraph threads (no database)": reactgraph("threads", "--db", missing),
        "reactgraph show t1 (no database)": reactgraph("show", "t1", "--db", missing),
        f"reactgraph threads ({THREADS:,} threads)": reactgraph("threads", "--db", db),
        f"reactgraph show t500 ({THREADS:,} threads)": reactgraph("show", "t500", "--db", db),
    }
    load = os.getloadavg()[0]
    medians, base = command_medians(contenders, rounds, folder, (0, 2))
    rows = []
    for name, ms in medians.items():
        goal = verdict(ms <= GOAL_S * 1000) if name.startswith("reactgraph") else ""
        rows.append((name, f"{ms:.0f}", f"{ms / base:.1f}x", goal))
    table(("command", "ms", "x python -c pass", f"within {GOAL_S:g} s"), rows)
    print(f"\nload average {load:.1f} before, {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    bench_readers(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
