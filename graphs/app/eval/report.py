"""The eval report: one summary row per variant from the result lines, as ``summary.md`` (a
markdown table) and ``summary.png`` (F1 against tokens per question, labelled with the cost;
status counts)."""

from __future__ import annotations

import logging
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactgraph.app.eval.score import score_answer
from reactgraph.nodes.vocabulary.endings import ENDINGS, STATUSES

logger = logging.getLogger(__name__)

MISSING = "\u2013"  # an en dash, in a cell with no figure
_COLOURS: dict[str, str] = {**{e.status: e.colour for e in ENDINGS.values()}, "errors": "#424242"}
_CAPTION = "F1 against tokens and cost; how the runs ended"
_FOOTNOTE = (
    "EM and F1 are percentages over all n questions (no answer, or an error, scores 0). *tokens* "
    "and *cost* are the variant's totals over every model call (summaries and forced answers "
    "too; cost at the runs' token_prices, \u2013 without prices); *cached %* is the share of the "
    "prompt tokens the provider read from its prefix cache (priced at token_prices' third "
    "number). Turns and tokens per question "
    "are over the runs that ended (errors excluded); *seconds* adds up each question's run "
    "time, *wall s* is the variant's wall-clock time when known."
)


@dataclass(frozen=True)
class VariantSummary:
    """One variant's figures; means are None when no run of the variant ended."""

    variant: str
    n: int
    em: float
    f1: float
    statuses: Mapping[str, int]
    errors: int
    mean_turns: float | None
    median_turns: float | None
    prompt_tokens: int
    completion_tokens: int
    prompt_per_question: float | None
    completion_per_question: float | None
    seconds: float
    wall_seconds: float | None = None
    total_tokens: int = 0
    """Prompt plus completion tokens of every run (summaries and forced answers too)."""
    cost: float | None = None
    """The runs' cost at their ``token_prices``; None when no run had prices."""
    tokens_per_question: float | None = None
    """Mean total tokens per run that ended."""
    cache_read_tokens: int = 0
    """Of the prompt tokens, those the provider read from its prefix cache."""

    @property
    def cached_share(self) -> float | None:
        """The share of the prompt tokens read from the provider's cache (None: no prompt
        tokens)."""
        return self.cache_read_tokens / self.prompt_tokens if self.prompt_tokens else None


def _scores(row: Mapping[str, Any]) -> tuple[float, float]:
    """The line's EM and F1; scored here from answer and gold when the line lacks them."""
    if isinstance(row.get("em"), int | float) and isinstance(row.get("f1"), int | float):
        return float(row["em"]), float(row["f1"])
    if not row.get("gold"):
        return 0.0, 0.0
    em, f1 = score_answer(row.get("answer"), row["gold"])
    return em, f1


def _summary(variant: str, rows: list[Mapping[str, Any]], wall: float | None) -> VariantSummary:
    ended = [row for row in rows if not row.get("error")]
    scores = [_scores(row) for row in rows]
    mean_turns, median_turns = _turns(ended)
    return VariantSummary(
        variant=variant,
        n=len(rows),
        em=statistics.fmean(em for em, _ in scores),
        f1=statistics.fmean(f1 for _, f1 in scores),
        statuses=_statuses(ended),
        errors=len(rows) - len(ended),
        mean_turns=mean_turns,
        median_turns=median_turns,
        prompt_tokens=_count(rows, "prompt_tokens"),
        completion_tokens=_count(rows, "completion_tokens"),
        prompt_per_question=_per(_count(ended, "prompt_tokens"), ended),
        completion_per_question=_per(_count(ended, "completion_tokens"), ended),
        seconds=sum(_seconds(row) for row in rows),
        wall_seconds=wall,
        total_tokens=sum(_total(row) for row in rows),
        cost=_cost(rows),
        tokens_per_question=_per(sum(map(_total, ended)), ended),
        cache_read_tokens=_count(rows, "cache_read_tokens"),
    )


def _statuses(ended: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many runs ended with each status."""
    return dict(Counter(str(row.get("status") or "unknown") for row in ended))


def _seconds(row: Mapping[str, Any]) -> float:
    """A line's run time (0 when it has none)."""
    return float(row.get("seconds") or 0.0)


def _count(rows: Sequence[Mapping[str, Any]], key: str) -> int:
    """A count summed over the lines (a line without it: 0)."""
    return sum(int(row.get(key) or 0) for row in rows)


def _per(total: float, rows: Sequence[Mapping[str, Any]]) -> float | None:
    """``total`` per line; None without lines."""
    return total / len(rows) if rows else None


def _turns(ended: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """The mean and median turns of the runs that ended (None, None: none did)."""
    turns = [int(row.get("turns") or 0) for row in ended]
    if not turns:
        return None, None
    return statistics.fmean(turns), float(statistics.median(turns))


def _cost(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """The lines' cost added up; None when no line was priced."""
    costs = [float(row["cost"]) for row in rows if isinstance(row.get("cost"), int | float)]
    return sum(costs) if costs else None


def _total(row: Mapping[str, Any]) -> int:
    """A line's total tokens (a line from before totals were written: its two counts)."""
    total = row.get("total_tokens")
    if isinstance(total, int):
        return total
    return int(row.get("prompt_tokens") or 0) + int(row.get("completion_tokens") or 0)


def summarize(
    results: Iterable[Mapping[str, Any]], wall_seconds: Mapping[str, float] | None = None
) -> list[VariantSummary]:
    """One summary per variant, in the order variants first appear. When a (variant, id) pair
    has several lines - a resumed run retried an error - the last one counts."""
    latest = last_lines(results)
    walls = wall_seconds or {}
    return [_summary(v, list(rows.values()), walls.get(v)) for v, rows in latest.items()]


def last_lines(
    results: Iterable[Mapping[str, Any]],
) -> dict[str, dict[str, Mapping[str, Any]]]:
    """Each (variant, id) pair's last result line, by variant then id: the line that counts."""
    latest: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in results:
        latest.setdefault(str(row.get("variant")), {})[str(row.get("id"))] = row
    return latest


def _columns(summaries: Sequence[VariantSummary]) -> list[str]:
    extra = sorted({s for summary in summaries for s in summary.statuses} - set(STATUSES))
    return [*STATUSES, *extra]


def _number(value: float | None, digits: int = 1) -> str:
    return MISSING if value is None else f"{value:,.{digits}f}"


def markdown_table(summaries: Sequence[VariantSummary]) -> str:
    """The summaries as a markdown table, one row per variant."""
    statuses = _columns(summaries)
    header = [
        "variant",
        "n",
        "EM %",
        "F1 %",
        "tokens",
        "cost",
        *statuses,
        "errors",
        "turns mean",
        "turns median",
        "prompt tokens",
        "cached %",
        "prompt / q",
        "completion tokens",
        "completion / q",
        "seconds",
        "wall s",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for s in summaries:
        cells = [
            s.variant,
            str(s.n),
            _number(100 * s.em),
            _number(100 * s.f1),
            f"{s.total_tokens:,}",
            MISSING if s.cost is None else f"{s.cost:,.4g}",
            *(str(s.statuses.get(status, 0)) for status in statuses),
            str(s.errors),
            _number(s.mean_turns),
            _number(s.median_turns),
            f"{s.prompt_tokens:,}",
            _number(None if s.cached_share is None else 100 * s.cached_share),
            _number(s.prompt_per_question, 0),
            f"{s.completion_tokens:,}",
            _number(s.completion_per_question, 0),
            _number(s.seconds),
            _number(s.wall_seconds),
        ]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def plotted(plot: Callable[[Path], None], out: Path, caption: str) -> str:
    """Make the folder ``out`` and draw ``summary.png`` in it with ``plot``: the markdown that
    shows it, or "" (with a warning) when matplotlib is not installed."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        plot(out / "summary.png")
    except RuntimeError as error:
        logger.warning("%s; wrote summary.md only", error)
        return ""
    return f"\n![{caption}](summary.png)\n"


def new_figure(width: float, height: float) -> Any:
    """A bare matplotlib Figure on the Agg canvas: no pyplot, so no global backend and no GUI,
    from any thread. RuntimeError when matplotlib is not installed."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise RuntimeError(
            "summary.png needs matplotlib, which is not installed (pip install matplotlib)"
        ) from None
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def plot_summary(summaries: Sequence[VariantSummary], path: str | Path) -> None:
    """Two panels as a PNG: F1 against mean tokens per question (one point per variant,
    labelled with its cost), and each variant's status counts as stacked bars. Needs
    matplotlib."""
    figure = new_figure(12, 4.8)
    cost, outcomes = figure.subplots(1, 2)
    for s in summaries:
        if s.tokens_per_question is not None:
            cost.scatter(s.tokens_per_question, 100 * s.f1, s=60)
            point = (s.tokens_per_question, 100 * s.f1)
            label = s.variant if s.cost is None else f"{s.variant} (cost {s.cost:,.4g})"
            cost.annotate(label, point, xytext=(6, 6), textcoords="offset points")
    cost.set(xlabel="mean tokens per question", ylabel="F1 %", title="F1 against tokens and cost")
    cost.set_ylim(0, 105)
    cost.margins(x=0.2)  # room for the labels of the outermost points
    cost.grid(alpha=0.3)
    names = [s.variant for s in summaries]
    bottoms = [0] * len(summaries)
    for status in [*_columns(summaries), "errors"]:
        counts = [s.errors if status == "errors" else s.statuses.get(status, 0) for s in summaries]
        if any(counts):
            outcomes.bar(names, counts, bottom=bottoms, label=status, color=_COLOURS.get(status))
            bottoms = [b + c for b, c in zip(bottoms, counts, strict=True)]
    outcomes.set(ylabel="questions", title="how the runs ended")
    outcomes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.savefig(path, format="png", dpi=120)


def write_report(
    results: Iterable[Mapping[str, Any]],
    folder: str | Path,
    *,
    model: str,
    wall_seconds: Mapping[str, float] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """Write ``summary.md`` and ``summary.png`` into ``folder`` and return the table. Without
    matplotlib the PNG is skipped with a warning; ``notes`` are extra lines for the markdown."""
    summaries = summarize(results, wall_seconds)
    table = markdown_table(summaries)
    questions = max((s.n for s in summaries), default=0)
    made = (
        f"Made with the model `{model}`: {len(summaries)} variant(s), up to {questions} "
        "question(s) each."
    )
    page = Page("# reactgraph eval", made, notes, table, _FOOTNOTE)
    page.write(folder, lambda path: plot_summary(summaries, path), _CAPTION)
    return table


@dataclass(frozen=True)
class Page:
    """A report's ``summary.md``: its title, what it was made with, the notes, the table and its
    footnote, then its figure (``summary.png``)."""

    title: str
    made: str
    notes: Sequence[str]
    table: str
    footnote: str

    def write(self, folder: str | Path, plot: Callable[[Path], None], caption: str) -> None:
        """``summary.md`` and, drawn by ``plot``, ``summary.png`` into ``folder`` (without
        matplotlib the PNG is skipped with a warning and the page says so)."""
        out = Path(folder)
        figure = plotted(plot, out, caption)
        lines = [self.title, "", self.made, *self.notes, "", self.table, "", self.footnote]
        (out / "summary.md").write_text("\n".join([*lines, figure]), encoding="utf-8")
