"""Calling the model: the prompting node, the forced last answer, and token accounting.

Each node is one generator body (see ``effects``): the sync and async runs share everything but
the I/O itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Sequence
from functools import partial
from typing import Any

from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from reactgraph.nodes.calling import constrained
from reactgraph.nodes.calling.binding import names_of
from reactgraph.nodes.calling.providers import ModelCaller
from reactgraph.nodes.calling.streaming import was_cut
from reactgraph.nodes.calling.tokens import message_text
from reactgraph.nodes.loop import formats
from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.loop.middleware.scope import Scope, current, runtime_of
from reactgraph.nodes.loop.transcript import render_prompt
from reactgraph.nodes.reading.answer_schema import answer_kind
from reactgraph.nodes.reading.textparser import clean_reply, invalid_reading
from reactgraph.nodes.reading.toolcalls import calls_of
from reactgraph.nodes.reading.typed_answer import Rejected, read_typed
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.effects import Effect
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.nodes.vocabulary.state import ModelReply, ParsedReply, State
from reactgraph.nodes.vocabulary.storable import storable
from reactgraph.nodes.vocabulary.turns import new_turn

logger = logging.getLogger(__name__)


def ask(
    deps: Deps,
    scope: Scope,
    messages: list[BaseMessage],
    stop: list[str] | None,
    forced: bool = False,
    caller: ModelCaller | None = None,
) -> Generator[Effect, Any, ModelReply]:
    """One model call of the run's model, through the loop's middleware (``deps.chain``: the
    application's, then the grammar, the budgets and the traces), as a ``ModelReply``: the text
    cleaned (reasoning dropped, cut at 'Observation:', made storable) with its token counts, and
    whether the cap cut it; in a format that binds tools, with the reply's tool calls.
    ``forced``: the forced answer's call, which must not call a tool. ``caller``: another
    model's (the summarizer's), whose call goes through the loop's own middleware alone."""
    settings = scope.settings
    _log_prompt(messages)
    own = caller is not None
    caller = caller or deps.caller_for(settings)
    request = model_request(deps, scope, caller, messages, stop, tools=not own)
    started = time.perf_counter()
    send_it = partial(send, deps, scope, forced)
    response = yield from deps.chain.model_call(request, scope, send_it, own_only=own)
    message = reply_message(response)
    latency = time.perf_counter() - started
    raw = storable(message_text(message))
    prompt_tokens, completion_tokens, source = scope.tokens(lambda: messages, message)
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
    lost = scope.lost_of(message)
    if lost:
        reply["lost_calls"] = lost
    if formats.of(settings).binds_tools and not own:
        reply["tool_calls"] = calls_of(message)
    return reply


def model_request(
    deps: Deps,
    scope: Scope,
    caller: ModelCaller,
    messages: list[BaseMessage],
    stop: list[str] | None,
    tools: bool = True,
) -> ModelRequest:
    """The request a middleware sees: the model, the messages as the model will receive them
    (a leading system message as ``system_message``), every action the model may call (none
    for a summary's call: ``tools=False``), the state and LangGraph's runtime;
    ``model_settings`` holds the stop sequences."""
    system = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
    return ModelRequest(
        model=caller.model,
        messages=messages[1:] if system is not None else list(messages),  # type: ignore[arg-type]
        system_message=system,
        tools=deps.request_tools(scope.settings) if tools else [],
        state=scope.state,  # type: ignore[arg-type]
        runtime=runtime_of(),
        model_settings={"stop": stop} if stop else {},
    )


def send(
    deps: Deps, scope: Scope, forced: bool, request: ModelRequest
) -> Generator[Effect, Any, ModelResponse]:
    """The innermost handler: ``request`` sent to its model as it stands. Narrowed tools narrow
    the prompt's list of them (the text format) or the tools bound (``tool_calls``); the
    request's settings carry the stop sequences, the grammar or strict tools, and any other
    call arguments."""
    settings = scope.settings
    caller = deps.caller_of(request.model, settings)
    action_format = formats.of(settings)
    system = request.system_message
    head = [] if system is None else [system]
    messages: list[BaseMessage] = [*head, *request.messages]
    if scope.purpose == "summary":  # no tools offered: none bound, none narrowed
        message = yield from caller.call(
            messages, scope.config, None, settings, None, scope.retried, None, {}, scope.deadline
        )
        return ModelResponse(result=[message])
    names = names_of(request.tools)
    chosen = None if names == tuple(deps.action_names) else names
    if chosen is not None:
        messages = action_format.narrowed(messages, deps, settings, chosen)
    options = dict(request.model_settings)
    stop = options.pop("stop", None)
    grammar = options.pop(constrained.GRAMMAR, None)
    strict = bool(options.pop(constrained.STRICT_TOOLS, False))
    bound = action_format.bound(deps, caller, settings, forced, chosen)
    constraint = None
    if isinstance(grammar, str):
        constraint = constrained.grammar_constraint(grammar)
    elif strict:
        tools = action_format.bound(deps, caller, settings, forced, chosen, strict=True)
        constraint = constrained.Constraint(bound=tools)
    message = yield from caller.call(
        messages,
        scope.config,
        stop,
        settings,
        bound,
        scope.retried,
        constraint,
        options,
        scope.deadline,
    )
    if constraint is not None and not constrained.refused(caller.url):
        constrained.check_reply(caller.url, constraint, message_text(message), was_cut(message))
    return ModelResponse(result=[message])


def reply_message(response: Any) -> AIMessage:
    """The reply of a model call's response: its last AI message (TypeError: it has none)."""
    result = getattr(response, "result", None) or []
    for message in reversed(result):
        if isinstance(message, AIMessage):
            return message
    raise TypeError("the model call's response holds no AIMessage (a middleware returned it)")


def _log_prompt(messages: list[BaseMessage]) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("prompt:\n%s", "\n---\n".join(message_text(m) for m in messages))


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


def turn_call(
    state: State, config: RunnableConfig, deps: Deps, extra: Sequence[BaseMessage] = ()
) -> Generator[Effect, Any, tuple[ModelReply, dict[str, Any]]]:
    """A turn's model call, the ``before_model`` and ``after_model`` hooks around it: the
    reply, and what the hooks wrote. ``extra``: messages after the rendered prompt (the forced
    answer's demand, whose call must not call a tool)."""
    scope = current(state, config, deps)
    scope.purpose = "forced" if extra else "turn"
    settings = scope.settings
    update = yield from deps.chain.before_model(state, scope)
    messages = [*render_prompt(state, deps.view, deps.tool_descriptions, settings), *extra]
    forced = bool(extra)
    reply = yield from ask(deps, scope, messages, formats.of(settings).stop, forced)
    update.update((yield from deps.chain.after_model({**state, "reply": reply}, scope)))
    return reply, update


def call_model(
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """Render the model's view of the transcript and ask the model for the next turn (in the
    ``tool_calls`` format with the tools bound, and no stop sequence)."""
    reply, update = yield from turn_call(state, config, deps)
    return {**update, "reply": reply, "parsed": None}


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
    reply, update = yield from turn_call(state, config, deps, [HumanMessage(demand)])
    parsed, answer = formats.of(settings).read_forced(reply, deps)
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
        **update,
        "turns": [turn],
        "reply": reply,
        "parsed": parsed,
        "answer": answer,
        "status": "turn_limit",
    }
