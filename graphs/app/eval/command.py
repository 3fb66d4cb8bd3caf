"""``reactgraph eval``: score the variants side by side on a question set."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from reactgraph.app import console as out
from reactgraph.app.engines import Flight
from reactgraph.app.eval.arms import arms_of, variants_of
from reactgraph.app.eval.inputs import Item, bundled_questions, read_questions
from reactgraph.app.eval.report import last_lines, write_report
from reactgraph.app.eval.run import DATABASE, RESULTS, read_results, run_eval
from reactgraph.app.options import UsageError, make_model
from reactgraph.app.results import Results
from reactgraph.app.run_commands import engine_from, recipe_from


def items_from(args: argparse.Namespace) -> list[Item]:
    """The question set: a file in the chosen format, or the bundled one."""
    if args.bundled == (args.questions is not None):
        raise UsageError("give a question file, or --bundled for the bundled question set")
    if args.bundled:
        items = bundled_questions()
    else:
        try:
            items, problems = read_questions(args.questions, args.format)
        except ValueError as error:
            raise UsageError(str(error)) from None
        for problem in problems:
            out.warn(f"{args.questions}: {problem}; skipped")
    if args.limit is not None:
        items = items[: args.limit]
    if not items:
        raise UsageError(f"no question to run in {args.questions}")
    return items


def source_of(args: argparse.Namespace) -> str:
    """The question set's name for its threads and result lines: ``bundled``, or the file's
    absolute path with its format."""
    if args.bundled:
        return "bundled"
    return f"{args.format}:{os.path.realpath(args.questions)}"


def cmd_eval(args: argparse.Namespace) -> int:
    arms = arms_of(args.variants, getattr(args, "action_format", None))
    bench = getattr(args, "bench", None)
    if bench is not None:
        from reactgraph.app.eval import bfcl_command

        arms = bfcl_command.arms_for(args, arms)
        items = bfcl_command.items_for(args)
        source = bfcl_command.SOURCE
    variants = [a.label for a in arms]  # the result lines' and the report's names
    engine = engine_from(args)
    if bench is None:
        items = items_from(args)
        source = source_of(args)
    folder = Path(args.out)
    writable(folder)
    make_model(args.model, args.base_url, args.timeout)  # a key or a server, or say what to set
    args.variant = variants_of(arms)[0]  # the recipe's own; each pair names its arm
    args.db = args.db or str((folder / DATABASE).resolve())
    # A setting applies to the chosen variants that take it (one of them at least).
    recipe = recipe_from(args, variants_of(arms))
    started = time.perf_counter()
    flight = Flight()
    with out.progress(flight) as bar:
        task = bar.add_task("pairs", total=None, failed=0)

        def on_start(todo: int, done: int, other: int) -> None:
            if done:
                out.console.print(f"[dim]{done} pair(s) already done in {folder}; skipped[/dim]")
            if other:
                out.console.print(
                    f"{other} pair(s) in {folder} were answered under another config (the "
                    "model, its server, a setting that changes answers, the corpus or the "
                    "tools, or by a version that did not record it); they run again"
                )
            bar.update(task, total=todo)

        # Ctrl-C: "finished pairs are kept" (reactgraph.app.interrupts, hints.interrupted_hint)
        failures = 0
        how = {} if bench is None else bfcl_command.how_to_run()
        for line in run_eval(
            recipe,
            items,
            variants,
            folder,
            workers=args.workers,
            concurrency=args.concurrency,
            on_start=on_start,
            source=source,
            flight=flight,
            **engine,
            **how,
        ):
            failures += bool(line.get("error"))
            bar.update(task, advance=1, failed=failures)
    wall = time.perf_counter() - started
    if bench is not None:
        return bfcl_command.report(args, folder, variants, wall, len(items))
    return report(folder, variants, args.model, wall, len(items))


def writable(folder: Path) -> None:
    """The --out folder, made if need be, takes the results file; else one line."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        Results(str(folder / RESULTS)).close()
    except OSError as error:
        raise UsageError(
            f"cannot write the results to --out {folder}: {error.strerror or error}; "
            "pass a folder you can write to"
        ) from None


def report(folder: Path, variants: list[str], model: str, wall: float, questions: int) -> int:
    """Write summary.md and summary.png, print the table; 1 if a pair ended in an error."""
    lines = [line for line in read_results(folder) if line.get("variant") in variants]
    notes = [
        f"{questions} question(s) x {len(variants)} variant(s); this run's wall time "
        f"{wall:.1f} s (variants interleaved: the seconds column sums each variant's runs)",
    ]
    table = write_report(lines, folder, model=model, notes=notes)
    return reported(folder, table, lines)


def reported(folder: Path, table: str, lines: list[dict[str, Any]]) -> int:
    """Print the report's table and where it is; 1 if a pair (its last line) is an error."""
    out.console.print(table, markup=False)
    out.console.print(f"[dim]wrote {folder / 'summary.md'} and {folder / 'summary.png'}[/dim]")
    # As in the report, a pair's last line counts: an error a re-run has since retried is gone.
    latest = [line for rows in last_lines(lines).values() for line in rows.values()]
    failed = [line for line in latest if line.get("error")]
    if failed:  # exit 1 says a pair failed: this says how many, and why
        first = str(failed[0]["error"]).strip().splitlines()[0]
        out.fail(
            f"{len(failed)} of {len(latest)} pair(s) ended in an error (the first: {first}); "
            f"their lines in {folder / RESULTS} say why; run the same command again to retry them"
        )
    return 1 if failed else 0
