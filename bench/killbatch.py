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


def killed_run(folder: Path, url: str, after_s: float) -> str:
    """Start the batch in its own process group, SIGKILL the group after ``after_s``; the
    result lines written so far (``done`` if it ended before the kill)."""
    process = subprocess.Popen(
        command(folder, url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        process.wait(after_s)
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
    from reactgraph.storage.status import read_thread

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
        started = time.perf_counter()
        subprocess.run([*command(folder, url)[:1], "--help"], capture_output=True)
        startup_s = time.perf_counter() - started
        # How long an unkilled batch takes, to kill it at moments spread over the work left.
        (folder / "clean").mkdir()
        (folder / "clean" / "q.jsonl").write_text((folder / "q.jsonl").read_text())
        started = time.perf_counter()
        clean = subprocess.run(command(folder / "clean", url), capture_output=True, text=True)
        assert clean.returncode == 0, clean.stderr[-2000:]
        full_s = time.perf_counter() - started
        moments, written = [], []
        for _ in range(KILLS):
            left = 1 - len(done_lines(folder)) / QUESTIONS
            moments.append(startup_s + chance.uniform(0.1, 0.9) * (full_s - startup_s) * left)
            written.append(killed_run(folder, url, moments[-1]))
        last = subprocess.run(command(folder, url), capture_output=True, text=True)
        assert last.returncode == 0, last.stderr[-2000:]
        results = done_lines(folder)
        turns = thread_turns(folder)
    ids = Counter(r["id"] for r in results)
    once = sum(count == 1 for count in ids.values())
    answered = sum(r["status"] == "answered" for r in results)
    matching = sum(turns.get(r["thread_id"]) == r["turns"] == TURNS for r in results)
    print(f"- an unkilled batch: {full_s:.1f} s; the CLI's start: {startup_s:.1f} s\n")
    print(
        f"## A {QUESTIONS}-question batch, SIGKILL of its process group at {KILLS} random "
        f"moments, then re-run (`--workers {WORKERS}`, {TURNS} turns, seed {seed})\n"
    )
    table(
        ("kill at (s)", "result lines after each kill", "questions", "answered once",
         "lines", "answered", "turns = thread's turns", "verdict"),
        [(", ".join(f"{m:.1f}" for m in moments), ", ".join(map(str, written)), QUESTIONS,
          once, len(results), answered, matching,
          "met" if once == len(results) == answered == matching == QUESTIONS
          and "done" not in written else "**NOT met**")],
    )  # fmt: skip


if __name__ == "__main__":
    bench_killbatch(1, int(sys.argv[1]) if len(sys.argv) > 1 else 20)
