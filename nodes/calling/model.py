"""Calling the model: the prompting node, the forced last answer, and token accounting.

Each node is one generator body (see ``effects``): the sync and async runs share everything but
the I/O itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from reactgraph.nodes import formats
from reactgraph.nodes.calling import constrained
from reactgraph.nodes.calling.constrained import Constraint
from reactgraph.nodes.calling.providers import ModelCaller
from reactgraph.nodes.calling.streaming import was_cut
from reactgraph.nodes.calling.tokens import message_text
from reactgraph.nodes.features import tracing
from reactgraph.nodes.loop import prompts
from reactgraph.nodes.loop.deps import Deps, model_name
from reactgraph.nodes.loop.effects import Effect
from reactgraph.nodes.loop.run_settings import RunSettings
from reactgraph.nodes.loop.state import ModelReply, ParsedReply, State
from reactgraph.nodes.loop.storable import storable
from reactgraph.nodes.loop.transcript import new_turn, render_prompt
from reactgraph.nodes.reading.textparser import clean_reply, invalid_reading
from reactgraph.nodes.reading.toolcalls import calls_of
from reactgraph.nodes.reading.typed_answer import Rejected, answer_kind, read_typed

logger = logging.getLogger(__name__)


def usage_of(message: Any) -> tuple[int, int] | None:
    """Prompt and completion tokens as the provider reported them, if it did."""
    usage = getattr(message, "usage_metadata", None)
    if not usage:
        return None
    prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int) or prompt <= 0:
        return None
    return prompt, completion


def count_tokens(deps: Deps, messages: list[BaseMessage], message: Any) -> tuple[int, int, str]:
    """The call's prompt and completion tokens and where they came from: the provider's usage
    when it reports one, else the token counter."""
    usage = usage_of(message)
    if usage is not None:
        return (*usage, "usage")
    counter = deps.token_counter
    calls = getattr(message, "tool_calls", None) or []
    completion = counter([AIMessage(message_text(message), tool_calls=calls)]) - counter([])
    return counter(messages), completion, getattr(counter, "source", "estimate")


def _log_prompt(messages: list[BaseMessage]) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("prompt:\n%s", "\n---\n".join(message_text(m) for m in messages))


def ask(
    deps: Deps,
    caller: ModelCaller,
    messages: list[BaseMessage],
    config: RunnableConfig,
    stop: list[str] | None,
    state: State,
    bound: Mapping[str, Any] | None = None,
    purpose: str = "turn",
    constraint: Constraint | None = None,
) -> Generator[Effect, Any, ModelReply]:
    """One model call, retried on transient faults as the run's settings say, its reply capped
    at ``max_completion_tokens``, as a ``ModelReply``: the text cleaned (reasoning dropped, cut
    at 'Observation:', made storable) with its token counts, and whether the cap cut it. With
    ``bound`` (the tools bound: the ``tool_calls`` format) it holds the reply's tool calls.
    ``purpose`` (``turn``, ``summary``, ``forced``) marks the call's span in a traced run;
    ``constraint``: what constrains the reply (``constrained_decoding``)."""
    _log_prompt(messages)
    span = tracing.chat_started(state, model_name(caller.model), purpose, messages)
    started = time.perf_counter()
    try:
        message = yield from caller.call(
            messages,
            config,
            stop,
            deps.run_settings(state),  # its settings over the built ones
            bound,
            span.retry if span else None,
            constraint,
        )
    except Exception as error:
        tracing.chat_failed(span, error)
        raise
    latency = time.perf_counter() - started
    raw = storable(message_text(message))
    prompt_tokens, completion_tokens, source = count_tokens(deps, messages, message)
    cut = was_cut(message)
    if cut:
        logger.warning("the reply was cut at the token cap after %d tokens", completion_tokens)
    reply = ModelReply(
        raw=raw,
        text=clean_reply(raw),
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        token_source=source,  # type: ignore[typeddict-item]
        model_latency_s=latency,
        message_id=getattr(message, "id", None),
        cut=cut,
    )
    if bound is not None:
        reply["tool_calls"] = calls_of(message)
    if constraint is not None and not constrained.refused(caller.url):
        constrained.check_reply(caller.url, constraint, raw, cut)
    tracing.chat_ended(span, reply)
    return reply


def read_reply(reply: ModelReply, deps: Deps, settings: RunSettings) -> ParsedReply:
    """The parse of a reply in the run's action format; a reply cut at the cap is never acted
    on: its reading is a correction asking for one short Action. With an answer schema, an
    answer is read as its JSON value (``typed``)."""
    action_format = formats.of(settings)
    parsed = action_format.read(reply, deps, settings)
    if not reply.get("cut"):
        return typed(parsed, reply["text"], settings)
    cap = settings.max_completion_tokens
    limit = prompts.REPLY_CUT_LIMIT.format(tokens=cap) if cap else prompts.REPLY_CUT_SERVER
    names = ", ".join(deps.action_names)
    correction = action_format.reply_cut.format(limit=limit, valid=names)
    return invalid_reading(correction, parsed["thought"])


def typed(parsed: ParsedReply, text: str, settings: RunSettings) -> ParsedReply:
    """A reading under the run's answer schema (none: as it is). An answer that matches is kept
    as its JSON value (``structured_answer``) and its JSON text (``answer``); one that does not
    is an invalid reading whose correction names what failed. A text-format reply with no
    label at all that is (or holds) a matching JSON value is that answer. Pure; never raises."""
    schema = settings.answer_schema
    if schema is None:
        return parsed
    if parsed["kind"] == "answer":
        found = read_typed(parsed["answer"], schema)
    elif parsed["kind"] == "invalid" and parsed["error"] and _unlabelled(parsed, text):
        found = read_typed(text, schema)
        if isinstance(found, Rejected) or isinstance(found.value, str):
            return parsed  # not a JSON answer (prose is no answer here): the format's correction
    else:
        return parsed
    if isinstance(found, Rejected):
        return invalid_reading(found.error, parsed["thought"])
    return ParsedReply(
        kind="answer",
        thought=parsed["thought"],
        action=None,
        action_input=None,
        answer=found.text,
        error=None,
        structured_answer=found.value,
    )


def _unlabelled(parsed: ParsedReply, text: str) -> bool:
    """A text-format reply with neither an Action nor a Final Answer (the model answering with
    its JSON alone)."""
    error = parsed["error"] or ""
    return bool(text.strip()) and error.startswith(prompts.NO_ACTION.split("{valid}")[0])


def call_model(
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """Render the model's view of the transcript and ask the model for the next turn (in the
    ``tool_calls`` format with the tools bound, and no stop sequence)."""
    settings = deps.run_settings(state)
    messages = render_prompt(state, deps.view, deps.tool_descriptions, settings)
    caller = deps.caller_for(settings)
    constraint = deps.constraint(caller, settings)
    action_format = formats.of(settings)
    bound = action_format.bound(deps, caller, settings)
    reply = yield from ask(
        deps, caller, messages, config, action_format.stop, state, bound, constraint=constraint
    )
    return {"reply": reply, "parsed": None}


def force_answer(
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """At the turn cap: one last call that must answer; its answer ends the run. In the
    ``tool_calls`` format the tools stay bound, as providers want for a transcript with tool
    calls in it, and are refused where the binding says how (``tool_choice="none"``); a tool
    call that comes all the same is the attempted Action, not an answer. With an answer schema
    the call asks for it too, and an answer that matches it is the run's ``structured_answer``
    (one that does not stays the run's text ``answer``, with no structured answer)."""
    settings = deps.run_settings(state)
    schema = settings.answer_schema
    demand = (
        prompts.FORCE_ANSWER
        if schema is None
        else prompts.FORCE_TYPED_ANSWER.format(kind=answer_kind(schema))
    )
    messages = [
        *render_prompt(state, deps.view, deps.tool_descriptions, settings),
        HumanMessage(demand),
    ]
    caller = deps.caller_for(settings)
    constraint = deps.constraint(caller, settings, forced=True)
    action_format = formats.of(settings)
    bound = action_format.bound(deps, caller, settings, forced=True)
    reply = yield from ask(
        deps, caller, messages, config, action_format.stop, state, bound, "forced", constraint
    )
    parsed, answer = action_format.read_forced(reply, deps)
    update: dict[str, Any] = {}
    if schema is not None and answer is not None:
        found = read_typed(answer, schema)
        if isinstance(found, Rejected):
            logger.warning("the forced answer does not match the answer schema: %s", found.error)
        else:
            answer = found.text
            update["structured_answer"] = found.value
            parsed = {**parsed, "structured_answer": found.value}
    turn = new_turn(state, "forced", reply=reply, parsed=parsed)
    logger.info("turn cap reached; forced answer: %r", answer)
    return {
        "turns": [turn],
        "reply": reply,
        "parsed": parsed,
        "answer": answer,
        **update,
        "status": "turn_limit",
    }
