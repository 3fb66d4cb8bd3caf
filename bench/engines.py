"""The two engines of ``reactgraph batch`` side by side on one machine: the worker-process pool
(``--engine local``) and Ray on one node (``--engine ray``, a local Ray started for the run).

The same command, questions and server through both: questions per second with an instant
server (and the same net of start-up: the batch's wall less a one-question batch's), start-up
seconds (a batch of one question), the peak memory of every process of the
command (Ray's own daemons and actors included), and, with the server's latency, the wall time
of 1,000 questions. The machine's load average is printed with each row: on a machine shared
with other work, it says what the figures were taken under."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from batch import run_watched
from common import local_server, mb

QUESTIONS = int(os.environ.get("BENCH_ENGINE_QUESTIONS", "200"))
SLOW_QUESTIONS = int(os.environ.get("BENCH_ENGINE_SLOW_QUESTIONS", "1000"))
LATENCY_S, TURNS, WORKERS, CONCURRENCY = 0.2, 4, 2, 32


def ray_env(folder: Path) -> dict[str, str]:
    """Loopback-only nodes; and, as in the tests, rfc3987-syntax (a Jupyter dependency of the
    dev extra) kept out of Ray's processes, whose every start would compile its grammar."""
    stub = folder / "stub" / "rfc3987_syntax"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text("raise ImportError\n")
    return {
        **os.environ,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "PYTHONPATH": str(stub.parent),
    }


def run(folder: Path, url: str, engine: str, questions: int) -> dict[str, float]:
    """One batch through ``engine``: its wall time and the sum of its processes' peak RSS. A
    local Ray that could not start in time (Ray waits 30 s for its raylet, which a machine
    shared with other work can exceed) is tried again, twice, and said so on stderr."""
    for _ in range(2):
        try:
            return _run(folder, url, engine, questions)
        except StartFailed as failed:
            print(f"engines: {failed}; trying again", file=sys.stderr, flush=True)
    return _run(folder, url, engine, questions)


class StartFailed(RuntimeError):
    """The local Ray did not start."""


def _run(folder: Path, url: str, engine: str, questions: int) -> dict[str, float]:
    name = f"{engine}-{questions}-{time.monotonic_ns()}"
    source = folder / f"{name}.jsonl"
    lines = (json.dumps({"id": i, "question": f"Question {i}?"}) for i in range(questions))
    source.write_text("\n".join(lines) + "\n")
    reactgraph = str(Path(sys.executable).with_name("reactgraph"))
    command = [
        reactgraph, "batch", str(source), "--out", str(folder / f"{name}.out"),
        "--db", str(folder / f"{name}.sqlite"), "--engine", engine, "--workers", str(WORKERS),
        "--concurrency", str(CONCURRENCY), "--base-url", url, "--timeout", "120",
    ]  # fmt: skip
    code, errors, wall, peaks = run_watched(command, ray_env(folder))
    if b"cannot start a local Ray" in errors:
        raise StartFailed(errors.decode().strip())
    assert code == 0, errors.decode()[-2000:]
    return {"wall": wall, "rss": sum(peaks.values()), "processes": len(peaks)}


def bench_engines(repeats: int) -> None:
    print(
        f"## `reactgraph batch --engine local|ray`: `--workers {WORKERS} --concurrency "
        f"{CONCURRENCY}`, {TURNS} turns a question, ChatOpenAI to the local server\n"
    )
    header = (
        "engine", "start-up (s, 1 question)", f"questions/s ({QUESTIONS}, no latency)",
        "questions/s after start-up",
        "peak RSS, all processes", "processes",
        f"wall (s), {SLOW_QUESTIONS:,} questions at {LATENCY_S * 1000:.0f} ms a call",
        "load average (1 min) before / after",
    )  # fmt: skip
    print("| " + " | ".join(header) + " |\n|" + " --- |" * len(header), flush=True)
    with (
        tempfile.TemporaryDirectory() as name,
        local_server(0.0, TURNS) as url,
        local_server(LATENCY_S, TURNS) as slow_url,
    ):
        folder = Path(name)
        for engine in os.environ.get("BENCH_ENGINES", "local,ray").split(","):
            before = os.getloadavg()[0]
            start = min(run(folder, url, engine, 1)["wall"] for _ in range(repeats))
            got = run(folder, url, engine, QUESTIONS)
            slow = run(folder, slow_url, engine, SLOW_QUESTIONS)["wall"]
            # A row as soon as it is measured: the header above is the table's.
            print(
                f"| {engine} | {start:.1f} | {QUESTIONS / got['wall']:.1f} "
                f"| {QUESTIONS / max(got['wall'] - start, 1e-9):.1f} | {mb(got['rss'])} "
                f"| {got['processes']} | {slow:.0f} | {before:.1f} / {os.getloadavg()[0]:.1f} |",
                flush=True,
            )
    print()


if __name__ == "__main__":
    bench_engines(1)
