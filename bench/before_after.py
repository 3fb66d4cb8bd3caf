"""Before and after, in one run: the overhead (and, with ``--concurrency``, the many-runs-at-once
section) of an earlier revision and of this tree, measured in turns on this machine.

    python bench/before_after.py 3610e2a            # overhead, 5 alternating rounds
    python bench/before_after.py 3610e2a --concurrency
    python bench/before_after.py a8180d3 --clock cpu --rounds 20 --best 5 --core 1  # a noisy VM

The earlier revision is exported (``git archive``) to a temporary folder and imported in its own
processes instead of this tree (``sitecustomize`` below re-points the editable install's finder,
so worker processes started by a section get it too). Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE.parent
PACKAGES = {"reactgraph": "graphs", "reactgraph.nodes": "nodes", "reactgraph.tools": "tools"}
SITE = f"""
import os
root = os.environ.get("REACTGRAPH_BENCH_TREE")
if root:
    import glob, importlib
    found = [os.path.basename(p)[:-3] for d in __import__("sys").path
             for p in glob.glob(os.path.join(d, "__editable___reactgraph_*_finder.py"))]
    finder = importlib.import_module(found[0])  # the editable install's, whatever its version
    finder.MAPPING.update({{k: os.path.join(root, v) for k, v in {PACKAGES!r}.items()}})
    finder.NAMESPACES = {{k: [p.replace({str(TREE)!r}, root) for p in v]
                          for k, v in finder.NAMESPACES.items()}}
"""
CHILD = """
import json, logging, sys, time
sys.path.insert(0, {bench!r})
logging.basicConfig(level=logging.ERROR)
from overhead import CONTENDERS
import reactgraph.nodes
assert reactgraph.nodes.__path__[0].startswith({root!r}), reactgraph.nodes.__path__
import os
if {core!r} is not None:
    os.sched_setaffinity(0, {{{core!r}}})
clock = time.{clock}
def per_turn(run, turns):
    best = []
    for _ in range({best!r}):
        started = clock()
        calls = run(turns)
        best.append((clock() - started) / calls)
    return min(best)
names = {names!r}
for name in names:
    CONTENDERS[name](3)
print(json.dumps({{f"{{name}}|{{n}}": per_turn(CONTENDERS[name], n) for name in names
                  for n in (40, 200)}}))
"""
OURS = ["reactgraph transcript", "reactgraph transcript, tool_calls"]
ANCHOR = "LangGraph prebuilt agent"
CLOCKS = {"wall": "perf_counter", "cpu": "process_time"}


def environment(root: Path | None, site: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), str(HERE)])))
    env.pop("REACTGRAPH_BENCH_TREE", None)
    if root is not None:
        env["REACTGRAPH_BENCH_TREE"] = str(root)
    return env


def both_trees(revision: str, folder: Path) -> dict[str, dict[str, str]]:
    """The environments of the earlier revision (exported to ``folder``/tree, with the
    ``sitecustomize`` that points imports at it) and of this tree, by their labels."""
    before, site = folder / "tree", folder / "site"
    before.mkdir()
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    archive = subprocess.run(
        ["git", "-C", str(TREE), "archive", revision], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
    return {f"before ({revision})": environment(before, site), "after": environment(None, site)}


def child(
    env: dict[str, str], names: list[str], clock: str, best: int = 1, core: int | None = None
) -> dict[str, float]:
    root = env.get("REACTGRAPH_BENCH_TREE", str(TREE))
    code = CHILD.format(bench=str(HERE), names=names, root=root, clock=clock, best=best, core=core)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _spread(values: list[float]) -> float:
    """The interquartile range of ``values`` (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    low, _, high = statistics.quantiles(values, n=4)
    return high - low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("revision", help="the earlier revision, e.g. 3610e2a")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", action="store_true", help="also run that section")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time (as bench.py), or this process's CPU time (steadier on a busy machine)",
    )
    parser.add_argument(
        "--best",
        type=int,
        default=1,
        help="each round, the best of this many runs of each contender and length (a noisy VM)",
    )
    parser.add_argument(
        "--core", type=int, help="run every round's process on this CPU alone (Linux)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reactgraph-before-") as folder:
        trees = both_trees(args.revision, Path(folder))
        before = Path(folder) / "tree"
        samples: dict[tuple[str, str, int], list[float]] = {}
        for _ in range(args.rounds):
            for label, env in trees.items():
                found = child(env, [*OURS, ANCHOR], CLOCKS[args.clock], args.best, args.core)
                for key, seconds in found.items():
                    name, n = key.split("|")
                    samples.setdefault((label, name, int(n)), []).append(seconds * 1000)
        ms = {key: statistics.median(values) for key, values in samples.items()}
        # A ratio is the median of each round's (a contender against the prebuilt agent in the
        # same process): a round's drift, which moves both, cancels.
        rounds = {
            (label, name, n): [
                x / a for x, a in zip(values, samples[label, ANCHOR, n], strict=True)
            ]
            for (label, name, n), values in samples.items()
        }
        ratio = {key: statistics.median(values) for key, values in rounds.items()}
        print(
            f"## Overhead per turn, before and after (medians of {args.rounds} rounds, "
            f"ms/turn, {args.clock} time, best of {args.best} a round)\n"
        )
        print("| tree | contender | 40 turns | 200 turns | / prebuilt at 40 | / prebuilt at 200 |")
        print("| --- | --- | --- | --- | --- | --- |")
        for label in trees:
            for name in [*OURS, ANCHOR]:
                cells = [f"{ms[label, name, n]:.2f}" for n in (40, 200)]
                ratios = [f"{ratio[label, name, n]:.2f}x" for n in (40, 200)]
                print(f"| {label} | {name} | {' | '.join(cells)} | {' | '.join(ratios)} |")
        print(
            "\nThe rise of each ratio from before to after, against the noise between rounds "
            "(the interquartile range of the rounds' own ratios, the wider of the two trees):\n"
        )
        print("| contender | turns | before | after | rise | noise |")
        print("| --- | --- | --- | --- | --- | --- |")
        first, last = list(trees)
        for name in OURS:
            for n in (40, 200):
                noise = max(_spread(rounds[label, name, n]) for label in trees)
                was, now = ratio[first, name, n], ratio[last, name, n]
                print(
                    f"| {name} | {n} | {was:.2f}x | {now:.2f}x | {now - was:+.2f} | {noise:.2f} |"
                )
        print(f"\nload average: {os.getloadavg()}\n")
        if args.concurrency:
            for label, env in trees.items():
                print(f"### {label}\n", flush=True)
                # Each tree's own section (its bench and test fakes import its own modules).
                own = (before if label != "after" else TREE) / "bench" / "bench.py"
                subprocess.run(
                    [sys.executable, str(own), "concurrency", "--repeats", "2"],
                    env=env,
                    check=True,
                )
                print(f"load average: {os.getloadavg()}\n", flush=True)


if __name__ == "__main__":
    main()
