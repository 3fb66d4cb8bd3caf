"""How long the make targets take here: wall time, CPU time of everything they ran, the load
average before and after, and pytest's closing line. Nothing here is a test.

    python bench/suite_times.py                       # make test
    python bench/suite_times.py test test-kills       # any targets, one after the other
    python bench/suite_times.py --busy test           # beside one CPU-bound process
    python bench/suite_times.py --clone ../fresh demo test   # in a fresh clone of HEAD

``--clone DIR`` clones this checkout's HEAD into DIR (a sibling of ``../shared``, so the
Makefile finds the tiktoken cache) and runs the targets there: ``demo`` first times the set-up
from nothing. ``make test-timing TIMING="--busy test"`` runs it with those arguments. The load
average is the machine's, other work included: a figure means little without it.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed|error).*?)\s*=*$")


def children_cpu() -> float:
    """User plus system seconds of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def closing_line(output: str) -> str:
    """pytest's closing line (``N passed, M skipped in T s``), or the output's last line."""
    lines = output.strip().splitlines()
    for line in reversed(lines):
        found = SUMMARY.match(line.strip())
        if found:
            return found.group(1)
    return lines[-1] if lines else ""


def timed(target: str, folder: Path, log: Path) -> dict[str, str]:
    """``make TARGET`` in ``folder``, its output kept in ``log``."""
    before, cpu, started = load(), children_cpu(), time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(["make", target], cwd=folder, stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - started
    return {
        "target": f"make {target}",
        "exit": str(done.returncode),
        "wall": f"{int(wall // 60)} min {wall % 60:04.1f} s",
        "cpu": f"{(children_cpu() - cpu) / 60:.1f} min",
        "load before/after (1/5/15 min)": f"{before} -> {load()}",
        "pytest": closing_line(log.read_text("utf-8", errors="replace")),
    }


def busy_loop() -> subprocess.Popen[bytes]:
    """One CPU-bound process (``while True: pass``), as the issue's "beside a busy loop"."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", default=["test"], help="make targets, in order")
    parser.add_argument("--busy", action="store_true", help="beside one CPU-bound process")
    parser.add_argument("--clone", type=Path, help="a fresh clone of HEAD here, run there")
    parser.add_argument("--logs", type=Path, default=Path("/tmp"), help="where outputs go")
    args = parser.parse_args(argv)
    folder = ROOT
    if args.clone is not None:
        if args.clone.exists():
            parser.error(f"{args.clone} exists: give a new folder")
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(args.clone)], check=True)
        folder = args.clone.resolve()
    loop = busy_loop() if args.busy else None
    rows = []
    try:
        for target in args.targets:
            log = args.logs / f"suite-times-{target.replace('/', '_')}.log"
            rows.append(timed(target, folder, log))
            print(" | ".join(rows[-1].values()), f"(output: {log})", flush=True)
    finally:
        if loop is not None:
            loop.kill()
            loop.wait()
    header = list(rows[0]) if rows else []
    print(f"\n{time.strftime('%Y-%m-%d %H:%M')} in {folder}{' beside a busy loop' * args.busy}")
    print("| " + " | ".join(header) + " |\n|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(row.values()) + " |")
    return max((int(row["exit"]) for row in rows), default=0)


if __name__ == "__main__":
    sys.exit(main())
