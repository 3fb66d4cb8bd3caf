"""What the command line shows a person: turns as they happen, results, threads, progress."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from reactgraph.nodes.vocabulary.endings import ENDINGS, budget_fields
from reactgraph.nodes.vocabulary.prompts import BUDGET_SPENT, DECIDED, NOTES_ELIDED, UPDATE_NOTES
from reactgraph.storage.records import RecordDamaged, RunRecord

if TYPE_CHECKING:
    from rich.progress import Progress

console = Console(highlight=False, soft_wrap=True)
errors = Console(stderr=True, highlight=False, soft_wrap=True)

_TONES = {"good": "green", "partial": "yellow", "bad": "red"}
STATUS_STYLE: dict[str, str] = {
    **{e.status: _TONES[e.tone] for e in ENDINGS.values()},
    "interrupted": "magenta",  # a thread's state, not how a run ended
    "damaged": "bold red",  # a thread whose checkpoint cannot be read
}


def fail(message: str) -> None:
    """A one-line error on stderr."""
    errors.print(f"[red]reactgraph: error:[/red] {escape(one_line(message))}")


def warn(message: str) -> None:
    """A one-line warning on stderr: something was skipped, the command goes on."""
    errors.print(f"[yellow]reactgraph: warning:[/yellow] {escape(one_line(message))}")


def one_line(text: str) -> str:
    """Text with its line breaks (a server's multi-line error, say) folded into spaces."""
    return " ".join(text.split())


def clip(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` characters, cut at a word boundary with an
    ellipsis (mid-word only when its first word alone is too long)."""
    text = one_line(text)
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    head = cut.rsplit(" ", 1)[0] if " " in cut else cut
    return head.rstrip(" ,.;:") + "…"


def shown_text(turn: dict[str, Any]) -> str:
    """What a turn said, for a person: an ``update_notes`` the model's view elides shows the
    notes' first line and their length instead of the placeholder."""
    text = turn["text"]
    if turn.get("action") != UPDATE_NOTES or NOTES_ELIDED not in text:
        return text
    notes = turn.get("action_input") or ""
    first = clip(notes.strip().splitlines()[0] if notes.strip() else "", 60)
    return text.replace(NOTES_ELIDED, f"{first} … ({len(notes)} characters)")


def _append_actions(text: Text, several: list[dict[str, Any]], calls: list[Any]) -> None:
    """A turn of several calls (``parallel_tool_calls``): each Action (of native tool calls)
    and each person's decision on one."""
    for record in several:
        if calls:
            text.append("Action:", style="cyan")
            name = record["action"] or "(not run)"
            text.append(f" {name}[{clip(record['action_input'] or '', 200)}]\n")
        if record.get("approval") is not None:
            text.append(approval_text(record, record["approval"]) + "\n", style="yellow")


def _append_tool_call(text: Text, turn: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    """A turn's native tool call, as an Action line; the calls past the first are not run."""
    first = calls[0]
    shown = turn["action_input"] if turn.get("action") else json.dumps(first["args"])
    text.append("Action:", style="cyan")
    text.append(f" {turn.get('action') or first['name']}[{clip(shown or '', 200)}]")
    more = f" (+{len(calls) - 1} more tool calls, not run)" if len(calls) > 1 else ""
    text.append(more + "\n", style="dim")


def turn_text(turn: dict[str, Any]) -> Text:
    """A turn as a person reads it: a rule with its number, the model's text, the Observation,
    the figures. Built as styled text, not markup, so a long run prints quickly."""
    model = f", {turn['model']}" if turn.get("model") else ""  # a run with a model ladder
    title = f"── turn {turn['turn']} ({turn['kind']}{model}) "
    text = Text(title + "─" * max(3, console.width - len(title)) + "\n", style="dim")
    text.append(shown_text(turn) + "\n")
    calls = turn.get("tool_calls") or []
    several = turn.get("actions")
    if several:  # a turn of several calls (parallel_tool_calls): each, and each Observation
        _append_actions(text, several, calls)
        text.append(f"{turn['observation']}\n")
    elif calls:  # a native tool call: its text is only the Thought
        _append_tool_call(text, turn, calls)
    approval = turn.get("approval")
    if approval is not None:
        text.append(approval_text(turn, approval) + "\n", style="yellow")
    if turn["observation"] is not None and not several:
        text.append("Observation:", style="cyan")
        text.append(f" {turn['observation']}\n")
    latency = turn["tool_latency_s"]
    tool = "" if latency is None else f", tool {latency * 1000:.1f} ms"
    text.append(
        f"model {turn['model_latency_s'] * 1000:.1f} ms{tool}, tokens "
        f"{turn['prompt_tokens']} prompt + {turn['completion_tokens']} completion "
        f"({turn['token_source']})",
        style="dim",
    )
    return text


def approval_text(turn: dict[str, Any], approval: dict[str, Any]) -> str:
    """A person's decision on the turn's Action, in one line."""
    line = f"{DECIDED[approval['decision']].capitalize()} by {approval['by']}"
    if approval["decision"] == "edit":
        line += (
            f": ran {turn['action']}[{turn['action_input']}] instead of "
            f"{approval.get('proposed_action')}[{approval.get('proposed_input')}]"
        )
    elif approval["decision"] == "reject" and approval.get("message"):
        line += f": {approval['message']}"
    return one_line(line)


def print_turn(turn: dict[str, Any]) -> None:
    """One turn, as it happens."""
    console.print(turn_text(turn))


def turns_in(updates: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The turn records in a stream of ``stream_mode="updates"`` chunks, as they arrive."""
    for update in updates:
        for change in update.values():
            if not isinstance(change, dict):
                continue  # the run stopped for approval: {"__interrupt__": (Interrupt, ...)}
            turns = change.get("turns")
            # start_run's reset of the transcript arrives as an Overwrite, not a list.
            yield from turns if isinstance(turns, list) else []


def print_result(values: dict[str, Any]) -> None:
    """The end of a run: answer and status (and the notes or summary, when there are any); a
    typed answer (``structured_answer``) as its JSON."""
    status = values.get("status") or "interrupted"
    style = STATUS_STYLE.get(status, "white")
    if values.get("notes"):
        console.print(f"\n[bold]Notes[/bold]\n{escape(values['notes'])}")
    if values.get("summary"):
        console.print(f"\n[bold]Latest summary[/bold]\n{escape(values['summary'])}")
    # The run's totals, then how it ended: the last line stays the status.
    console.print()
    usage = usage_text(values)
    if usage:
        console.print(f"[bold]Usage:[/bold] {escape(usage)}")
    budget = values.get("budget")
    if budget:
        console.print(f"[bold]Budget:[/bold] {escape(budget_text(budget))}")
    moved = ladder_text(values)
    if moved:
        console.print(f"[bold]Ladder:[/bold] {escape(moved)}")
    structured = values.get("structured_answer")
    if structured is not None:  # a typed answer: its JSON, on one line
        shown = json.dumps(structured, ensure_ascii=False)
        console.print(f"[bold]Answer (JSON):[/bold] {escape(shown)}")
    else:
        console.print(f"[bold]Answer:[/bold] {escape(str(values.get('answer')))}")
    console.print(f"[bold]Status:[/bold] [{style}]{status}[/{style}]")


def _figure(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.6g}"


def _cached(usage: dict[str, Any]) -> str:
    """The cached share of a run's prompt tokens, in words: `` (800 cached, 80%)``; "" when
    none were cached."""
    cached, prompt = usage.get("cache_read_tokens") or 0, usage.get("prompt_tokens") or 0
    if not cached or not prompt:
        return ""
    return f" ({_figure(cached)} cached, {cached / prompt:.0%})"


def usage_text(values: dict[str, Any]) -> str | None:
    """A run's totals in one line (``out["usage"]``), or None for a run before they were
    counted."""
    usage = values.get("usage")
    if not usage:
        return None
    cost = "no prices" if usage.get("cost") is None else _figure(usage["cost"])
    calls = ", ".join(f"{name} {n}" for name, n in (usage.get("tool_calls") or {}).items())
    return (
        f"{_figure(usage['prompt_tokens'])} prompt{_cached(usage)} + "
        f"{_figure(usage['completion_tokens'])} "
        f"completion = {_figure(usage['total_tokens'])} tokens, cost {cost}, "
        f"{usage['seconds']:.2f} s, tool calls: {calls or 'none'}"
    )


def ladder_text(values: dict[str, Any]) -> str | None:
    """Where a run moved up its model ladder (``escalations``), with each model's tokens
    (``usage["by_model"]``); None for a run that did not move."""
    moves = values.get("escalations") or []
    if not moves:
        return None
    steps = "; ".join(
        f"after turn {m['turn']} {m['from_model']} -> {m['to_model']} ({m['reason']})"
        for m in moves
    )
    split = (values.get("usage") or {}).get("by_model") or {}
    spent = ", ".join(
        f"{name} {_figure(e['prompt_tokens'] + e['completion_tokens'])} tokens in {e['calls']} "
        f"call(s)"
        for name, e in split.items()
    )
    return f"{steps}{'; ' + spent if spent else ''}"


def budget_text(budget: dict[str, Any]) -> str:
    """Which budget ended the run, its limit and what was spent, as the chat says it."""
    return f"{BUDGET_SPENT.format(**budget_fields(budget))}, after {budget['turn']} turn(s)"


def print_run(record: RunRecord, status: str, values: dict[str, Any]) -> None:
    """``reactgraph show``: everything a finished or interrupted run left behind."""
    console.print(
        f"[bold]Thread[/bold] {escape(record.thread_id)} ({record.variant}, "
        f"model {escape(record.model)})"
    )
    console.print(f"[bold]Question:[/bold] {escape(record.question)}")
    turns = values.get("turns") or []
    # A thousand turns are one print, not four thousand.
    for start in range(0, len(turns), 200):
        console.print(Text("\n").join(turn_text(turn) for turn in turns[start : start + 200]))
    for compaction in values.get("compactions") or []:
        console.print(
            f"[dim]compaction after turn {compaction['turn']}: "
            f"{compaction['tokens_before']} -> {compaction['tokens_after']} tokens[/dim]"
        )
    print_result({**values, "status": values.get("status") or status})
    console.print(
        f"[dim]{len(turns)} turns, "
        f"{sum(t['prompt_tokens'] for t in turns)} prompt + "
        f"{sum(t['completion_tokens'] for t in turns)} completion tokens[/dim]"
    )
    parent = (values.get("trace") or {}).get("traceparent")
    if isinstance(parent, str) and parent.count("-") == 3:  # a traced run (docs/tracing.md)
        console.print(f"[dim]trace {escape(parent.split('-')[1])}[/dim]")


_GAP = 2  # between two columns of the threads listing
_QUESTION_MIN = 12  # the narrowest question column worth showing in a row


_ThreadCells = tuple[str, str, str, str, Any]
"""One row of ``threads``' listing: thread id, variant, status, turns, and its record."""


def print_threads(
    rows: list[tuple[RunRecord | RecordDamaged, str, int | None]], header: bool = True
) -> None:
    """``reactgraph threads``: one row per run in the database (turns ``?`` when unknown; a
    damaged record's variant and question too, where unreadable). The listing comes a page at
    a time: each page after the first is printed without a header.

    A thread id (what ``show`` and ``resume`` are given) and a status are never cut, whatever
    the terminal's width: the question is cut to what they leave, at a word; the variant
    column goes when the question would have less than it needs; and where even the ids and
    statuses leave no room, each thread takes two lines, its id alone on the first."""
    if not rows:
        console.print("[dim]no threads in this database[/dim]")
        return
    cells = [
        (record.thread_id, record.variant, status, "?" if turns is None else str(turns), record)
        for record, status, turns in rows
    ]
    wide = _column_widths(cells)
    columns = terminal_width()
    fixed = wide["thread"] + wide["status"] + wide["turns"] + 3 * _GAP
    room = columns - fixed
    with_variant = room - wide["variant"] - _GAP >= max(_QUESTION_MIN, 20)
    if with_variant:
        room -= wide["variant"] + _GAP
    if room < _QUESTION_MIN:
        _print_stacked(cells, header, columns)
        return
    width = min(70, room)
    names = ["thread", *(["variant"] if with_variant else []), "status", "turns"]
    if header:
        heads = "  ".join(name.ljust(wide[name]) for name in names)
        console.print(f"[bold]{heads}  question[/bold]", crop=False)
    # Styled text, not markup, and one print a page: a thousand rows print quickly.
    lines = [_thread_line(cell, wide, with_variant, width) for cell in cells]
    console.print(Text("\n").join(lines), crop=False)


def _column_widths(cells: list[_ThreadCells]) -> dict[str, int]:
    """Each column of ``threads``' listing (all but the question): as wide as its longest
    cell, or its name."""
    columns_text = {
        "thread": [row[0] for row in cells],
        "variant": [row[1] for row in cells],
        "status": [row[2] for row in cells],
        "turns": [row[3] for row in cells],
    }
    return {name: max(len(name), *map(len, texts)) for name, texts in columns_text.items()}


def _thread_line(cell: _ThreadCells, wide: dict[str, int], with_variant: bool, width: int) -> Text:
    """One thread's row in ``threads``' listing, its question cut to ``width``."""
    thread_id, variant, status, turns, record = cell
    line = Text(thread_id.ljust(wide["thread"]) + "  ")
    if with_variant:
        line.append(variant.ljust(wide["variant"]) + "  ")
    line.append(status.ljust(wide["status"]), style=STATUS_STYLE.get(status, "white"))
    line.append(f"  {turns.ljust(wide['turns'])}  {clip(record.question, width)}")
    return line


def terminal_width() -> int:
    """The terminal's width in columns: ``COLUMNS`` when set, else the terminal's own, else
    what rich assumes (80 when the output is no terminal)."""
    return shutil.get_terminal_size(fallback=(console.width, 24)).columns


def _print_stacked(cells: list[_ThreadCells], header: bool, columns: int) -> None:
    """The threads listing for a terminal too narrow for a row: each thread's id on a line of
    its own (never cut: a terminal wraps it), then its status and turns, with its variant and
    question as far as the width allows (the variant goes first, then the question)."""
    if header:
        console.print("[bold]thread[/bold]\n  [bold]status  turns  variant  question[/bold]")
    for thread_id, variant, status, turns, record in cells:
        style = STATUS_STYLE.get(status, "white")
        console.print(escape(thread_id), overflow="ignore", crop=False)
        extra = ""
        room = columns - len(f"  {status}  {turns}") - _GAP
        if room - len(variant) - _GAP >= _QUESTION_MIN:
            extra, room = f"  {variant}", room - len(variant) - _GAP
        if room >= _QUESTION_MIN:
            extra += f"  {clip(record.question, room)}"
        console.print(f"  [{style}]{status}[/{style}]  {turns}{escape(extra)}")


def configure_logging(verbose: bool) -> None:
    """Warnings (every step with ``verbose``) on stderr, one line each."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])
    # psycopg warns while closing a connection the server dropped; the error line says it all.
    logging.getLogger("psycopg").setLevel(logging.INFO if verbose else logging.ERROR)


def progress(flight: Any = None) -> Progress:
    """The batch command's progress bar: done of all, and with the engine's ``flight`` the runs
    in flight and failed. rich's progress module is loaded here, not by the reading commands."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from reactgraph.app.flightcolumn import FlightColumn

    columns: list[Any] = [
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
    ]
    if flight is not None:
        columns.append(FlightColumn(flight))
    return Progress(*columns, TimeElapsedColumn(), console=console)
