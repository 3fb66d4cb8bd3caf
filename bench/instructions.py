"""Before and after in machine instructions: the overhead section's contenders counted by
valgrind (``callgrind``), an earlier revision against this tree, each contender's instructions
a turn and its ratio to the prebuilt agent.

    python bench/instructions.py a8180d3               # 200 turns
    python bench/instructions.py a8180d3 --turns 40 --runs 6

A count does not move with the machine's load, so it settles what a noisy VM's timings cannot:
whether the loop's own work per turn grew. Compare the two trees' counts of one run: they repeat
to 0.1-0.2% within a run, but a count moves by up to about 0.7% between runs (each process
hashes strings with its own seed, which moves dict layouts and lookups). It is not a timing:
a larger program's cache misses and a memory allocator's cost are not in it. Each count is a
process that runs the contender once to warm up and then ``1`` or ``1 + runs`` whole runs: their
difference, divided by the model calls it made, is the instructions a turn, the start-up, the
imports and the warm-up left out. Needs ``valgrind`` (``apt install valgrind``); one to five
minutes a count at 200 turns, by the machine. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from before_after import ANCHOR, HERE, OURS, both_trees, root_of

CHILD = """
import logging, sys
sys.path.insert(0, {bench!r})
logging.basicConfig(level=logging.ERROR)
from overhead import CONTENDERS
import reactgraph.nodes
assert reactgraph.nodes.__path__[0].startswith({root!r}), reactgraph.nodes.__path__
run = CONTENDERS[{name!r}]
run(3)
calls = sum(run({turns!r}) for _ in range({times!r}))
print(calls)
"""
_TOTAL = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def count(env: dict[str, str], name: str, turns: int, times: int) -> tuple[int, int]:
    """The instructions a process ran (valgrind's count) and the model calls it made, when it
    runs ``name`` ``times`` times."""
    root = str(root_of(env))
    code = CHILD.format(bench=str(HERE), root=root, name=name, turns=turns, times=times)
    with tempfile.TemporaryDirectory(prefix="reactgraph-callgrind-") as folder:
        out = Path(folder) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                code,
            ],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        found = _TOTAL.search(out.read_text())
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output for {name}")
    return int(found.group(1)), int(done.stdout.strip().splitlines()[-1])


def per_turn(env: dict[str, str], name: str, turns: int, runs: int) -> float:
    """Instructions a model call of ``name``'s whole runs (warm-up and imports left out)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        one, more = pool.map(lambda times: count(env, name, turns, times), (1, 1 + runs))
    return (more[0] - one[0]) / (more[1] - one[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("revision", help="the earlier revision, e.g. a8180d3")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2, help="runs counted past the first")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reactgraph-before-") as folder:
        trees = both_trees(args.revision, Path(folder))
        names = [*OURS, ANCHOR]
        found = {
            (label, name): per_turn(env, name, args.turns, args.runs)
            for label, env in trees.items()
            for name in names
        }
    print(
        f"## Instructions a turn, before and after ({args.turns} turns, {args.runs} runs "
        f"counted past the first; valgrind)\n"
    )
    print("| tree | contender | instructions a turn | / prebuilt |")
    print("| --- | --- | --- | --- |")
    for label in trees:
        for name in names:
            ratio = found[label, name] / found[label, ANCHOR]
            print(f"| {label} | {name} | {found[label, name]:,.0f} | {ratio:.3f}x |")
    first, last = list(trees)
    print("\n| contender | before | after | rise |")
    print("| --- | --- | --- | --- |")
    for name in OURS:
        was = found[first, name] / found[first, ANCHOR]
        now = found[last, name] / found[last, ANCHOR]
        print(f"| {name} | {was:.3f}x | {now:.3f}x | {now - was:+.3f} |")
    print(f"\nload average (no bearing on a count): {os.getloadavg()}")


if __name__ == "__main__":
    main()
