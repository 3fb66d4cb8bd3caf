"""Compaction: when the prompt nears the context window, summarize the history and go on in a
fresh window (question, summary, last turns verbatim). The summarizer is called through the same
path as the agent (retries, Retry-After, token records)."""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp

from reactgraph.nodes.calling.providers import ModelCallError, ModelRefused
from reactgraph.nodes.loop import formats
from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.loop.earlier import earlier_text, folded
from reactgraph.nodes.loop.middleware.scope import current
from reactgraph.nodes.loop.model import ask
from reactgraph.nodes.loop.transcript import instructions_block, render_prompt, visible_turns
from reactgraph.nodes.running.tool_runs import truncate
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.effects import Effect
from reactgraph.nodes.vocabulary.run_settings import CompactionSettings, narrowed
from reactgraph.nodes.vocabulary.state import CompactionRecord, ModelReply, State, Turn

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


def known_context_window(model_name: str | None) -> int | None:
    """The context window of a model in the table, matched by the longest name prefix."""
    name = (model_name or "").lower().split("/")[-1]
    matches = [prefix for prefix in CONTEXT_WINDOWS if name.startswith(prefix)]
    return CONTEXT_WINDOWS[max(matches, key=len)] if matches else None


def context_window_for(model_name: str | None) -> int:
    """The known context window of a model, or 128,000 with a warning."""
    window = known_context_window(model_name)
    if window is not None:
        return window
    logger.warning(
        "context window of model %r unknown; assuming %d tokens (set context_window, or "
        "--context-window on the command line)",
        model_name,
        FALLBACK_WINDOW,
    )
    return FALLBACK_WINDOW


def profile_window(model: Any) -> int | None:
    """The context window the model's own profile states (``profile["max_input_tokens"]``, as
    langchain-openai models carry it), if it has one."""
    profile = getattr(model, "profile", None)
    if not isinstance(profile, Mapping):
        return None
    window = profile.get("max_input_tokens")
    return (
        window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else None
    )


def context_window_of(model: Any, model_name: str | None) -> int:
    """The model's context window: from its profile, else the table, else 128,000 with a
    warning."""
    window = profile_window(model)
    return window if window is not None else context_window_for(model_name)


def _as_text(turns: list[Turn]) -> str:
    parts = []
    for turn in turns:
        if turn["observation"] is None:
            parts.append(turn["text"])
        elif turn.get("tool_calls"):
            # A native tool call: its text is only the Thought, so the Action is written out.
            name = turn["action"] or turn["tool_calls"][0]["name"]
            parts.append(
                prompts.TRANSCRIPT_CALL.format(
                    text=turn["text"],
                    name=name,
                    input=turn["action_input"] or "",
                    observation=turn["observation"],
                )
            )
        else:
            parts.append(
                prompts.TRANSCRIPT_TURN.format(text=turn["text"], observation=turn["observation"])
            )
    return "\n\n".join(parts) or prompts.SUMMARY_NONE


def counted_prompt(state: State, deps: Deps) -> list[BaseMessage]:
    """What the next call sends, as counted against the context window: the prompt, and in the
    ``tool_calls`` format the bound tools' schemas too (as one message of their JSON)."""
    settings = deps.run_settings(state)
    messages = render_prompt(state, deps.view, deps.tool_descriptions, settings)
    messages.extend(formats.of(settings).counted(deps, settings))
    return messages


def summary_request(
    question: str,
    previous: str | None,
    dropped: list[Turn],
    kept: list[Turn],
    earlier: str = "",
    instructions: str = "",
) -> str:
    """The summarizer's prompt: the application's instructions' block (``instructions_block``)
    when the run has one, the earlier conversation on the thread (the first compaction of a run
    folds it in; later ones find it in the previous summary), the whole dropped part, the kept
    turns marked as context."""
    return prompts.SUMMARY_REQUEST.format(
        instructions=(
            prompts.SUMMARY_INSTRUCTIONS.format(block=instructions) if instructions else ""
        ),
        question=question,
        earlier=prompts.SUMMARY_EARLIER.format(earlier=earlier) if earlier else "",
        previous=prompts.SUMMARY_PREVIOUS.format(summary=previous) if previous else "",
        dropped=_as_text(dropped),
        kept=_as_text(kept),
        max_words=SUMMARY_MAX_WORDS,
    )


def summarize(
    deps: Deps, request: str, config: RunnableConfig, state: State
) -> Generator[Effect, Any, tuple[str | None, ModelReply | None]]:
    """The summary and its reply record, trying twice; None when both attempts fail (an error is
    never a summary; nor is a call the server refuses, ``ModelRefused``: a prompt too large for
    it, say). A provider that stays down after its retries stops the run resumably."""
    last: ModelReply | None = None
    for attempt in (1, 2):
        try:
            messages: list[BaseMessage] = [HumanMessage(request)]
            scope = current(state, config, deps)
            scope.purpose = "summary"
            reply = yield from ask(deps, scope, messages, None, caller=deps.summarizer)
        except ModelRefused as error:  # a prompt too large for it, say: the summary failed
            logger.warning("summarizer failed (attempt %d of 2): %s", attempt, error)
            continue
        except (ModelCallError, GraphBubbleUp):  # the run stops: resumably, or it ended
            raise
        except Exception as error:
            logger.warning("summarizer failed (attempt %d of 2): %r", attempt, error)
            continue
        if last is not None:  # an empty first summary was spent too: the record holds both
            reply = reply.copy()
            reply["prompt_tokens"] += last["prompt_tokens"]
            reply["completion_tokens"] += last["completion_tokens"]
        last = reply
        text = last["raw"].strip()
        if text:
            return truncate(text, SUMMARY_MAX_CHARS), last
        logger.warning("summarizer returned nothing (attempt %d of 2)", attempt)
    return None, last


@dataclass(frozen=True)
class _Plan:
    before: int
    limit: float
    window: list[Turn]
    kept: list[Turn]
    request: str


def _plan(state: State, deps: Deps) -> _Plan | dict[str, Any]:
    """What to compact, or the update to return when nothing (more) can be done."""
    settings = narrowed(deps.run_settings(state), CompactionSettings)
    if settings.context_window is None:
        raise ValueError("compaction needs the context window (build_graph looks it up)")
    limit = settings.compaction_threshold * settings.context_window
    before = deps.context_counter(counted_prompt(state, deps))
    if before < limit:
        return {}
    window = visible_turns(state, deps.view, settings)
    keep = min(settings.keep_turns, len(window))
    dropped, kept = window[: len(window) - keep], window[len(window) - keep :]
    # The earlier conversation's block, until a compaction of this run folds it in.
    earlier = "" if folded(state, deps.view) else earlier_text(state, settings)
    if not dropped and not earlier:
        # Only the kept turns are left: nothing can be summarized without losing them.
        logger.warning(
            "context exhausted: %d tokens with only %d turn(s) in view", before, len(window)
        )
        return {"status": "context_exhausted"}
    request = summary_request(
        state["question"],
        state.get("summary"),
        dropped,
        kept,
        earlier,
        instructions_block(settings),
    )
    return _Plan(before=before, limit=limit, window=window, kept=kept, request=request)


def _compacted(
    state: State, deps: Deps, plan: _Plan, summary: str | None, reply: ModelReply | None
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
        prompt_tokens=reply["prompt_tokens"] if reply else 0,
        completion_tokens=reply["completion_tokens"] if reply else 0,
    )
    if reply:
        record["token_source"] = reply["token_source"]
    fresh: State = {**state, "compactions": [*(state.get("compactions") or []), record]}
    if summary is not None:
        fresh["summary"] = summary
    record["tokens_after"] = deps.context_counter(counted_prompt(fresh, deps))
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
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """Before each model call: below the threshold do nothing; at or above it, summarize all
    but the last ``keep_turns`` turns (or, if the summarizer fails twice, drop the oldest half)
    and start a fresh window. A fresh window still over the threshold ends the run."""
    plan = _plan(state, deps)
    if isinstance(plan, dict):
        return plan
    summary, reply = yield from summarize(deps, plan.request, config, state)
    return _compacted(state, deps, plan, summary, reply)
