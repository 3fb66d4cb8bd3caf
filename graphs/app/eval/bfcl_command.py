"""``reactgraph eval --bench bfcl``: what differs from an eval of a question file (the tasks,
the arms named with their grammar, the runner and the scorer, the report); the rest is
``reactgraph.app.eval.command``'s."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reactgraph.app.eval.arms import Arm, with_grammar
from reactgraph.app.eval.bfcl_data import VERSION, bfcl_items, categories_of
from reactgraph.app.eval.inputs import Item
from reactgraph.app.flags import UsageError

SOURCE = f"bfcl:{VERSION}"
"""The question set's name in the threads and result lines."""


def arms_for(args: argparse.Namespace, arms: list[Arm]) -> list[Arm]:
    """The arms, each named with its grammar (``--constrained-decoding`` for those that do not
    name one), so runs with and without it share a folder and a report."""
    return with_grammar(arms, getattr(args, "constrained_decoding", None) or "off")


def items_for(args: argparse.Namespace) -> list[Item]:
    """The chosen categories' tasks, ``--limit`` of each."""
    if args.questions is not None or args.bundled:
        raise UsageError(
            "--bench bfcl runs the benchmark's tasks: give no question file or --bundled"
        )
    return bfcl_items(categories_of(args.categories), args.limit)


def how_to_run() -> dict[str, Any]:
    """``run_eval``'s runner and scorer for the benchmark's tasks."""
    from reactgraph.app.eval.bfcl_run import bfcl_scored, open_bfcl_runner

    return {"runner": open_bfcl_runner, "score": bfcl_scored}


def parallel_note(args: argparse.Namespace) -> str:
    """How the run's loop met a parallel task: one call a turn (the default), or several."""
    if getattr(args, "parallel_tool_calls", None):
        from reactgraph.nodes.vocabulary.run_settings import RunSettings

        cap = getattr(args, "max_parallel_calls", None) or RunSettings().max_parallel_calls
        return (
            f"Parallel tool calls on (up to {cap} calls of one reply run at once): a parallel "
            "task is passed by a run that makes every call, in one reply or over its turns."
        )
    return (
        "Parallel tool calls off (the default: one call per model turn, the others of a reply "
        "answered that they did not run): a parallel task is passed by a run that makes every "
        "call, one after another. The prebuilt agent runs every call of a reply either way."
    )


def report(
    args: argparse.Namespace, folder: Path, variants: list[str], wall: float, tasks: int
) -> int:
    """The report over every arm in the folder (an earlier run's arms too, as with and without
    the grammar) for the chosen categories; 1 if a task of this run ended in an error."""
    from reactgraph.app.eval.bfcl_report import write_bfcl_report
    from reactgraph.app.eval.command import reported
    from reactgraph.app.eval.run import read_results

    categories = set(categories_of(args.categories))
    lines = [
        line
        for line in read_results(folder)
        if line.get("bench") == "bfcl" and line.get("category") in categories
    ]
    notes = [
        f"{tasks} task(s) x {len(variants)} arm(s) in this run ({', '.join(variants)}); its wall "
        f"time {wall:.1f} s. {parallel_note(args)}",
    ]
    table = write_bfcl_report(lines, folder, model=args.model, notes=notes)
    return reported(folder, table, [line for line in lines if line.get("variant") in variants])
