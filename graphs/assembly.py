"""The one assembly: any ``Variant`` becomes a graph here, with the loop's middleware in order.

    START -> start_run -> [once-per-run steps] -> [every-turn steps] -> call_model
          -> parse_reply -+-> END                        (final answer, stuck)
                          +-> approve_action -> run_tool (approved, edited) | as a turn below
                          +-> run_tool | <action> -+-> first every-turn step, else call_model
                                                   +-> force_answer | stop_run -> END   (cap)

``approve_action`` is reached only for an Action the approval gate holds (a tool the run's
``approve`` setting names); a response or a refusal completes the turn there, as a tool's
Observation would.

Every node runs through the loop's middleware (``loop_middleware``: the list below is the one
place the loop's features are named), so every node's update is settled by the budgets (a
spent run budget sets ``budget_exhausted``) and every router after a node ends the run on a
status: no further model call or tool runs.

A node with several possible next nodes returns ``Command(update, goto)``: its router runs in
the same step (``reactgraph.nodes.loop.shell``). The destinations are declared, so drawings
and Studio still show every exit as a conditional edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache, partial
from typing import Any, TypedDict, get_type_hints

from langgraph.graph import END, START, StateGraph

from reactgraph.nodes.calling.providers import model_name
from reactgraph.nodes.loop.acting import run_tool
from reactgraph.nodes.loop.control import begin_run, parse_reply, stop_run
from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.loop.middleware.approval import ApprovalGate, approve_action
from reactgraph.nodes.loop.middleware.budgets import Budgets
from reactgraph.nodes.loop.middleware.caching import PromptCache
from reactgraph.nodes.loop.middleware.conversation import Conversation
from reactgraph.nodes.loop.middleware.decoding import Decoding
from reactgraph.nodes.loop.middleware.ladder import Ladder
from reactgraph.nodes.loop.middleware.seam import Chain, Middleware
from reactgraph.nodes.loop.middleware.tracing import Tracing
from reactgraph.nodes.loop.model import call_model, force_answer
from reactgraph.nodes.loop.routing import (
    route_after_approve_action,
    route_after_parse_reply,
    route_after_step,
    route_after_turn,
)
from reactgraph.nodes.loop.shell import Body, Node
from reactgraph.nodes.vocabulary.state import InputState, State
from reactgraph.spec import Variant


def loop_middleware(
    variant: str,
    model: Any,
    tools: Sequence[str],
    application: Sequence[Middleware] = (),
    ladder: Ladder | None = None,
) -> Chain:
    """The loop's middleware, outermost first. The application's sits after the conversation's
    records and before the loop's own wrappers, so every call its handlers make passes through
    all of them: the approval check, the model ladder, the grammar, the prefix-cache hint, the
    budgets (each actual
    call counted), the traces (one span per actual call). ``before_*`` hooks run in this order,
    ``after_*`` ones (the settling and recording of each node's update too) in reverse: the
    budgets settle a node's spend first, the ladder then moves up on what the node's update
    says (a stuck ending, unusable replies), the traces and the conversation record the run as
    it stands. The ladder (``escalate_to``; absent without it) sees a model call's fault after
    the provider's retries and an application's middleware (a fallback) sees its last rung's;
    the grammar, the budgets and the traces inside it constrain, count and trace every rung's
    call."""
    return Chain(
        [
            Conversation(),  # each run's record on the thread (history_runs)
            *application,  # the application's, in its own order
            ApprovalGate(tools),  # an Action waits for a person; no undecided call runs
            *([ladder] if ladder is not None else []),  # the model ladder (escalate_to)
            Decoding(),  # the grammar, or the tools bound strict (constrained_decoding)
            PromptCache(),  # the prefix-cache hint a server takes (prompt_cache_key, cache_prompt)
            Budgets(tools),  # the spend, the limits, the time left, the stop
            Tracing(variant, model_name(model), tools),  # OpenTelemetry spans and events
        ]
    )


# The node each cap exit names.
AT_CAP: dict[str, Body] = {"force_answer": force_answer, "stop_run": stop_run}


# The model ladder's fields (``escalate_to``), which a graph without a ladder never has.
LADDER_FIELDS = frozenset({"rung", "escalations"})


def _has_ladder(deps: Deps) -> bool:
    return any(isinstance(m, Ladder) for m in deps.chain.middleware)


def graph_state(deps: Deps) -> type:
    """The graph's state: ``State``, but without the model ladder's fields in a graph with no
    ladder. LangGraph works on each channel of a graph at every step, one never written too:
    these two cost a graph without a ladder about 600 bytecodes a turn, 1% of a turn (a
    client's edit of them is refused all the same: ``state_edits.LOOP_FIELDS``)."""
    return State if _has_ladder(deps) else _state_of(LADDER_FIELDS)


@cache
def _state_of(never: frozenset[str]) -> type:
    """``State`` without the fields ``never`` (their types and reducers as they are), made
    once per set."""
    fields = get_type_hints(State, include_extras=True)
    typed_dict: Any = TypedDict  # made from a computed dict: mypy checks literal ones only
    kept = {name: hint for name, hint in fields.items() if name not in never}
    state = typed_dict("State", kept, total=False)
    state.__doc__ = State.__doc__
    return state


def node_input(deps: Deps) -> type:
    """What every node of this graph reads: the whole ``State`` but the fields it never has (the
    model ladder's without a ladder, the carried-over notes' flag without notes). LangGraph
    reads each field of a node's input at every step, an absent one at the cost of an exception
    raised and caught; nothing of this graph would read these."""
    never: set[str] = set()
    if not _has_ladder(deps):
        never |= LADDER_FIELDS
    if not deps.view.notes:
        never.add("resumed_notes")
    return _state_without(frozenset(never)) if never else State


@cache
def _state_without(never: frozenset[str]) -> type:
    """``State``'s fields but ``never``, made once per set. Each is typed ``Any``: a node's
    input schema says which of the graph's channels the node reads (their reducers are the
    state's own), and LangGraph reads its type hints again at every build, where ``State``'s
    nested ones cost about as much as all the rest of the build."""
    names = [name for name in State.__annotations__ if name not in never]
    typed_dict: Any = TypedDict  # made from a computed dict: mypy checks literal ones only
    return typed_dict("NodeInput", dict.fromkeys(names, Any), total=False)


def assemble(variant: Variant, deps: Deps, context_schema: type) -> StateGraph:
    """The variant's graph, not yet compiled."""
    builder: StateGraph = StateGraph(
        graph_state(deps), context_schema=context_schema, input_schema=InputState
    )
    reads = node_input(deps)
    add_node = partial(builder.add_node, input_schema=reads)
    once = [s for s in variant.before_model if not s.every_turn]
    looped = [s for s in variant.before_model if s.every_turn]
    loop = looped[0].name if looped else "call_model"
    actions = frozenset(a.name for a in variant.actions)
    chain = ["start_run", *(s.name for s in (*once, *looped)), "call_model"]

    add_node("start_run", Node("start_run", begin_run, deps))
    for step, next_node in zip((*once, *looped), chain[2:], strict=True):
        # Any step may end the run: its own way (can_end), or by spending a run budget.
        route = partial(route_after_step, next_node=next_node)
        node = Node(step.name, step.body, deps, route)
        add_node(step.name, node, destinations=(next_node, END))
    builder.add_edge(START, "start_run")
    builder.add_edge("start_run", chain[1])
    add_node("call_model", Node("call_model", call_model, deps))
    builder.add_edge("call_model", "parse_reply")

    parse_route = partial(route_after_parse_reply, actions=actions, deps=deps)
    add_node(
        "parse_reply",
        Node("parse_reply", parse_reply, deps, parse_route),
        destinations=("run_tool", "approve_action", *sorted(actions), END),
    )
    approve_route = partial(route_after_approve_action, at_cap=variant.at_cap, loop=loop, deps=deps)
    add_node(
        "approve_action",
        Node("approve_action", approve_action, deps, approve_route),
        destinations=("run_tool", loop, variant.at_cap, END),
    )
    turn_route = partial(route_after_turn, at_cap=variant.at_cap, loop=loop, deps=deps)
    for name, body in (("run_tool", run_tool), *((a.name, a.body) for a in variant.actions)):
        node = Node(name, body, deps, turn_route)
        add_node(name, node, destinations=(loop, variant.at_cap, END))
    add_node(variant.at_cap, Node(variant.at_cap, AT_CAP[variant.at_cap], deps))
    builder.add_edge(variant.at_cap, END)
    return builder
