"""The one assembly: any ``Variant`` becomes a graph here, and every router and edge lives here.

    START -> start_run -> [once-per-run steps] -> [every-turn steps] -> call_model
          -> parse_reply -+-> END                        (final answer, stuck)
                          +-> approve_action -> run_tool (approved, edited) | as a turn below
                          +-> run_tool | <action> -+-> first every-turn step, else call_model
                                                   +-> force_answer | stop_run -> END   (cap)

``approve_action`` is reached only for an Action of a tool the run's ``approve`` setting names;
a response or a refusal completes the turn there, as a tool's Observation would.

Every node's update passes through ``budgets.account`` (the run's spend: tokens, cost, the
node's wall time, tool calls): a spent run budget sets ``budget_exhausted``, and every router
after a node ends the run on a status, so no further model call or tool runs.

A node with several possible next nodes returns ``Command(update, goto)``: its router runs in
the same step, on the state as the node's update leaves it, which spares LangGraph a superstep
of edge evaluation per node. The destinations are declared, so drawings and Studio still show
every exit as a conditional edge.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from types import GeneratorType
from typing import Any, Literal

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Command

from reactgraph.nodes.calling.model import call_model, force_answer
from reactgraph.nodes.chatview.chat import chat_update
from reactgraph.nodes.features import tracing
from reactgraph.nodes.features.budgets import account, over_limit
from reactgraph.nodes.features.history import records_update
from reactgraph.nodes.loop.control import parse_reply, start_run, stop_run, turn_cap_reached
from reactgraph.nodes.loop.deps import Deps, model_name
from reactgraph.nodes.loop.effects import adrive, drive
from reactgraph.nodes.loop.state import InputState, State
from reactgraph.nodes.running.approval import approve_action, needs_approval, runs_tool
from reactgraph.nodes.running.tool_runs import run_tool
from reactgraph.spec import Body, Variant

Router = Callable[[Mapping[str, Any]], str]
# Channels whose updates are appended to what the state holds.
_APPENDED = ("turns", "compactions", "messages")


class _Joined(Sequence[Any]):
    """The state's list with a node's appended items, without copying either."""

    def __init__(self, head: Sequence[Any], tail: Sequence[Any]) -> None:
        self._head, self._tail = head, tail

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(itertools.chain(self._head, self._tail))[index]
        if index < 0:
            index += len(self)
        if index < len(self._head):
            return self._head[index]
        return self._tail[index - len(self._head)]

    def __iter__(self) -> Iterator[Any]:
        return itertools.chain(self._head, self._tail)


def after(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """The state as a node's update leaves it, for that node's router."""
    merged = {**state, **update}
    for key in _APPENDED:
        if isinstance(update.get(key), list | tuple):
            merged[key] = _Joined(state.get(key) or [], list(update[key]))
    return merged


class Node(Runnable[State, Any]):
    """A node body with its sync and async shells (``invoke`` drives its effects blocking,
    ``ainvoke`` awaits them) and, when it has several exits, its router."""

    def __init__(self, name: str, body: Body, deps: Deps, route: Router | None = None) -> None:
        self.name = name
        self._node = name  # ``name`` as Runnable types it may be None
        self._body, self._deps, self._route = body, deps, route

    @property
    def deps(self) -> Deps:
        """What the node's body is given: the graph's tools, model and settings."""
        return self._deps

    def _done(self, state: State, update: dict[str, Any], seconds: float) -> Any:
        settings = self._deps.run_settings({**state, **update})
        update = account(state, update, seconds, settings, self._deps.tools)
        chat = chat_update(state, update, self._deps.tools)
        if chat:
            update = {**update, "messages": chat}
        records = records_update(state, update)
        if records:  # a run's start or end: its record in the thread's conversation
            update = {**update, "earlier_runs": records}
        if self._route is None:
            return update
        return Command(update=update, goto=self._route(after(state, update)))

    def _model(self, state: Mapping[str, Any]) -> str | None:
        return self._deps.run_settings(state).model_name or model_name(self._deps.model)

    def _timeout(self, state: Mapping[str, Any]) -> float:
        return float(self._deps.run_settings(state).tool_timeout)

    def _traced(self, state: State, update: dict[str, Any]) -> dict[str, Any]:
        """The update after the traces' hook (start_run's keeps the run's trace context)."""
        if not tracing.enabled() and not state.get("trace"):
            return update
        return tracing.node_done(
            self._node,
            state,
            update,
            lambda: after(state, update),
            self._deps.variant,
            self._model(state),
            self._timeout,
        )

    def invoke(self, input: State, config: RunnableConfig | None = None, **_: Any) -> Any:
        started = time.perf_counter()  # the node's wall time counts toward max_run_seconds
        tracing.node_entered(self._node, input, self._deps.variant, None)
        try:
            result = self._body(input, config or {}, self._deps)
            update = drive(result) if isinstance(result, GeneratorType) else result
        except BaseException as error:
            tracing.node_failed(self._node, input, error)
            raise
        return self._done(input, self._traced(input, update), time.perf_counter() - started)

    async def ainvoke(self, input: State, config: RunnableConfig | None = None, **_: Any) -> Any:
        started = time.perf_counter()
        tracing.node_entered(self._node, input, self._deps.variant, None)
        try:
            result = self._body(input, config or {}, self._deps)
            update = await adrive(result) if isinstance(result, GeneratorType) else result
        except BaseException as error:
            tracing.node_failed(self._node, input, error)
            raise
        return self._done(input, self._traced(input, update), time.perf_counter() - started)


# --- The routers: pure functions of the state after the node, returning node names. ---------


def route_after_step(after: Mapping[str, Any], next_node: str) -> Literal["__end__"] | str:
    """After a step in front of the model call: end when it ended the run (compaction's
    context_exhausted, a spent run budget), or go on."""
    return END if after.get("status") else next_node


def route_after_parse_reply(
    after: Mapping[str, Any], actions: frozenset[str], tools: frozenset[str], deps: Deps
) -> Literal["run_tool", "approve_action", "__end__"] | str:
    """End on a final answer or when stuck; a variant's own action goes to its node; a tool
    the run's ``approve`` setting names waits for a person first; anything else (a tool call or
    an unreadable reply) completes the turn in run_tool."""
    if after.get("status"):
        return END
    parsed = after["parsed"]
    if parsed["kind"] == "action" and parsed["action"] in actions:
        return str(parsed["action"])
    settings = deps.run_settings(after)
    if needs_approval(after, tools, settings) and not over_limit(
        after, settings, after["parsed"]["action"]
    ):
        return "approve_action"  # a call past its tool's limit is refused unasked, in run_tool
    return "run_tool"


def route_after_approve_action(
    after: Mapping[str, Any], at_cap: str, loop: str, deps: Deps
) -> Literal["run_tool", "force_answer", "stop_run", "__end__"] | str:
    """Approved or edited: the tool runs; answered or refused by the person: the turn is
    complete, as after any other turn (a run budget spent: the run ends)."""
    if after.get("status"):
        return END
    if runs_tool(after):
        return "run_tool"
    return route_after_turn(after, at_cap, loop, deps)


def route_after_turn(
    after: Mapping[str, Any], at_cap: str, loop: str, deps: Deps
) -> Literal["force_answer", "stop_run", "__end__"] | str:
    """After a completed turn: the end once a run budget is spent, the cap exit once
    ``max_turns`` turns are done, else round again."""
    if after.get("status"):
        return END
    return at_cap if turn_cap_reached(after, deps.run_settings(after)) else loop


def start_with_context(state: State, config: RunnableConfig, deps: Deps) -> dict[str, Any]:
    """start_run with the run's settings: the built values under the run's context (already
    checked: the context is the graph's own schema, built from the caller's mapping)."""
    context = get_runtime().context
    chosen: dict[str, Any] = vars(context) if context is not None else {}
    return start_run(state, config, deps, deps.settings.over(chosen))


# The node each cap exit names.
AT_CAP: dict[str, Body] = {"force_answer": force_answer, "stop_run": stop_run}


def assemble(variant: Variant, deps: Deps, context_schema: type) -> StateGraph:
    """The variant's graph, not yet compiled."""
    builder = StateGraph(State, context_schema=context_schema, input_schema=InputState)
    once = [s for s in variant.before_model if not s.every_turn]
    looped = [s for s in variant.before_model if s.every_turn]
    loop = looped[0].name if looped else "call_model"
    actions = frozenset(a.name for a in variant.actions)
    chain = ["start_run", *(s.name for s in (*once, *looped)), "call_model"]

    builder.add_node("start_run", Node("start_run", start_with_context, deps))
    for step, next_node in zip((*once, *looped), chain[2:], strict=True):
        # Any step may end the run: its own way (can_end), or by spending a run budget.
        route = partial(route_after_step, next_node=next_node)
        node = Node(step.name, step.body, deps, route)
        builder.add_node(step.name, node, destinations=(next_node, END))
    builder.add_edge(START, "start_run")
    builder.add_edge("start_run", chain[1])
    builder.add_node("call_model", Node("call_model", call_model, deps))
    builder.add_edge("call_model", "parse_reply")

    parse_route = partial(
        route_after_parse_reply, actions=actions, tools=frozenset(deps.tools), deps=deps
    )
    builder.add_node(
        "parse_reply",
        Node("parse_reply", parse_reply, deps, parse_route),
        destinations=("run_tool", "approve_action", *sorted(actions), END),
    )
    approve_route = partial(route_after_approve_action, at_cap=variant.at_cap, loop=loop, deps=deps)
    builder.add_node(
        "approve_action",
        Node("approve_action", approve_action, deps, approve_route),
        destinations=("run_tool", loop, variant.at_cap, END),
    )
    turn_route = partial(route_after_turn, at_cap=variant.at_cap, loop=loop, deps=deps)
    for name, body in (("run_tool", run_tool), *((a.name, a.body) for a in variant.actions)):
        node = Node(name, body, deps, turn_route)
        builder.add_node(name, node, destinations=(loop, variant.at_cap, END))
    builder.add_node(variant.at_cap, Node(variant.at_cap, AT_CAP[variant.at_cap], deps))
    builder.add_edge(variant.at_cap, END)
    return builder
