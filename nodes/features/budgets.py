"""Run budgets: what one run has spent (tokens, cost, seconds, tool calls), and the decisions
its budgets make (``max_run_tokens``, ``max_run_cost``, ``max_run_seconds``,
``tool_call_limits``).

The spend is counted once per node, after its body (``account``, which the assembly's node shell
applies to every node's update, as it does the chat view): a model reply's tokens (the agent's,
the forced answer's), a compaction's summary tokens, the tool calls that ran, and the body's wall
time (a node stopped for a person's approval has no update, so the wait is not counted). It is
kept in the state (``usage``), so every checkpoint holds it and a resumed run goes on counting;
only a new run on the thread starts again from nothing.

Once a budget is reached (spent >= limit) the run ends ``budget_exhausted`` right there: the
routers end the run on a status, so no further model call or tool runs. Once 80% of any budget
(a tool's limit too) is spent, the next Observation says so, once per budget. A tool past its
limit does not run (``over_limit``): its Observation says which tool and its limit.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from reactgraph.nodes.loop import prompts
from reactgraph.nodes.loop.run_settings import RunSettings
from reactgraph.nodes.loop.state import BudgetRecord, RunUsage
from reactgraph.nodes.loop.transcript import new_turn

logger = logging.getLogger(__name__)

WARN_SHARE = 0.8
"""The share of a budget after which the next Observation says how much is spent."""
STATUS = "budget_exhausted"
BUDGETS = ("max_run_tokens", "max_run_cost", "max_run_seconds")
"""The budgets that end a run, in the order they are looked at."""
LIMIT_PREFIX = "tool_call_limits."
"""A tool's limit's name in ``budget_warned``: ``tool_call_limits.search``."""


def fresh_usage(settings: RunSettings | None = None) -> RunUsage:
    """Nothing spent yet (a cost of 0.0 when the run has prices, else None)."""
    priced = settings is not None and settings.token_prices is not None
    return RunUsage(
        prompt_tokens=0,
        completion_tokens=0,
        total_tokens=0,
        cost=0.0 if priced else None,
        seconds=0.0,
        tool_calls={},
    )


def usage_of(state: Mapping[str, Any]) -> RunUsage:
    """The run's spend so far (nothing, for a state from before budgets were counted)."""
    usage = state.get("usage")
    return RunUsage(**usage) if usage else fresh_usage()  # type: ignore[typeddict-item]


def cost_of(prompt: int, completion: int, prices: tuple[float, float] | None) -> float | None:
    """The cost of tokens at prices per million prompt and completion tokens; None without."""
    if prices is None:
        return None
    return (prompt * prices[0] + completion * prices[1]) / 1_000_000


def check_budgets(settings: RunSettings, tools: Collection[str]) -> None:
    """ValueError for budgets that cannot work: a cost budget without prices; a limit on a tool
    the graph does not have (a typo would otherwise leave that tool unlimited)."""
    if settings.max_run_cost is not None and settings.token_prices is None:
        raise ValueError(
            "max_run_cost needs token_prices=(input, output): the prices of a million prompt "
            "and completion tokens"
        )
    unknown = [name for name in settings.tool_call_limits if name not in tools]
    if unknown:
        raise ValueError(
            f"tool_call_limits names {', '.join(map(repr, unknown))}, which the graph has no "
            f"tool of; its tools are: {', '.join(tools) or 'none'}"
        )


def spent_of(usage: RunUsage, budget: str) -> float | None:
    """What the run has spent of a budget (None: it cannot be counted, a cost without prices)."""
    if budget == "max_run_tokens":
        return usage["total_tokens"]
    if budget == "max_run_cost":
        return usage["cost"]
    return usage["seconds"]


def reached(usage: RunUsage, settings: RunSettings, turns: int) -> BudgetRecord | None:
    """The first budget the spend has reached, with what was spent; None while all last."""
    for budget in BUDGETS:
        limit = getattr(settings, budget)
        spent = spent_of(usage, budget)
        if limit is not None and spent is not None and spent >= limit:
            return BudgetRecord(budget=budget, limit=limit, spent=spent, turn=turns)
    return None


def remaining_seconds(state: Mapping[str, Any], settings: RunSettings) -> float | None:
    """Seconds left of ``max_run_seconds`` (None: no time budget)."""
    if settings.max_run_seconds is None:
        return None
    return settings.max_run_seconds - usage_of(state)["seconds"]


def over_limit(state: Mapping[str, Any], settings: RunSettings, tool: str) -> int | None:
    """The tool's limit when its calls have reached it (its next call must not run), else None."""
    limit = settings.tool_call_limits.get(tool)
    if limit is None or usage_of(state)["tool_calls"].get(tool, 0) < limit:
        return None
    return limit


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.4g}"


def warnings_due(usage: RunUsage, settings: RunSettings, warned: Collection[str]) -> dict[str, str]:
    """The warnings not yet given for budgets at 80% or more: name -> the text an Observation
    gets."""
    due: dict[str, str] = {}
    for budget in BUDGETS:
        limit = getattr(settings, budget)
        spent = spent_of(usage, budget)
        if limit is None or spent is None or budget in warned or spent < WARN_SHARE * limit:
            continue
        unit = prompts.BUDGET_UNITS[budget]
        due[budget] = prompts.BUDGET_WARNING.format(
            spent=_number(round(spent, 1) if budget == "max_run_seconds" else spent),
            limit=_number(limit),
            unit=unit,
        )
    for tool, limit in settings.tool_call_limits.items():
        name, calls = LIMIT_PREFIX + tool, usage["tool_calls"].get(tool, 0)
        if name in warned or calls == 0 or calls < WARN_SHARE * limit:
            continue
        due[name] = prompts.TOOL_LIMIT_WARNING.format(name=tool, spent=calls, limit=limit)
    return due


def _added(usage: RunUsage, update: Mapping[str, Any], tools: Collection[str]) -> RunUsage:
    """The spend with what a node's update adds: its model reply's tokens, its summaries',
    its tool calls that ran."""
    total = RunUsage(**usage)
    total["tool_calls"] = dict(usage["tool_calls"])
    calls = [update["reply"]] if update.get("reply") else []
    compactions = update.get("compactions")
    calls += (
        [c for c in compactions if c.get("prompt_tokens")] if isinstance(compactions, list) else []
    )
    for call in calls:
        total["prompt_tokens"] += int(call["prompt_tokens"])
        total["completion_tokens"] += int(call["completion_tokens"])
    total["total_tokens"] = total["prompt_tokens"] + total["completion_tokens"]
    turns = update.get("turns")
    for turn in turns if isinstance(turns, list) else []:
        if turn["kind"] == "action" and turn["tool_latency_s"] is not None:
            name = turn["action"]
            if name in tools:
                total["tool_calls"][name] = total["tool_calls"].get(name, 0) + 1
    return total


def account(
    state: Mapping[str, Any],
    update: dict[str, Any],
    seconds: float,
    settings: RunSettings,
    tools: Collection[str],
) -> dict[str, Any]:
    """A node's update with the run's spend in it (``usage``), and what the spend decides: the
    run ends ``budget_exhausted`` (with ``budget``, its record) once a budget is reached and
    the node has not ended it otherwise; the update's Observation gets the warnings due."""
    start = update.get("usage")  # a new run's (start_run): nothing spent before it
    usage = _added(start if start is not None else usage_of(state), update, tools)
    usage["seconds"] = round(usage["seconds"] + seconds, 6)
    usage["cost"] = cost_of(
        usage["prompt_tokens"], usage["completion_tokens"], settings.token_prices
    )
    out = {**update, "usage": usage}
    if update.get("status") or state.get("status") or start is not None:
        return out
    turns = len(state.get("turns") or []) + (
        len(update["turns"]) if isinstance(update.get("turns"), list) else 0
    )
    record = reached(usage, settings, turns)
    if record is not None:
        logger.warning(
            "run budget %s reached: %s spent of %s; the run stops",
            record["budget"],
            _number(record["spent"]),
            _number(record["limit"]),
        )
        out.update(status=STATUS, budget=record)
        parsed, reply = update.get("parsed"), state.get("reply")
        if parsed is not None and reply is not None and "turns" not in update:
            # Spent while the reply was read: the reply is kept as its turn, nothing it asked
            # for runs (as when the call itself spent the budget).
            out["turns"] = [new_turn(state, parsed["kind"], reply=reply, parsed=parsed)]  # type: ignore[arg-type]
        return out
    added = update.get("turns")
    if not isinstance(added, list) or not added or added[-1]["observation"] is None:
        return out
    last = added[-1]
    warned = list(state.get("budget_warned") or [])
    due = warnings_due(usage, settings, warned)
    if due:
        told = {**last, "observation": last["observation"] + "".join(due.values())}
        out["turns"] = [*added[:-1], told]
        out["budget_warned"] = [*warned, *due]
        logger.info("budget warning given: %s", ", ".join(due))
    return out
