"""The compaction variant's node: when the prompt nears the context window, summarize the
history and go on in a fresh window (question, summary, last turns verbatim)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END

from reactgraph.nodes import control, prompts
from reactgraph.nodes.deps import Deps, TokenCounterFn
from reactgraph.nodes.state import CompactionRecord, State, Turn
from reactgraph.nodes.tokens import message_text
from reactgraph.nodes.tooling import truncate
from reactgraph.nodes.transcript import render_prompt, visible_turns

logger = logging.getLogger(__name__)

SUMMARY_MAX_WORDS = 400
SUMMARY_MAX_CHARS = 4000
FALLBACK_WINDOW = 128_000
# Context windows of common models, matched by the longest prefix of the model's name.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2": 1_048_576,
    "llama-3": 128_000,
    "llama3": 128_000,
    "mistral-large": 128_000,
    "qwen2.5": 32_768,
    "deepseek": 128_000,
}


def context_window_for(model_name: str | None) -> int:
    """The known context window of a model, or 128,000 with a warning."""
    name = (model_name or "").lower().split("/")[-1]
    matches = [prefix for prefix in CONTEXT_WINDOWS if name.startswith(prefix)]
    if matches:
        return CONTEXT_WINDOWS[max(matches, key=len)]
    logger.warning(
        "context window of model %r unknown; assuming %d tokens (pass context_window=)",
        model_name,
        FALLBACK_WINDOW,
    )
    return FALLBACK_WINDOW


@dataclass(frozen=True)
class Compactor:
    """What compaction needs besides the core deps: the counter and the summarizer."""

    counter: TokenCounterFn
    summarizer: BaseChatModel


def _as_text(turns: list[Turn]) -> str:
    parts = []
    for turn in turns:
        if turn["observation"] is None:
            parts.append(turn["text"])
        else:
            parts.append(
                prompts.TRANSCRIPT_TURN.format(text=turn["text"], observation=turn["observation"])
            )
    return "\n\n".join(parts) or prompts.SUMMARY_NONE


def summary_request(
    question: str, previous: str | None, dropped: list[Turn], kept: list[Turn]
) -> str:
    """The summarizer's prompt: the whole dropped part, the kept turns marked as context."""
    return prompts.SUMMARY_REQUEST.format(
        question=question,
        previous=prompts.SUMMARY_PREVIOUS.format(summary=previous) if previous else "",
        dropped=_as_text(dropped),
        kept=_as_text(kept),
        max_words=SUMMARY_MAX_WORDS,
    )


def _summary_of(reply: Any, attempt: int) -> str | None:
    text = message_text(reply).strip()
    if not text:
        logger.warning("summarizer returned nothing (attempt %d of 2)", attempt)
        return None
    return truncate(text, SUMMARY_MAX_CHARS)


def summarize(summarizer: BaseChatModel, request: str, config: RunnableConfig) -> str | None:
    """The summary, trying twice; None when both attempts fail (an error is never a summary)."""
    for attempt in (1, 2):
        try:
            summary = _summary_of(summarizer.invoke([HumanMessage(request)], config), attempt)
        except Exception as error:
            logger.warning("summarizer failed (attempt %d of 2): %r", attempt, error)
            continue
        if summary is not None:
            return summary
    return None


async def asummarize(summarizer: BaseChatModel, request: str, config: RunnableConfig) -> str | None:
    """The async twin of ``summarize``."""
    for attempt in (1, 2):
        try:
            reply = await summarizer.ainvoke([HumanMessage(request)], config)
        except Exception as error:
            logger.warning("summarizer failed (attempt %d of 2): %r", attempt, error)
            continue
        summary = _summary_of(reply, attempt)
        if summary is not None:
            return summary
    return None


@dataclass(frozen=True)
class _Plan:
    before: int
    limit: float
    window: list[Turn]
    kept: list[Turn]
    request: str


def _plan(state: State, deps: Deps, compactor: Compactor) -> _Plan | dict[str, Any]:
    """What to compact, or the update to return when nothing (more) can be done."""
    settings = state["settings"]
    limit = settings["compaction_threshold"] * settings["context_window"]
    before = compactor.counter(render_prompt(state, deps.tool_descriptions))
    if before < limit:
        return {}
    window = visible_turns(state)
    keep = min(settings["keep_turns"], len(window))
    dropped, kept = window[: len(window) - keep], window[len(window) - keep :]
    if not dropped:
        # Only the kept turns are left: nothing can be summarized without losing them.
        logger.warning(
            "context exhausted: %d tokens with only %d turn(s) in view", before, len(window)
        )
        return {"status": "context_exhausted"}
    request = summary_request(state["question"], state.get("summary"), dropped, kept)
    return _Plan(before=before, limit=limit, window=window, kept=kept, request=request)


def _compacted(
    state: State, deps: Deps, compactor: Compactor, plan: _Plan, summary: str | None
) -> dict[str, Any]:
    """The fresh window's record; ``context_exhausted`` when even it does not fit."""
    done = len(state.get("turns") or [])
    if summary is not None:
        first_kept = plan.kept[0]["turn"] if plan.kept else done + 1
    else:
        # No summary: drop the oldest half of the window instead (at least one turn).
        cut = max(1, len(plan.window) // 2)
        first_kept = plan.window[cut]["turn"] if cut < len(plan.window) else done + 1
        logger.warning("no summary was made; dropped the oldest %d turn(s) instead", cut)
    record = CompactionRecord(
        turn=done,
        first_kept_turn=first_kept,
        tokens_before=plan.before,
        tokens_after=0,
        summary=summary,
    )
    fresh: State = {
        **state,
        "compactions": [*(state.get("compactions") or []), record],
        "summary": summary if summary is not None else state.get("summary"),
    }
    record["tokens_after"] = compactor.counter(render_prompt(fresh, deps.tool_descriptions))
    logger.info(
        "compaction after turn %d: %d -> %d prompt tokens (limit %d)%s",
        done,
        plan.before,
        record["tokens_after"],
        plan.limit,
        "" if summary else ", no summary",
    )
    update: dict[str, Any] = {"compactions": [record], "summary": fresh["summary"]}
    if record["tokens_after"] >= plan.limit:
        logger.warning(
            "context exhausted: the fresh window is still %d tokens", record["tokens_after"]
        )
        update["status"] = "context_exhausted"
    return update


def compact_history(
    state: State, config: RunnableConfig, *, deps: Deps, compactor: Compactor
) -> dict[str, Any]:
    """Before each model call: below the threshold do nothing; at or above it, summarize all
    but the last ``keep_turns`` turns (or, if the summarizer fails twice, drop the oldest half)
    and start a fresh window. A fresh window still over the threshold ends the run."""
    plan = _plan(state, deps, compactor)
    if isinstance(plan, dict):
        return plan
    summary = summarize(compactor.summarizer, plan.request, config)
    return _compacted(state, deps, compactor, plan, summary)


async def acompact_history(
    state: State, config: RunnableConfig, *, deps: Deps, compactor: Compactor
) -> dict[str, Any]:
    """The async twin of ``compact_history``."""
    plan = _plan(state, deps, compactor)
    if isinstance(plan, dict):
        return plan
    summary = await asummarize(compactor.summarizer, plan.request, config)
    return _compacted(state, deps, compactor, plan, summary)


def route_after_compact_history(state: State) -> Literal["call_model", "__end__"]:
    """Go on to the model, or end when even a fresh window does not fit."""
    return END if state.get("status") == "context_exhausted" else "call_model"


def route_after_run_tool(state: State) -> Literal["compact_history", "force_answer"]:
    """Check the context before the next call, or at the turn cap make the forced last call."""
    at_cap = control.route_after_run_tool(state) == "force_answer"
    return "force_answer" if at_cap else "compact_history"
