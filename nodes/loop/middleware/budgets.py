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

Time bounds model calls too (the node's ``Scope.deadline``): a call's deadline is at most the
time left, and no retry or backoff starts that would end past it. A call so cut
(``RunOutOfTime``) ends the run ``budget_exhausted`` on ``max_run_seconds`` (``EndRun``), its
prompt counted when it was abandoned in flight.
The record of a model call before it is sent, which a kill cannot hide, is ``sending``'s.
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Collection, Mapping
from typing import Any

from reactgraph.nodes.calling.providers import RunOutOfTime, timed_out
from reactgraph.nodes.calling.tokens import read_cached
from reactgraph.nodes.loop.middleware.scope import EndRun, Ledger, Scope, cost_of, refused_call
from reactgraph.nodes.loop.middleware.seam import Middleware
from reactgraph.nodes.loop.middleware.sending import failed, sending
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.endings import budget_fields, figure
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.nodes.vocabulary.state import BudgetRecord, RunUsage
from reactgraph.nodes.vocabulary.turns import new_turn

logger = logging.getLogger(__name__)

WARN_SHARE = 0.8
"""The share of a budget after which the next Observation says how much is spent."""
STATUS = "budget_exhausted"
BUDGETS = ("max_run_tokens", "max_run_cost", "max_run_seconds")
"""The budgets that end a run, in the order they are looked at."""
_BUDGETS_OF = operator.attrgetter(*BUDGETS)
LIMIT_PREFIX = "tool_call_limits."
"""A tool's limit's name in ``budget_warned``: ``tool_call_limits.search``."""


def fresh_usage(settings: RunSettings | None = None) -> RunUsage:
    """Nothing spent yet (a cost of 0.0 when the run has prices, else None)."""
    priced = settings is not None and settings.token_prices is not None
    usage = RunUsage(
        prompt_tokens=0,
        completion_tokens=0,
        total_tokens=0,
        cache_read_tokens=0,
        cost=0.0 if priced else None,
        seconds=0.0,
        tool_calls={},
    )
    if settings is not None and settings.escalate_to:
        usage["by_model"] = {}  # a model ladder: the spend split by model
    return usage


def usage_of(state: Mapping[str, Any]) -> RunUsage:
    """The run's spend so far (nothing, for a state from before budgets were counted)."""
    usage = state.get("usage")
    return RunUsage(**usage) if usage else fresh_usage()  # type: ignore[typeddict-item]


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
            spent=figure(round(spent, 1) if budget == "max_run_seconds" else spent),
            limit=figure(limit),
            unit=unit,
        )
    for tool, limit in settings.tool_call_limits.items():
        name, calls = LIMIT_PREFIX + tool, usage["tool_calls"].get(tool, 0)
        if name in warned or calls == 0 or calls < WARN_SHARE * limit:
            continue
        due[name] = prompts.TOOL_LIMIT_WARNING.format(name=tool, spent=calls, limit=limit)
    return due


def chat_warnings(
    state: Mapping[str, Any], update: Mapping[str, Any], settings: RunSettings
) -> list[str]:
    """The warnings a node's update (after ``account``) gave, as the chat shows them on their
    own: the model reads them at the end of an Observation, which chat clients fold away."""
    given = update.get("budget_warned")
    if not isinstance(given, list):
        return []
    before = set(state.get("budget_warned") or [])
    usage = update.get("usage") or usage_of(state)
    notes = []
    for name in (name for name in given if name not in before):
        if name.startswith(LIMIT_PREFIX):
            tool = name.removeprefix(LIMIT_PREFIX)
            limit = settings.tool_call_limits.get(tool)
            calls = usage["tool_calls"].get(tool, 0)
            notes.append(
                prompts.CHAT_TOOL_LIMIT_WARNING.format(name=tool, spent=calls, limit=limit)
            )
            continue
        spent, limit = spent_of(usage, name), getattr(settings, name, None)
        if spent is not None and limit is not None:
            record = {"budget": name, "spent": spent, "limit": limit}
            notes.append(prompts.CHAT_BUDGET_WARNING.format(**budget_fields(record)))
    return notes


def _added(usage: RunUsage, ledger: Ledger) -> RunUsage:
    """The spend with what a node's run added: every model call it made (a middleware's
    retries, fallbacks and own calls, the summaries), every tool call that started."""
    total = RunUsage(**usage)
    total.setdefault("cache_read_tokens", 0)
    if not ledger.model_calls and not ledger.tool_calls:  # a node that called nothing
        return total
    total["tool_calls"] = dict(usage["tool_calls"])
    total["prompt_tokens"] += ledger.prompt_tokens
    total["completion_tokens"] += ledger.completion_tokens
    total["cache_read_tokens"] += ledger.cache_read_tokens
    total["total_tokens"] = total["prompt_tokens"] + total["completion_tokens"]
    for name, calls in ledger.tool_calls.items():
        total["tool_calls"][name] = total["tool_calls"].get(name, 0) + calls
    if "by_model" in usage:
        total["by_model"] = ledger.split(usage["by_model"])
    return total


def account(
    state: Mapping[str, Any],
    update: dict[str, Any],
    seconds: float,
    settings: RunSettings,
    ledger: Ledger,
) -> dict[str, Any]:
    """A node's update with the run's spend in it (``usage``), and what the spend decides: the
    run ends ``budget_exhausted`` (with ``budget``, its record) once a budget is reached and
    the node has not ended it otherwise; the update's Observation gets the warnings due.
    ``ledger``: what the node's calls spent."""
    start = update.get("usage")  # a new run's (start_run): nothing spent before it
    before = start if start is not None else state.get("usage") or fresh_usage()
    usage = _spent(before, seconds, settings, ledger)  # a copy: ``before`` is left as it is
    out = {**update, "usage": usage}
    if update.get("status") or state.get("status") or start is not None:
        return out
    if not _limited(settings):  # no budget and no tool's limit: nothing to decide
        return out
    turns = len(state.get("turns") or []) + (
        len(update["turns"]) if isinstance(update.get("turns"), list) else 0
    )
    record = reached(usage, settings, turns)
    if record is not None:
        return _ended(out, state, update, record)
    return _warned(out, state, update, settings)


def _limited(settings: RunSettings) -> bool:
    """Whether the run has a budget or a tool's call limit (the budgets read in C)."""
    return bool(settings.tool_call_limits) or _BUDGETS_OF(settings).count(None) < len(BUDGETS)


def _spent(before: RunUsage, seconds: float, settings: RunSettings, ledger: Ledger) -> RunUsage:
    """The run's spend (``usage``) after a node: ``before`` plus what its calls spent and the
    ``seconds`` it took, its cost at the run's prices (by a model ladder's rung, call by call)."""
    usage = _added(before, ledger)
    usage["seconds"] = round(usage["seconds"] + seconds, 6)
    if "by_model" not in usage:
        usage["cost"] = cost_of(
            usage["prompt_tokens"],
            usage["completion_tokens"],
            settings.token_prices,
            usage.get("cache_read_tokens", 0),
        )
    elif ledger.cost is not None:
        # A model ladder: each call at the prices of its rung, so the cost adds up call by call.
        usage["cost"] = (usage["cost"] or 0.0) + ledger.cost
    return usage


def _ended(
    out: dict[str, Any], state: Mapping[str, Any], update: dict[str, Any], record: BudgetRecord
) -> dict[str, Any]:
    """``out`` ending the run ``budget_exhausted`` (``record``: the budget reached); a reply read
    by the node is kept as its turn, nothing it asked for runs."""
    logger.warning(
        "run budget %s reached: %s spent of %s; the run stops",
        record["budget"],
        figure(record["spent"]),
        figure(record["limit"]),
    )
    out.update(status=STATUS, budget=record)
    parsed, reply = update.get("parsed"), state.get("reply")
    if parsed is not None and reply is not None and "turns" not in update:
        # Spent while the reply was read: the reply is kept as its turn, nothing it asked
        # for runs (as when the call itself spent the budget).
        out["turns"] = [new_turn(state, parsed["kind"], reply=reply, parsed=parsed)]  # type: ignore[arg-type]
    return out


def _warned(
    out: dict[str, Any], state: Mapping[str, Any], update: dict[str, Any], settings: RunSettings
) -> dict[str, Any]:
    """``out`` with the budget warnings due (each once a run) added to the Observation of the
    turn the node added, if it has one."""
    added = update.get("turns")
    if not isinstance(added, list) or not added or added[-1]["observation"] is None:
        return out
    last = added[-1]
    warned = list(state.get("budget_warned") or [])
    due = warnings_due(out["usage"], settings, warned)
    if due:
        told = {**last, "observation": last["observation"] + "".join(due.values())}
        out["turns"] = [*added[:-1], told]
        out["budget_warned"] = [*warned, *due]
        logger.info("budget warning given: %s", ", ".join(due))
    return out


def _split(scope: Scope) -> tuple[str | None, tuple[float, ...] | None]:
    """The model a call goes to, as a middleware named it (the spend split by it), and the
    prices in force for it."""
    return scope.calling, scope.settings.token_prices


def over_time(state: Mapping[str, Any], scope: Scope) -> BudgetRecord:
    """The record of a run whose time budget ran out during a node (a model call's)."""
    settings = scope.settings
    limit = float(settings.max_run_seconds or 0)
    spent = usage_of(state)["seconds"] + (time.monotonic() - scope.started)
    turns = len(state.get("turns") or [])
    return BudgetRecord(budget="max_run_seconds", limit=limit, spent=round(spent, 6), turn=turns)


class Budgets(Middleware):
    """The run budgets as middleware: a new run spends from nothing (``before_agent``); each
    node's model and tool calls land in its ledger, each actual call (a middleware's retry, a
    fallback's, a selector's own) counted; a call of a tool past its limit does not run; no
    model or tool call outlives the run's time budget; and each node's update is settled
    (``account``: the spend, the stop, the 80% warnings)."""

    def __init__(self, tools: Collection[str]) -> None:
        self.tools = frozenset(tools)

    def before_agent(self, state: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
        return {"usage": fresh_usage(scope.settings), "budget": None, "budget_warned": []}

    def node_entered(self, scope: Scope) -> None:
        left = remaining_seconds(scope.state, scope.settings)
        if left is not None:
            scope.deadline = scope.started + left

    def refuses(self, after: Mapping[str, Any], settings: RunSettings) -> bool:
        parsed = after.get("parsed") or {}
        return over_limit(after, settings, str(parsed.get("action"))) is not None

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        """Each actual call: none past the run's time; recorded before it is sent (``sending``:
        the calls an earlier attempt of this step sent and a kill hid are counted with it, at
        its prompt's tokens); counted when it answers, or when it was abandoned in flight (a
        call its server answered with an error is billed nothing: marked, never counted)."""
        left = scope.time_left()
        if left is not None and left <= 0:  # a middleware's retry after the time ran out
            raise EndRun({"status": STATUS, "budget": over_time(scope.state, scope)})
        sent, lost = yield from sending(scope.config)

        def prompt() -> list[Any]:  # the messages sent, made only when they must be counted
            return [m for m in (request.system_message, *request.messages) if m is not None]

        def retried(attempt: int, error: BaseException, delay: float) -> None:
            if timed_out(error):  # a try the caller gave up on in flight, then tried again
                scope.ledger.model_call(scope.deps.token_counter(prompt()), 0, 0, *_split(scope))

        scope.on_retry.append(retried)
        try:
            response = yield from call(request)
        except EndRun:
            raise
        except RunOutOfTime as spent:
            abandoned = int(spent.abandoned) + lost
            scope.ledger.model_call(
                abandoned * scope.deps.token_counter(prompt()), 0, 0, *_split(scope)
            )
            raise EndRun({"status": STATUS, "budget": over_time(scope.state, scope)}) from None
        except Exception as error:
            if timed_out(error) or timed_out(error.__cause__ or error):  # given up in flight
                scope.ledger.model_call(scope.deps.token_counter(prompt()), 0, 0, *_split(scope))
            else:
                yield from failed(sent)
            raise
        finally:
            scope.on_retry.remove(retried)
        message = response.result[-1] if response.result else None
        prompt_tokens, completion, source = scope.tokens(prompt, message, request.model)
        cached = read_cached(message, prompt_tokens) if source == "usage" else 0
        if lost:
            logger.warning(
                "%d earlier sending(s) of this call got no reply this run saw (the process was "
                "killed): counted at %d prompt tokens each",
                lost,
                prompt_tokens,
            )
            scope.lost(message, lost, prompt_tokens)
        scope.ledger.model_call(prompt_tokens * (1 + lost), completion, cached, *_split(scope))
        return response

    def wrap_tool_call(self, request: Any, call: Any, scope: Scope) -> Any:
        name = str(request.tool_call.get("name"))
        limit = scope.settings.tool_call_limits.get(name)
        if limit is not None:
            calls = usage_of(scope.state)["tool_calls"].get(name, 0)
            if calls + scope.ledger.tool_calls.get(name, 0) >= limit:
                logger.info("%s not run: its limit of %d call(s) is reached", name, limit)
                text = prompts.TOOL_LIMIT_REACHED.format(name=name, limit=limit)
                return refused_call(request, text)
        if name in self.tools:
            scope.ledger.tool_call(name)
        return (yield from call(request))

    def settle(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        settled = account(state, update, scope.seconds, scope.settings, scope.ledger)
        scope.chat_notes.extend(chat_warnings(state, settled, scope.settings))
        return settled
