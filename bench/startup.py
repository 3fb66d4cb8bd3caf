"""The command line's start-up: each command's wall time to its first answer, against
``python -c pass`` and ``python -c "import langgraph.graph"`` in the same run.

Every contender runs once per round, in turn, so a loaded machine slows them alike; the figures
are medians over the rounds. The goal: ``--version`` and every ``--help`` within 3x
``python -c pass``. ``threads`` and ``show`` read a small thread (the offline demo's run).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from common import PYTHON, command_medians, reactgraph, table, verdict

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes import demo_db  # noqa: E402  (a database holding the offline demo's run)

COMMANDS = ("ask", "resume", "show", "threads", "batch", "prune", "eval", "graph", "demo")
HELP_GOAL = 3.0


def bench_startup(repeats: int) -> None:
    print("\n## Start-up of each command (median wall ms; ratio to `python -c pass`)\n")
    folder = Path(tempfile.mkdtemp(prefix="reactgraph-startup-"))
    db = demo_db(folder)
    contenders: dict[str, list[str]] = {
        "python -c pass": [PYTHON, "-c", "pass"],
        'python -c "import langgraph.graph"': [PYTHON, "-c", "import langgraph.graph"],
        "reactgraph --version": reactgraph("--version"),
        "reactgraph --help": reactgraph("--help"),
        **{f"reactgraph {c} --help": reactgraph(c, "--help") for c in COMMANDS},
        "reactgraph threads": reactgraph("threads", "--db", db),
        "reactgraph show t1": reactgraph("show", "t1", "--db", db),
    }
    medians, base = command_medians(contenders, repeats, folder, (0, 1))
    rows = []
    for name, ms in medians.items():
        goal = "" if "--" not in name else verdict(ms <= HELP_GOAL * base)
        rows.append((name, f"{ms:.0f}", f"{ms / base:.1f}x", goal))
    table(("command", "ms", "x python -c pass", f"within {HELP_GOAL:g}x"), rows)
