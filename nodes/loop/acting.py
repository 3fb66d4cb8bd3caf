"""Completing a turn with a tool: the parsed Action run (its arguments read, its injected ones
filled, its timeout within the run's time left) or the reply's correction, and the Observation
recorded. ``run_tool`` is one body; the tool call itself is the ``ToolCall`` effect.

Delivery is at least once: a run killed after a tool returned but before the step's checkpoint
was written runs that call again when resumed. Each call's config therefore carries an
idempotency key (``configurable["idempotency_key"]``: thread, run and turn) that stays the same
across resumes, so a tool with side effects can recognise a repeat.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Mapping
from functools import partial
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import get_runtime

from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.loop.middleware.scope import (
    NOT_RUN,
    MiddlewareError,
    Scope,
    current,
    refused_call,
    runtime_of,
)
from reactgraph.nodes.running.finished import finished_calls, keep_finished
from reactgraph.nodes.running.injection import fill
from reactgraph.nodes.running.tool_io import RAW, call_arguments, outcome, tool_arguments
from reactgraph.nodes.running.tool_runs import ToolCall, failure_text, truncate
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.effects import Effect, Together
from reactgraph.nodes.vocabulary.state import (
    CallReading,
    CallRecord,
    ParsedReply,
    State,
    TurnKind,
)
from reactgraph.nodes.vocabulary.storable import storable
from reactgraph.nodes.vocabulary.turns import new_turn

logger = logging.getLogger(__name__)


def run_tool(
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """Complete the turn: run the parsed action through the loop's middleware (or reject the
    reply) and record the Observation (and the tool's artifact, if it gave one). A tool's
    failure or timeout, whatever middleware saw it on the way, is its Observation here. A
    reply of several calls (``parallel_tool_calls``) runs each at once (``run_calls``)."""
    parsed, reply = state["parsed"], state["reply"]
    if parsed is None or reply is None:
        raise ValueError("run_tool needs a parsed reply in the state")
    scope = current(state, config, deps)
    if parsed.get("actions"):
        return (yield from run_calls(state, config, deps, scope))
    done = yield from one_call(deps, scope, parsed, idempotency_key(state))
    turn = new_turn(
        state,
        done["kind"],
        reply=reply,
        parsed=parsed,
        observation=done["observation"],
        tool_latency_s=done["latency"],
        artifact=done.get("artifact"),
    )
    return {"turns": [turn]}


def one_call(
    deps: Deps, scope: Scope, parsed: ParsedReply, key: str
) -> Generator[Effect, Any, dict[str, Any]]:
    """One action of the node's run (``scope``: its state and config) through the loop's
    middleware (``parsed``: the reply's reading, or one call's of several), keyed ``key``: what
    came of it (``kind``, ``observation``, already truncated, ``latency`` and the tool's
    ``artifact``)."""
    tool = deps.tools.get(parsed["action"] or "") if parsed["kind"] == "action" else None
    latency = artifact = None
    settings = scope.settings
    kind: TurnKind
    if tool is None:
        kind = "invalid"
        observation = _not_runnable(parsed, deps)
    else:
        kind = "action"
        observation, latency, artifact = yield from _run_tool(deps, scope, parsed, key, tool)
    observation = truncate(storable(observation), settings.max_observation_chars)
    done: dict[str, Any] = {"kind": kind, "observation": observation, "latency": latency}
    if artifact is not None:
        done["artifact"] = artifact
    return done


def _not_runnable(parsed: ParsedReply, deps: Deps) -> str:
    """The Observation of a reply that names no tool: its reading's error, else the tools there
    are (or, for a variant's own action given with others, that it runs alone)."""
    observation = parsed["error"] or prompts.NO_ACTION.format(valid=", ".join(deps.tools))
    if parsed["error"] is None and parsed["action"] in deps.action_names:
        observation = prompts.RUNS_ALONE.format(name=parsed["action"])  # a variant's own
    return observation


def _arguments(tool: BaseTool, parsed: ParsedReply, hidden: frozenset[str]) -> dict[str, Any] | str:
    """A call's arguments: a native tool call's as sent, else read from the Action's input;
    ValueError (the Observation) when they do not fit the tool."""
    if parsed.get("args") is not None:  # a native tool call: its arguments as sent
        return call_arguments(tool, parsed["args"] or {}, hidden)
    return tool_arguments(tool, parsed["action_input"] or "", hidden)


def _run_tool(
    deps: Deps, scope: Scope, parsed: ParsedReply, key: str, tool: BaseTool
) -> Generator[Effect, Any, tuple[str, float | None, Any]]:
    """``tool`` called for ``parsed`` through the loop's middleware: its Observation (not yet
    truncated), the call's latency (None when it did not run) and the tool's artifact."""
    state: Any = scope.state
    config = scope.config
    injected = deps.injected.get(tool.name)
    hidden = injected.hidden if injected else frozenset()
    own_config = tool_config(state, config, key)
    call_state: Any = state if state["parsed"] is parsed else {**state, "parsed": parsed}
    try:
        arguments = _arguments(tool, parsed, hidden)
        tool_call = tool_call_for(call_state, own_config, deps, tool, arguments, key)
    except ValueError as error:
        return str(error), None, None
    request = tool_request(as_request_call(tool, tool_call, key), tool, call_state, runtime_of())
    started = time.perf_counter()
    execute = partial(execute_tool, deps, scope, own_config)
    try:
        message = yield from deps.chain.tool_call(request, scope, execute)
    except (GraphBubbleUp, MiddlewareError):  # not the tool's: a run's end, a misuse
        raise
    except Exception as error:
        failed = failure_text(tool.name, error, scope.settings.tool_timeout)
        return failed, time.perf_counter() - started, None
    observation, artifact = outcome(tool.name, message)
    ran = not (getattr(message, "response_metadata", None) or {}).get(NOT_RUN)
    return observation, time.perf_counter() - started if ran else None, artifact


def run_calls(
    state: State, config: RunnableConfig, deps: Deps, scope: Scope
) -> Generator[Effect, Any, dict[str, Any]]:
    """The turn of a reply of several calls (``parallel_tool_calls``): each call that can run
    through the loop's middleware on its own (its own key, timeout and Observation), all at
    once (``Together``); a call that cannot (past the cap, unreadable, refused by a person)
    answered by its correction. Each outcome is kept as it finishes (``finished``), so a
    resumed step runs only the calls that had not. One turn holds them all, in the reply's
    order (``CallRecord``), its ``observation`` their Observations labelled."""
    parsed, reply = state["parsed"], state["reply"]
    assert parsed is not None and reply is not None
    readings = parsed.get("actions") or []
    earlier = yield from finished_calls(config)
    bodies, positions = [], []
    for index, reading in enumerate(readings):
        if index in earlier:
            continue
        refused = refusal(reading, scope.settings.max_observation_chars)
        if refused is not None:
            earlier[index] = {"kind": "invalid", "observation": refused, "latency": None}
            continue
        key = idempotency_key(state, index + 1)
        body = one_call(deps, scope, call_reading(parsed, reading), key)
        bodies.append(kept(body, config, index))
        positions.append(index)
    started = time.perf_counter()
    done = yield Together(tuple(bodies))
    elapsed = time.perf_counter() - started if bodies else None
    outcomes = {**earlier, **dict(zip(positions, done, strict=True))}
    records = [call_record(r, outcomes[i]) for i, r in enumerate(readings)]
    ran = any(o.get("latency") is not None for o in outcomes.values())
    turn = new_turn(
        state,
        "action",
        reply=reply,
        parsed=parsed,
        observation=labelled(records),
        tool_latency_s=elapsed if ran else None,
        artifact=None,
    )
    turn["actions"] = records
    return {"turns": [turn]}


def kept(
    body: Generator[Effect, Any, dict[str, Any]], config: RunnableConfig, index: int
) -> Generator[Effect, Any, dict[str, Any]]:
    """A call's body, its outcome kept durably as it finishes (``finished.keep_finished``)."""
    done = yield from body
    yield from keep_finished(config, index, done)
    return done


def refusal(reading: CallReading, limit: int) -> str | None:
    """The Observation of a call that does not run: its reading's correction, or a person's
    response or refusal; None when it runs."""
    if reading["error"] is not None:
        return truncate(storable(reading["error"]), limit)
    approval = reading.get("approval")
    if approval is None or approval["decision"] in ("approve", "edit"):
        return None
    if approval["decision"] == "respond":
        text = approval.get("message") or ""
    elif approval.get("message"):
        text = prompts.ACTION_REJECTED_WHY.format(reason=approval["message"])
    else:
        text = prompts.ACTION_REJECTED
    return truncate(storable(text), limit)


def call_reading(parsed: ParsedReply, reading: CallReading) -> ParsedReply:
    """One call of several as a reading of its own: what its middleware sees as the state's
    ``parsed`` (the approval gate reads its decision there)."""
    one = ParsedReply(
        kind="action",
        thought=parsed["thought"],
        action=reading["action"],
        action_input=reading["action_input"],
        answer=None,
        error=None,
    )
    if reading["call_id"] is not None:
        one["call_id"], one["args"] = reading["call_id"], reading["args"]
    if "approval" in reading:
        one["approval"] = reading["approval"]
    return one


def call_record(reading: CallReading, done: Mapping[str, Any]) -> CallRecord:
    """One call of the turn and what came of it."""
    record = CallRecord(
        action=reading["action"],
        action_input=reading["action_input"],
        call_id=reading["call_id"],
        args=reading["args"],
        observation=done["observation"],
        tool_latency_s=done.get("latency"),
    )
    if done.get("artifact") is not None:
        record["artifact"] = done["artifact"]
    if "approval" in reading:
        record["approval"] = reading["approval"]
    return record


def labelled(records: list[CallRecord]) -> str:
    """The turn's Observations, each labelled with its number and its call, in order."""
    return "\n".join(
        prompts.OBSERVATION_NUMBERED.format(index=number, action=label(r), text=r["observation"])
        for number, r in enumerate(records, 1)
    )


def label(record: CallRecord) -> str:
    """How an Observation names its call: the call that ran (and what a person changed)."""
    if not record["action"]:
        return "not run"
    ran = f"{record['action']}[{record['action_input']}]"
    approval = record.get("approval")
    if approval is None or approval["decision"] != "edit":
        return ran
    proposed = f"{approval.get('proposed_action')}[{approval.get('proposed_input')}]"
    return prompts.EDITED_CALL.format(action=ran, proposed=proposed)


def tool_request(call: dict[str, Any], tool: BaseTool, state: Any, runtime: Any) -> ToolCallRequest:
    """LangGraph's ``ToolCallRequest`` of a call, made as its ``__init__`` makes it, without
    the ``__setattr__`` that warns of a change after it was made (two ``hasattr`` a field,
    each call; ``tests/test_seam_layers.py`` fails if its fields change)."""
    request = object.__new__(ToolCallRequest)
    vars(request).update(tool_call=call, tool=tool, state=state, runtime=runtime)
    return request


def as_request_call(tool: BaseTool, call: dict[str, Any] | str, key: str) -> dict[str, Any]:
    """The LangChain ``ToolCall`` a middleware sees: the call itself, or for a tool that takes
    only ``*args`` its raw input under that name."""
    if isinstance(call, str):
        return {"name": tool.name, "args": {RAW: call}, "id": key, "type": "tool_call"}
    return call


def execute_tool(
    deps: Deps, scope: Scope, config: RunnableConfig, request: ToolCallRequest
) -> Generator[Effect, Any, ToolMessage]:
    """The innermost handler: the request's tool run on its call, within the run's tool
    timeout (at most the time its scope has left), as a ``ToolMessage``; the tool's own
    exception, or ``deadlines.TimedOut``, raised as it came."""
    call = request.tool_call
    tool = request.tool if request.tool is not None else deps.tools.get(call["name"])
    if tool is None:  # a middleware asked for a tool the graph does not have
        return refused_call(request, prompts.NO_ACTION.format(valid=", ".join(deps.tools)))
    left = scope.time_left()
    limit = scope.settings.tool_timeout
    timeout = max(limit if left is None else min(limit, left), 0.001)
    args = call.get("args") or {}
    arguments: Any = args[RAW] if list(args) == [RAW] else {**call, "name": tool.name}
    result = yield ToolCall(tool, arguments, config, timeout)
    if isinstance(result, ToolMessage):
        return result
    text, artifact = outcome(tool.name, result)
    return ToolMessage(text, artifact=artifact, tool_call_id=call["id"], name=tool.name)


def tool_call_for(
    state: State,
    config: RunnableConfig,
    deps: Deps,
    tool: BaseTool,
    arguments: dict[str, Any] | str,
    key: str | None = None,
) -> dict[str, Any] | str:
    """The LangChain ``ToolCall`` for the tool, its injected arguments filled (its id is the
    call's idempotency key); a tool that takes only ``*args`` is called with the raw input.

    Raises ValueError with the Observation when the injected arguments cannot be filled.
    """
    if isinstance(arguments, str):
        return arguments
    call_id = key or idempotency_key(state)
    injected = deps.injected.get(tool.name)
    if injected:
        try:
            runtime = get_runtime()
        except RuntimeError:  # called outside a graph (a node body's own test)
            runtime = None
        try:
            arguments = fill(
                injected,
                arguments,
                state=state,
                config=config,
                runtime=runtime,
                call_id=call_id,
                tools=list(deps.tools.values()),
            )
        except (KeyError, ValueError) as error:
            raise ValueError(prompts.TOOL_ERROR.format(name=tool.name, error=str(error))) from None
    return {"name": tool.name, "args": arguments, "id": call_id, "type": "tool_call"}


def idempotency_key(state: State, call: int | None = None) -> str:
    """The same on every attempt of this turn's call: thread, run, turn (and in a turn of
    several calls, the call's number, from 1)."""
    turn = len(state.get("turns") or []) + 1
    key = f"{state.get('thread_id')}/{state.get('run', 1)}/{turn}"
    return key if call is None else f"{key}/{call}"


def tool_config(state: State, config: RunnableConfig, key: str | None = None) -> RunnableConfig:
    """The config a tool call gets: the run's, plus a key that is the same on every attempt of
    this call (thread, run, turn; and the call's number in a turn of several), for tools that
    must not act twice."""
    key = key or idempotency_key(state)
    configurable = {**(config.get("configurable") or {}), "idempotency_key": key}
    metadata = {**(config.get("metadata") or {}), "idempotency_key": key}
    return {**config, "configurable": configurable, "metadata": metadata}
