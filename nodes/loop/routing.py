"""The routers: pure functions of the state after a node, naming the node that runs next. A
router is ``route_after_<node>``, and its ``Literal`` names the exits Studio draws."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.graph import END

from reactgraph.nodes.loop.control import turn_cap_reached
from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.loop.middleware.approval import runs_tool


def route_after_step(after: Mapping[str, Any], next_node: str) -> Literal["__end__"] | str:
    """After a step in front of the model call: end when it ended the run (compaction's
    context_exhausted, a spent run budget), or go on."""
    return END if after.get("status") else next_node


def route_after_parse_reply(
    after: Mapping[str, Any], actions: frozenset[str], deps: Deps
) -> Literal["run_tool", "approve_action", "__end__"] | str:
    """End on a final answer or when stuck; a variant's own action goes to its node; an Action
    the loop's middleware holds for a person (the approval gate: a tool the run's ``approve``
    setting names, unless it will be refused unasked, past its limit) waits for that person;
    anything else (a tool call or an unreadable reply) completes the turn in run_tool."""
    if after.get("status"):
        return END
    parsed = after["parsed"]
    if parsed["kind"] == "action" and parsed["action"] in actions and not parsed.get("actions"):
        return str(parsed["action"])
    if deps.chain.pauses(after, deps.run_settings(after)):
        return "approve_action"
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
