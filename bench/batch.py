"""``reactgraph batch`` as a user runs it: a JSONL of questions, ``--workers 2``, the real
``ChatOpenAI`` against the local server (no latency, so the figure is the CPU-bound ceiling),
the bundled search over a folder of long pages, so every Observation is 2,000 characters.
Reports throughput, peak RSS per process, and the database before and after pruning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import local_server, mb, table

QUESTIONS = int(os.environ.get("BENCH_BATCH_QUESTIONS", "1000"))
TURNS, WORKERS = 40, 2
WORDS = ["lorem", "ipsum", "dolor", "sit", "amet", "elit", "sed", "do", "eiusmod", "tempor"]


def write_corpus(folder: Path) -> None:
    """Pages of long paragraphs: a search gives three 1,200-character passages, cut to 2,000."""
    folder.mkdir()
    for page in range(30):
        paragraphs = [
            " ".join(WORDS[(page + p + i) % len(WORDS)] for i in range(200)) + f" page{page}."
            for p in range(6)
        ]
        (folder / f"page-{page}.md").write_text(f"# Page {page}\n\n" + "\n\n".join(paragraphs))


def run_watched(
    command: list[str], env: dict[str, str] | None = None
) -> tuple[int, bytes, float, dict[int, int]]:
    """Run ``command`` to its end: its exit code, stderr, wall seconds and each process's peak
    RSS (the command and all it started)."""
    peaks: dict[int, int] = {}
    done = threading.Event()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    watcher = threading.Thread(target=peak_rss, args=(process.pid, peaks, done))
    watcher.start()
    _, errors = process.communicate()
    wall = time.perf_counter() - started
    done.set()
    watcher.join()
    return process.returncode, errors, wall, peaks


def peak_rss(root: int, peaks: dict[int, int], done: threading.Event) -> None:
    """Polls the high-water RSS (VmHWM) of ``root`` and its descendants until ``done``."""
    while not done.wait(0.25):
        family, grew = {root}, True
        stats = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stats[int(entry.name)] = int(
                        (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                    )
                except (OSError, ValueError, IndexError):
                    continue
        while grew:
            more = {pid for pid, parent in stats.items() if parent in family} - family
            family |= more
            grew = bool(more)
        for pid in family:
            try:
                status = (Path("/proc") / str(pid) / "status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peaks[pid] = max(peaks.get(pid, 0), int(line.split()[1]) * 1024)


def run_batch(folder: Path, url: str) -> dict[str, float]:
    questions = folder / "q.jsonl"
    lines = (json.dumps({"id": i, "question": f"Question {i}?"}) for i in range(QUESTIONS))
    questions.write_text("\n".join(lines) + "\n")
    db, out = folder / "runs.sqlite", folder / "results.jsonl"
    reactgraph = str(Path(sys.executable).with_name("reactgraph"))
    command = [
        reactgraph, "batch", str(questions), "--out", str(out), "--db", str(db),
        "--workers", str(WORKERS), "--max-turns", str(TURNS), "--base-url", url,
        "--corpus", str(folder / "corpus"), "--timeout", "120",
    ]  # fmt: skip
    code, errors, wall, peaks = run_watched(command)
    assert code == 0, errors.decode()[-2000:]
    results = [json.loads(line) for line in out.read_text().splitlines()]
    answered = sum(r["status"] == "answered" for r in results)
    turns = sum(r["turns"] for r in results)
    size = db.stat().st_size
    started = time.perf_counter()
    pruned = subprocess.run(
        [reactgraph, "prune", "--finished", "--db", str(db)], capture_output=True, text=True
    )
    assert pruned.returncode == 0, pruned.stderr
    prune_s = time.perf_counter() - started
    workers = sorted(peaks.values(), reverse=True)
    return {
        "wall": wall,
        "answered": answered,
        "turns": turns,
        "size": size,
        "pruned": db.stat().st_size,
        "prune_s": prune_s,
        "peak_rss": workers,
    }


def bench_batch(repeats: int) -> None:
    with (
        tempfile.TemporaryDirectory() as name,
        local_server(0.0, TURNS, "search[lorem {n}]") as url,
    ):
        folder = Path(name)
        write_corpus(folder / "corpus")
        got = run_batch(folder, url)
    print(
        f"## `reactgraph batch`: {QUESTIONS:,} questions x {TURNS} turns, `--workers {WORKERS}`, "
        "2,000-character Observations, ChatOpenAI to the local server (no latency)\n"
    )
    peaks = ", ".join(mb(size) for size in got["peak_rss"][: WORKERS + 1])
    table(
        ("questions", "answered", "turns", "wall (s)", "questions/s", "turns/s",
         "SQLite file", "after `prune --finished`", "prune (s)"),
        [(QUESTIONS, got["answered"], got["turns"], f"{got['wall']:.0f}",
          f"{QUESTIONS / got['wall']:.2f}", f"{got['turns'] / got['wall']:.0f}",
          mb(got["size"]), mb(got["pruned"]), f"{got['prune_s']:.1f}")],
    )  # fmt: skip
    print(
        f"- peak RSS of the largest processes (the workers, then the parent): {peaks}\n"
        f"- kept per finished question: {mb(got['size'] / QUESTIONS)} with history, "
        f"{mb(got['pruned'] / QUESTIONS)} pruned\n"
    )
