"""Before and after, in one run: the overhead (and, with ``--concurrency``, the many-runs-at-once
section) of an earlier revision and of this tree, measured in turns on this machine.

    python bench/before_after.py 3610e2a            # overhead, 5 alternating rounds
    python bench/before_after.py 3610e2a --concurrency  # and 4 alternating rounds of that
    python bench/before_after.py a8180d3 --clock cpu --rounds 20 --best 5 --core 1  # a noisy VM

The earlier revision is exported (``git archive``) to a temporary folder and imported in its own
processes instead of this tree (``sitecustomize`` below re-points the editable install's finder,
so worker processes started by a section get it too). Nothing here is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


def root_of(env: dict[str, str]) -> Path:
    """The tree an environment imports: the earlier revision's export, or this one."""
    return Path(env.get("REACTGRAPH_BENCH_TREE", str(TREE)))


def child(
    env: dict[str, str], names: list[str], clock: str, best: int = 1, core: int | None = None
) -> dict[str, float]:
    root = str(root_of(env))
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


_WALL = re.compile(
    r"^- reactgraph, aiohttp, (?P<row>[^:]+): [\d.]+x one run .*?; "
    r"(?P<ratio>[\d.]+)x the prebuilt agent's best wall",
    re.MULTILINE,
)
_CPU = re.compile(
    r"^\| (?P<name>reactgraph|LangGraph prebuilt agent), aiohttp, 1 process "
    r"\|(?: [^|]* \|){3} (?P<ms>[\d.]+) \|$",
    re.MULTILINE,
)
CONCURRENCY_ROWS = ("1 process", "first batch", "later batch", "client CPU a turn, 1 process")


def concurrency_figures(text: str) -> dict[str, float]:
    """A concurrency section's ratios to the prebuilt agent, read from what it printed (an
    earlier tree's section prints the same lines): each row's wall against the prebuilt agent's
    best, and reactgraph's client CPU a turn against the prebuilt agent's, both on aiohttp in
    one process. Rows it did not print are missing."""
    found = {m["row"].rsplit(", ", 1)[-1]: float(m["ratio"]) for m in _WALL.finditer(text)}
    cpu = {m["name"]: float(m["ms"]) for m in _CPU.finditer(text)}
    if len(cpu) == 2 and cpu["LangGraph prebuilt agent"] > 0:
        found[CONCURRENCY_ROWS[-1]] = cpu["reactgraph"] / cpu["LangGraph prebuilt agent"]
    return found


def print_rises(rows: list[tuple[str, list[float], list[float]]]) -> None:
    """Each row's median before and after, its rise, and the noise: the interquartile range of
    the rounds' own values, the wider of the two trees."""
    print("| row | before | after | rise | noise |")
    print("| --- | --- | --- | --- | --- |")
    for name, was, now in rows:
        low, high = statistics.median(was), statistics.median(now)
        noise = max(_spread(was), _spread(now))
        print(f"| {name} | {low:.3f}x | {high:.3f}x | {high - low:+.3f} | {noise:.3f} |")
    print()


def overhead_rounds(trees: dict[str, dict[str, str]], args: argparse.Namespace) -> None:
    """The overhead section's contenders in each tree's own process, ``args.rounds`` times,
    then each ratio's rise against the noise between rounds."""
    samples: dict[tuple[str, str, int], list[float]] = {}
    for _ in range(args.rounds):
        for label, env in trees.items():
            found = child(env, [*OURS, ANCHOR], CLOCKS[args.clock], args.best, args.core)
            for key, seconds in found.items():
                name, n = key.split("|")
                samples.setdefault((label, name, int(n)), []).append(seconds * 1000)
    # A ratio is the median of each round's (a contender against the prebuilt agent in the
    # same process): a round's drift, which moves both, cancels.
    rounds = {
        (label, name, n): [x / a for x, a in zip(values, samples[label, ANCHOR, n], strict=True)]
        for (label, name, n), values in samples.items()
    }
    print(
        f"## Overhead per turn, before and after (medians of {args.rounds} rounds, "
        f"ms/turn, {args.clock} time, best of {args.best} a round)\n"
    )
    print("| tree | contender | 40 turns | 200 turns | / prebuilt at 40 | / prebuilt at 200 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label in trees:
        for name in [*OURS, ANCHOR]:
            cells = [f"{statistics.median(samples[label, name, n]):.2f}" for n in (40, 200)]
            ratios = [f"{statistics.median(rounds[label, name, n]):.2f}x" for n in (40, 200)]
            print(f"| {label} | {name} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    print(
        "\nThe rise of each ratio from before to after, against the noise between rounds "
        "(the interquartile range of the rounds' own ratios, the wider of the two trees):\n"
    )
    first, last = list(trees)
    print_rises(
        [
            (f"{name}, {n} turns", rounds[first, name, n], rounds[last, name, n])
            for name in OURS
            for n in (40, 200)
        ]
    )
    print(f"load average: {os.getloadavg()}\n", flush=True)


def concurrency_rounds(trees: dict[str, dict[str, str]], rounds: int) -> None:
    """Each tree's own concurrency section in its own process, ``rounds`` times, the order
    alternating (a drift of the machine moves both trees alike), then each ratio's rise
    against the noise between rounds."""
    labels = list(trees)
    samples: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
    print(
        f"## Many runs at once, before and after ({rounds} rounds, each tree's own "
        "`bench.py concurrency --repeats 2` in its own process, the order alternating)\n"
    )
    print("| round | tree | " + " | ".join(CONCURRENCY_ROWS) + " | load average |")
    print("|" + " --- |" * (len(CONCURRENCY_ROWS) + 3), flush=True)
    for number in range(rounds):
        for label in labels if number % 2 == 0 else labels[::-1]:
            own = root_of(trees[label]) / "bench" / "bench.py"  # its own bench and fakes
            done = subprocess.run(
                [sys.executable, str(own), "concurrency", "--repeats", "2"],
                env=trees[label],
                capture_output=True,
                text=True,
            )
            figures = concurrency_figures(done.stdout)
            missing = [row for row in CONCURRENCY_ROWS if row not in figures]
            if done.returncode or missing:
                sys.exit(
                    f"{label}'s concurrency section (exit {done.returncode}) printed no "
                    f"{missing}:\n{done.stdout}{done.stderr[-4000:]}"
                )
            samples[label].append(figures)
            cells = " | ".join(f"{figures[row]:.2f}x" for row in CONCURRENCY_ROWS)
            load = os.getloadavg()[0]
            print(f"| {number + 1} | {label} | {cells} | {load:.1f} |", flush=True)
    print("\nThe rise of each median ratio to the prebuilt agent from before to after:\n")
    print_rises(
        [
            (row, [f[row] for f in samples[labels[0]]], [f[row] for f in samples[labels[1]]])
            for row in CONCURRENCY_ROWS
        ]
    )


def _count(text: str) -> int:
    """A number of rounds: 1 or more."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("revision", help="the earlier revision, e.g. 3610e2a")
    parser.add_argument("--rounds", type=_count, default=5)
    parser.add_argument(
        "--concurrency",
        type=_count,
        nargs="?",
        const=4,
        default=0,
        metavar="ROUNDS",
        help="also the many-runs-at-once section, in this many alternating rounds (default 4)",
    )
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
        overhead_rounds(trees, args)
        if args.concurrency:
            concurrency_rounds(trees, args.concurrency)


if __name__ == "__main__":
    main()
