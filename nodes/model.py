"""Calling the model: the prompting node, the forced last answer, and token accounting.

Each node has a sync and an async twin sharing everything but the call itself.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from reactgraph.nodes import prompts
from reactgraph.nodes.deps import Deps
from reactgraph.nodes.parsing import clean_reply, parse_react
from reactgraph.nodes.state import ModelReply, State
from reactgraph.nodes.tokens import message_text
from reactgraph.nodes.transcript import new_turn, render_prompt

logger = logging.getLogger(__name__)

STOP = [prompts.STOP_SEQUENCE]


def _usage(message: Any) -> tuple[int, int] | None:
    usage = getattr(message, "usage_metadata", None)
    if not usage:
        return None
    prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int) or prompt <= 0:
        return None
    return prompt, completion


def _log_prompt(messages: list[BaseMessage]) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("prompt:\n%s", "\n---\n".join(message_text(m) for m in messages))


def _reply(deps: Deps, messages: list[BaseMessage], message: Any, latency: float) -> ModelReply:
    """The reply cleaned (reasoning dropped, cut at 'Observation:') with its token counts:
    the provider's usage when it reports one, else counted."""
    raw = message_text(message)
    usage = _usage(message)
    if usage is not None:
        prompt_tokens, completion_tokens = usage
        source = "usage"
    else:
        counter = deps.token_counter
        prompt_tokens = counter(messages)
        completion_tokens = counter([AIMessage(raw)]) - counter([])
        source = getattr(counter, "source", "estimate")
    return ModelReply(
        raw=raw,
        text=clean_reply(raw),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        token_source=source,
        model_latency_s=latency,
    )


def invoke_model(
    deps: Deps, state: State, messages: list[BaseMessage], config: RunnableConfig
) -> ModelReply:
    """One model call with the stop sequence, retried on transient faults."""
    _log_prompt(messages)
    started = time.perf_counter()
    message = deps.caller_for(state["settings"]).invoke(messages, config, STOP)
    return _reply(deps, messages, message, time.perf_counter() - started)


async def ainvoke_model(
    deps: Deps, state: State, messages: list[BaseMessage], config: RunnableConfig
) -> ModelReply:
    """The async twin of ``invoke_model``."""
    _log_prompt(messages)
    started = time.perf_counter()
    message = await deps.caller_for(state["settings"]).ainvoke(messages, config, STOP)
    return _reply(deps, messages, message, time.perf_counter() - started)


def call_model(state: State, config: RunnableConfig, *, deps: Deps) -> dict[str, Any]:
    """Render the model's view of the transcript and ask the model for the next turn."""
    messages = render_prompt(state, deps.tool_descriptions)
    return {"reply": invoke_model(deps, state, messages, config), "parsed": None}


async def acall_model(state: State, config: RunnableConfig, *, deps: Deps) -> dict[str, Any]:
    """The async twin of ``call_model``."""
    messages = render_prompt(state, deps.tool_descriptions)
    return {"reply": await ainvoke_model(deps, state, messages, config), "parsed": None}


def _forced_prompt(state: State, deps: Deps) -> list[BaseMessage]:
    return [*render_prompt(state, deps.tool_descriptions), HumanMessage(prompts.FORCE_ANSWER)]


def _forced_update(state: State, deps: Deps, reply: ModelReply) -> dict[str, Any]:
    parsed = parse_react(reply["text"], deps.action_names)
    if parsed["kind"] == "answer":
        answer = parsed["answer"]
    elif parsed["kind"] == "invalid" and reply["text"]:
        # Plain prose with no labels is the model answering in its own words.
        answer = reply["text"]
    else:
        answer = None
    turn = new_turn(state, "forced", reply=reply, parsed=parsed)
    logger.info("turn cap reached; forced answer: %r", answer)
    return {
        "turns": [turn],
        "reply": reply,
        "parsed": parsed,
        "answer": answer,
        "status": "turn_limit",
    }


def force_answer(state: State, config: RunnableConfig, *, deps: Deps) -> dict[str, Any]:
    """At the turn cap: one last call that must answer; its answer ends the run."""
    reply = invoke_model(deps, state, _forced_prompt(state, deps), config)
    return _forced_update(state, deps, reply)


async def aforce_answer(state: State, config: RunnableConfig, *, deps: Deps) -> dict[str, Any]:
    """The async twin of ``force_answer``."""
    reply = await ainvoke_model(deps, state, _forced_prompt(state, deps), config)
    return _forced_update(state, deps, reply)
