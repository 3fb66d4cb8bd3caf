"""``reactgraph threads`` over many run records: every one is listed, and the peak memory stays
about the same whether there are ten thousand or over a hundred thousand (the records are read
500 at a time; before, the listing stopped silently at 100,000).

``python bench/listing.py [N ...]`` (or the ``listing`` section of ``bench.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import mb, table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZES = (10_000, 110_000)


def recorded(db: str, count: int) -> None:
    """``count`` run records (threads without checkpoints), written in batches."""
    from langgraph.store.base import PutOp

    from reactgraph.storage import open_db
    from reactgraph.storage.database import RUNS, new_record

    with open_db(db) as (_, store):
        for start in range(0, count, 5000):
            ops = []
            for n in range(start, min(count, start + 5000)):
                record = new_record(f"t{n:06}", f"question {n}", "transcript", "m", None, None, {})
                ops.append(PutOp(RUNS, record.thread_id, dict(record.__dict__)))
            store.batch(ops)


def listed(db: str, folder: str) -> tuple[int, float, float]:
    """Rows ``threads`` printed, its wall time and its own peak RSS."""
    reactgraph = str(Path(sys.executable).with_name("reactgraph"))
    output = Path(folder) / "listing.txt"
    started = time.perf_counter()
    with output.open("w") as sink:
        process = subprocess.Popen(
            [reactgraph, "threads", "--db", db],
            stdout=sink,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "COLUMNS": "200"},
        )
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    assert os.waitstatus_to_exitcode(status) == 0
    lines = output.read_text().splitlines()
    rows = sum(line.split()[0].startswith("t0") for line in lines if line.strip())
    return rows, wall, usage.ru_maxrss * 1024


def bench_listing(repeats: int, sizes: tuple[int, ...] = SIZES) -> None:
    rows = []
    for count in sizes:
        with tempfile.TemporaryDirectory() as folder:
            db = str(Path(folder) / "runs.sqlite")
            recorded(db, count)
            shown, wall, peak = listed(db, folder)
        rows.append((f"{count:,}", f"{shown:,}", f"{wall:.1f}", mb(peak)))
    print("## `reactgraph threads` over many runs (SQLite, threads without checkpoints)\n")
    table(("run records", "rows listed", "wall (s)", "peak RSS"), rows)


if __name__ == "__main__":
    bench_listing(1, tuple(int(n) for n in sys.argv[1:]) or SIZES)
