"""A 300-question ``reactgraph batch`` killed with SIGKILL of its whole process group (the parent
and every worker) at 5 random moments, then run once more to the end: every question must be
answered exactly once, with the turns its thread holds, and no result line may name a run that
did not finish.

``python bench/killbatch.py [SEED]`` (or the ``killbatch`` section of ``bench.py``): ChatOpenAI
against the local server (20 ms a call, 3 turns a question), ``--workers 2``, SQLite.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import local_server, table

QUESTIONS = int(os.environ.get("BENCH_KILL_QUESTIONS", "300"))
KILLS, TURNS, WORKERS, LATENCY_S = 5, 3, 2, 0.02


def command(folder: Path, url: str) -> list[str]:
    reactgraph = str(Path(sys.executable).with_name("reactgraph"))
    return [
        reactgraph, "batch", str(folder / "q.jsonl"), "--out", str(folder / "results.jsonl"),
        "--db", str(folder / "runs.sqlite"), "--workers", str(WORKERS), "--base-url", url,
        "--timeout", "60",
    ]  # fmt: skip


def done_lines(folder: Path) -> list[dict]:
    """The whole result lines so far (a kill can leave the last one torn)."""
    path = folder / "results.jsonl"
    lines = []
    for text in path.read_text().splitlines() if path.exists() else []:
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:
            continue
    return lines


def killed_run(folder: Path, url: str, target: int, extra_s: float) -> str:
    """Start the batch in its own process group; once it has written ``target`` result lines,
    wait ``extra_s`` more (so the kill lands mid-step, anywhere) and SIGKILL the whole group.
    The result lines written by then (``done`` if it ended before the kill)."""
    process = subprocess.Popen(
        command(folder, url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    while len(done_lines(folder)) < target and process.poll() is None:
        time.sleep(0.05)
    try:
        process.wait(extra_s)
        return "done"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return str(len(done_lines(folder)))


def thread_turns(folder: Path) -> dict[str, int]:
    """The turns each thread of the database holds, as `show` reads them."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reactgraph.app.options import reader
    from reactgraph.storage import open_db
    from reactgraph.storage.snapshots import read_thread

    turns = {}
    with open_db(str(folder / "runs.sqlite"), read_only=True) as (saver, _):
        graph = reader("transcript", saver)
        for line in done_lines(folder):
            status, values = read_thread(graph, line["thread_id"])
            turns[line["thread_id"]] = (
                len(values.get("turns") or []) if status == "finished" else -1
            )
    return turns


def bench_killbatch(repeats: int, seed: int = 20) -> None:
    chance = random.Random(seed)
    with tempfile.TemporaryDirectory() as name, local_server(LATENCY_S, TURNS) as url:
        folder = Path(name)
        lines = (
            json.dumps({"id": f"q{i}", "question": f"What is {i} + 1?"}) for i in range(QUESTIONS)
        )
        (folder / "q.jsonl").write_text("\n".join(lines) + "\n")
        moments, written = [], []
        for kill in range(KILLS):
            # A random moment of the work left: after a random share of it is written, plus up
            # to a second more, so some kills land between a step's writes and its checkpoint.
            done = len(done_lines(folder))
            share = (QUESTIONS - done) // (KILLS + 1 - kill)
            target = done + chance.randint(1, max(1, share))
            moments.append((target, chance.uniform(0.0, 1.0)))
            written.append(killed_run(folder, url, *moments[-1]))
        last = subprocess.run(command(folder, url), capture_output=True, text=True)
        assert last.returncode == 0, last.stderr[-2000:]
        results = done_lines(folder)
        turns = thread_turns(folder)
    ids = Counter(r["id"] for r in results)
    once = sum(count == 1 for count in ids.values())
    answered = sum(r["status"] == "answered" for r in results)
    matching = sum(turns.get(r["thread_id"]) == r["turns"] == TURNS for r in results)
    print(
        f"## A {QUESTIONS}-question batch, SIGKILL of its process group at {KILLS} random "
        f"moments, then re-run (`--workers {WORKERS}`, {TURNS} turns, seed {seed})\n"
    )
    table(
        ("kill when (lines written + s)", "result lines after each kill", "questions",
         "answered once", "lines", "answered", "turns = thread's turns", "verdict"),
        [(", ".join(f"{n} + {extra:.2f}" for n, extra in moments), ", ".join(written), QUESTIONS,
          once, len(results), answered, matching,
          "met" if once == len(results) == answered == matching == QUESTIONS
          and "done" not in written else "**NOT met**")],
    )  # fmt: skip


if __name__ == "__main__":
    bench_killbatch(1, int(sys.argv[1]) if len(sys.argv) > 1 else 20)
