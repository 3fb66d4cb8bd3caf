"""What ``reactgraph threads`` and ``prune --finished`` read: every run record, 500 at a time.
Each size runs in a process of its own, which pages through all the records and reports how
many it saw and its peak RSS: the same whether there are ten thousand or more than a hundred
thousand (before, the listing stopped silently at 100,000, having read them all at once). The
time should grow as the records do (it was quadratic with the store's LIMIT/OFFSET ``search``).
SQLite, then PostgreSQL (``REACTGRAPH_BENCH_PG``'s server, in a database made for the run and
dropped after it) when one answers.

``python bench/listing.py [N ...]`` (or the ``listing`` section of ``bench.py``). Only the
paging is timed: the commands then read each thread's status (constant memory per thread) and
``threads`` renders its table a page at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import mb, table

ROOT = Path(__file__).resolve().parents[1]
SIZES = (10_000, 110_000)
POSTGRES = os.environ.get("REACTGRAPH_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")

WRITE = """
import sys
from langgraph.store.base import PutOp
from reactgraph.storage import open_db
from reactgraph.storage.database import RUNS, new_record

db, count = sys.argv[1], int(sys.argv[2])
with open_db(db) as (_, store):
    for start in range(0, count, 5000):
        ops = []
        for n in range(start, min(count, start + 5000)):
            record = new_record(f"t{n:06}", f"question {n}", "transcript", "m", None, None, {})
            ops.append(PutOp(RUNS, record.thread_id, dict(record.__dict__)))
        store.batch(ops)
"""

READ = """
import json, resource, sys, time
from reactgraph.storage import RunRecord, open_db

with open_db(sys.argv[1], read_only=True) as (_, store):
    started = time.perf_counter()
    seen = {record.thread_id for record in RunRecord.each(store)} if sys.argv[2] == "ids" else None
    count = len(seen) if seen is not None else sum(1 for _ in RunRecord.each(store))
    wall = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"count": count, "wall": wall, "peak": peak}))
"""


def python(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@contextlib.contextmanager
def sqlite_db() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        yield str(Path(folder) / "runs.sqlite")


@contextlib.contextmanager
def postgres_db() -> Iterator[str]:
    """A database of its own on the server, so the listing reads these records only."""
    sys.path.insert(0, str(ROOT))
    from tests.fakes import scratch_database

    with scratch_database(POSTGRES, "rg_bench_listing") as db:
        yield db


def measure(database: Any, count: int) -> tuple[str, ...]:
    with database() as db:
        started = time.perf_counter()
        python(WRITE, db, str(count))
        written = time.perf_counter() - started
        # Distinct ids (a set, so that one costs memory) to check none is missed or repeated.
        unique = json.loads(python(READ, db, "ids"))
        paged = json.loads(python(READ, db, "count"))
    assert unique["count"] == paged["count"] == count, (unique, paged, count)
    return (
        f"{count:,}",
        f"{unique['count']:,}",
        f"{written:.0f}",
        f"{paged['wall']:.2f}",
        mb(paged["peak"]),
    )


def bench_listing(repeats: int, sizes: tuple[int, ...] = SIZES) -> None:
    load = os.getloadavg()[0]
    rows = [("SQLite", *measure(sqlite_db, count)) for count in sizes]
    try:
        rows += [("PostgreSQL", *measure(postgres_db, count)) for count in sizes]
    except Exception as error:  # no server here: say so, keep the SQLite figures
        print(f"- PostgreSQL not measured: {type(error).__name__}: {error}")
    loads = f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    print(f"## Paging through the run records ({loads})\n")
    header = ("database", "records", "distinct seen", "written (s)", "paged (s)", "peak RSS")
    table(header, rows)


if __name__ == "__main__":
    bench_listing(1, tuple(int(n) for n in sys.argv[1:]) or SIZES)
