"""A fork never replays a person's decision: a decision is given for one execution.

A run from a checkpoint other than the thread's newest (``invoke(None, {"configurable":
{"thread_id": t, "checkpoint_id": c}})``, the LangGraph server's ``runs.wait(...,
checkpoint_id=c)``, Studio's "re-run from here") whose next step is ``run_tool`` for an Action a
person approved or edited would run that Action again with no one asked. Before such a run the
graph writes, as a fork of that checkpoint, the Action as the model proposed it (the decision
left out, an edit's input put back) routed to ``approve_action``, and the run goes on from that
fork: it stops there and asks again (``reactgraph.graph.ReactGraph``). A fork from before the
decision asks by itself, and the thread's newest checkpoint (a run killed between the decision
and the tool) goes on with the decision it was given.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command, StateSnapshot, StateUpdate

from reactgraph.state_edits import WAITING_NODE

_RUN_TOOL = "run_tool"
_RAN = ("approve", "edit")  # the decisions that let the tool run


def decided_action(snapshot: StateSnapshot) -> dict[str, Any] | None:
    """The parsed Action whose tool runs next on a person's decision (approved or edited),
    or None."""
    if not any(task.name == _RUN_TOOL for task in snapshot.tasks):
        return None
    parsed = snapshot.values.get("parsed") or {}
    approval = parsed.get("approval") or {}
    return parsed if approval.get("decision") in _RAN else None


def undecided(parsed: dict[str, Any]) -> dict[str, Any]:
    """The Action as the model proposed it: no decision, an edit's tool and input put back."""
    approval = parsed["approval"]
    proposed = {k: v for k, v in parsed.items() if k != "approval"}
    if approval.get("decision") == "edit" and "proposed_input" in approval:
        proposed["action"] = approval.get("proposed_action", proposed.get("action"))
        proposed["action_input"] = approval["proposed_input"]
    return proposed


def is_fork(config: RunnableConfig, newest: Any) -> bool:
    """Whether ``config`` names a checkpoint other than the thread's newest (``newest``, the
    saver's tuple of the thread)."""
    wanted = (config.get("configurable") or {}).get("checkpoint_id")
    if wanted is None or newest is None:
        return False
    return wanted != newest.config["configurable"].get("checkpoint_id")


def ask_again(parsed: dict[str, Any]) -> list[list[StateUpdate]]:
    """The edit that makes the fork ask again: as ``parse_reply`` would have, the proposed
    Action routed to ``approve_action``."""
    update = Command(update={"parsed": undecided(parsed)}, goto=WAITING_NODE)
    return [[StateUpdate(update, "parse_reply")]]  # type: ignore[arg-type]


def from_fork(config: RunnableConfig, written: RunnableConfig) -> RunnableConfig:
    """``config`` moved to the fork ``written`` (its new checkpoint)."""
    configurable = {**(config.get("configurable") or {}), **written["configurable"]}
    return {**config, "configurable": configurable}


def newest(config: RunnableConfig) -> RunnableConfig:
    """``config`` naming the thread's newest checkpoint (no ``checkpoint_id``)."""
    configurable = dict(config.get("configurable") or {})
    configurable.pop("checkpoint_id", None)
    configurable.pop("checkpoint_map", None)
    return {**config, "configurable": configurable}


def rooted(config: RunnableConfig) -> RunnableConfig:
    """``config`` with the root namespace named, as every checkpointer's ``put`` needs it (the
    LangGraph server's run configs leave it out)."""
    return {**config, "configurable": {"checkpoint_ns": "", **(config.get("configurable") or {})}}
