"""The BFCL report: accuracy per category and arm (variant, action format, grammar) with its 95%
confidence interval, tokens and wall time per task, and the failures by kind, as ``summary.md``
and ``summary.png``.

The interval is Wilson's score interval for a proportion: honest at small samples and at 0% or
100%, where the normal approximation's collapses to a point. With 25 tasks it is about +-18
points at 50%: two arms' figures that close are not told apart by this sample.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactgraph.app.eval.bfcl_data import CATEGORIES
from reactgraph.app.eval.bfcl_run import FAILURE_KINDS
from reactgraph.app.eval.report import MISSING, Page, last_lines, new_figure

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval of a proportion (95% by default), as (low, high) in [0, 1]."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Cell:
    """One category's figures for one arm."""

    category: str
    arm: str
    n: int
    passed: int
    low: float
    high: float
    tokens_per_task: float | None
    seconds_per_task: float | None
    failures: Mapping[str, int]

    @property
    def accuracy(self) -> float:
        """The share of tasks passed (an error counts as failed)."""
        return self.passed / self.n if self.n else 0.0


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def cells_of(lines: Iterable[Mapping[str, Any]]) -> list[Cell]:
    """One cell per (category, arm), categories then arms in the order they first appear; a
    task's last line counts (a re-run's retry of an error replaces it)."""
    rows: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for arm, by_id in last_lines(lines).items():
        for line in by_id.values():
            rows.setdefault((str(line.get("category")), arm), []).append(line)
    order = {c: i for i, c in enumerate([*CATEGORIES, *dict.fromkeys(c for c, _ in rows)])}
    ordered = sorted(rows.items(), key=lambda kv: order[kv[0][0]])
    return [_cell(category, arm, group) for (category, arm), group in ordered]


def _cell(category: str, arm: str, group: list[Mapping[str, Any]]) -> Cell:
    """One category's tasks in one arm, as a cell."""
    passed = sum(1 for line in group if line.get("score") == 1.0)
    ended = [line for line in group if not line.get("error")]
    low, high = wilson(passed, len(group))
    return Cell(
        category,
        arm,
        len(group),
        passed,
        low,
        high,
        _mean([float(line.get("total_tokens") or 0) for line in ended]),
        _mean([float(line.get("seconds") or 0) for line in ended]),
        _failures(group),
    )


def _failures(group: list[Mapping[str, Any]]) -> dict[str, int]:
    """The tasks that failed, by the kind of failure."""
    return dict(Counter(str(line["failure"]) for line in group if line.get("failure")))


def markdown_table(cells: Sequence[Cell]) -> str:
    """The cells as a markdown table, a row per category and arm."""
    kinds = [k for k in FAILURE_KINDS if any(c.failures.get(k) for c in cells)]
    header = ["category", "arm", "n", "accuracy %", "95% CI", "tokens / task", "s / task", *kinds]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for c in cells:
        cells_text = [
            c.category,
            c.arm,
            str(c.n),
            f"{100 * c.accuracy:.1f}",
            f"{100 * c.low:.1f}\u2013{100 * c.high:.1f}",
            MISSING if c.tokens_per_task is None else f"{c.tokens_per_task:,.0f}",
            MISSING if c.seconds_per_task is None else f"{c.seconds_per_task:,.1f}",
            *(str(c.failures.get(k, 0)) for k in kinds),
        ]
        lines.append("| " + " | ".join(t.replace("|", "\\|") for t in cells_text) + " |")
    return "\n".join(lines)


def plot_cells(cells: Sequence[Cell], path: str | Path) -> None:
    """Two panels as a PNG: accuracy per category, a bar per arm with its 95% interval; each
    arm's failures by kind, stacked. Needs matplotlib."""
    figure = new_figure(13, 5)
    bars, kinds_panel = figure.subplots(1, 2, width_ratios=[3, 2])
    arms = list(dict.fromkeys(c.arm for c in cells))
    _accuracy_panel(bars, cells, arms)
    _failures_panel(kinds_panel, cells, arms)
    figure.savefig(path, format="png", dpi=110)


def _accuracy_panel(bars: Any, cells: Sequence[Cell], arms: list[str]) -> None:
    """Accuracy per category, a bar per arm with its 95% interval."""
    categories = list(dict.fromkeys(c.category for c in cells))
    width = 0.8 / max(1, len(arms))
    for index, arm in enumerate(arms):
        mine = {c.category: c for c in cells if c.arm == arm}
        xs = [i + index * width for i, cat in enumerate(categories) if cat in mine]
        heights, errors = _bars([mine[cat] for cat in categories if cat in mine])
        bars.bar(xs, heights, width, yerr=errors, capsize=3, label=arm)
    bars.set_xticks([i + width * (len(arms) - 1) / 2 for i in range(len(categories))], categories)
    bars.tick_params(axis="x", labelrotation=20)
    bars.set(ylabel="accuracy % (95% CI)", title="BFCL accuracy by category", ylim=(0, 105))
    bars.legend(fontsize="small")


def _bars(chosen: list[Cell]) -> tuple[list[float], list[list[float]]]:
    """An arm's bars: each cell's accuracy, and how far its interval reaches below and above."""
    heights = [100 * c.accuracy for c in chosen]
    errors = [
        [100 * (c.accuracy - c.low) for c in chosen],
        [100 * (c.high - c.accuracy) for c in chosen],
    ]
    return heights, errors


def _failures_panel(panel: Any, cells: Sequence[Cell], arms: list[str]) -> None:
    """Each arm's failed tasks by kind, stacked."""
    bottoms = [0] * len(arms)
    panel.bar(arms, bottoms)  # every arm on the axis, failures or none
    for kind in FAILURE_KINDS:
        counts = [sum(c.failures.get(kind, 0) for c in cells if c.arm == arm) for arm in arms]
        if any(counts):
            panel.bar(arms, counts, bottom=bottoms, label=kind)
            bottoms = [b + n for b, n in zip(bottoms, counts, strict=True)]
    panel.set(ylabel="failed tasks", title="failures by kind")
    panel.tick_params(axis="x", labelrotation=20)
    if any(bottoms):
        panel.set_ylim(0, max(bottoms) * 1.05)  # the tallest stack whole, with room above it
        panel.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))


CAPTION = "accuracy by category with its 95% CI; failures by kind"
FOOTNOTE = (
    "Accuracy is the share of a category's tasks whose calls pass the leaderboard's rules (an "
    "error fails the task). The 95% CI is Wilson's score interval: the samples are small, so "
    "figures whose intervals overlap are not told apart. *tokens / task* and *s / task* are "
    "means over the tasks that ran to their end (every model call of the task, all its turns). "
    "Failures: no_call (no call where one was due), unreadable (no call, and a reply could not "
    "be read), wrong_function, wrong_argument (a parameter missing, unexpected, or of a wrong "
    "type or value), wrong_count (too many or too few calls), wrong_call (a parallel call with "
    "no match), called_irrelevant (a call where none fits), wrong_state and wrong_results "
    "(multi-turn: the APIs' state, or a result of the ground truth's calls missing), unfinished "
    "(fewer turns than the task's), error (the run raised)."
)


def write_bfcl_report(
    lines: Iterable[Mapping[str, Any]], folder: str | Path, *, model: str, notes: Sequence[str] = ()
) -> str:
    """Write ``summary.md`` and ``summary.png`` into ``folder``; return the table."""
    cells = cells_of(lines)
    table = markdown_table(cells)
    made = (
        f"Made with the model `{model}` on the Berkeley Function Calling Leaderboard's tasks "
        "(bfcl-eval 2026.3.23), scored by its rules."
    )
    page = Page("# reactgraph eval --bench bfcl", made, notes, table, FOOTNOTE)
    page.write(folder, lambda path: plot_cells(cells, path), CAPTION)
    return table
