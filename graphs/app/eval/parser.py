"""The ``reactgraph eval`` sub-command's options (its command is ``reactgraph.app.eval.command``,
imported only when it runs)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from reactgraph.variants import VARIANTS


def positive(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return int(text)


def add_eval_parser(commands: Any, parents: list[argparse.ArgumentParser]) -> None:
    """The ``eval`` sub-command and its options."""
    evaluate = commands.add_parser(
        "eval", parents=parents, help="score the variants side by side on a question set"
    )
    evaluate.add_argument("questions", nargs="?", help="a JSONL (or --format hotpotqa) file")
    evaluate.add_argument(
        "--bundled", action="store_true", help="the bundled question set over the bundled corpus"
    )
    evaluate.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated variants to compare; VARIANT:tool_calls for a variant whose model "
        "calls its tools natively, prebuilt for LangGraph's prebuilt agent as a contender",
    )
    evaluate.add_argument(
        "--format", choices=("jsonl", "hotpotqa"), default="jsonl", help="the questions' format"
    )
    evaluate.add_argument(
        "--limit", type=positive, help="only the first N questions (with --bench: of each category)"
    )
    evaluate.add_argument(
        "--bench",
        choices=("bfcl",),
        help="a published benchmark instead of a question file: bfcl, the Berkeley Function "
        "Calling Leaderboard's tasks (the bfcl extra and the bfcl-eval package: see "
        "docs/benchmarks.md)",
    )
    evaluate.add_argument(
        "--categories",
        default="simple_python,multiple,parallel,irrelevance,multi_turn_base",
        help="with --bench bfcl: comma-separated categories, of simple_python, multiple, "
        "parallel, parallel_multiple, irrelevance, live_simple, multi_turn_base, "
        "multi_turn_miss_func, multi_turn_miss_param, multi_turn_long_context",
    )
    evaluate.add_argument(
        "--out", default=os.path.join("runs", "eval"), help="folder for results and summary"
    )
    evaluate.add_argument("--db", help="database of the runs (default: OUT/runs.sqlite)")
    evaluate.set_defaults(handler="reactgraph.app.eval.command:cmd_eval", prune=False)
