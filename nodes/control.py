"""The loop's control: starting a run, reading each reply, and the routers between nodes.

Routers are pure functions of the state returning ``Literal`` node names, so drawings of the
graph show every exit.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from reactgraph.nodes.deps import Deps
from reactgraph.nodes.parsing import parse_react
from reactgraph.nodes.settings import RunContext, resolve_settings
from reactgraph.nodes.state import ParsedReply, State, Turn
from reactgraph.nodes.transcript import new_turn

logger = logging.getLogger(__name__)


def start_run(
    state: State,
    config: RunnableConfig,
    runtime: Runtime[RunContext] | None = None,
    *,
    deps: Deps,
) -> dict[str, Any]:
    """Begin a run: fix its settings and thread id, and clear what a previous run on the same
    thread left behind (a resumed run does not come through here)."""
    question = state.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the input needs a non-empty 'question' string")
    context = runtime.context if runtime is not None else None
    settings = resolve_settings(deps.defaults, context)
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id") or uuid.uuid4().hex
    logger.info("run on thread %s: %s", thread_id, question)
    return {
        "settings": settings,
        "thread_id": str(thread_id),
        "turns": Overwrite([]),
        "compactions": Overwrite([]),
        "reply": None,
        "parsed": None,
        "answer": None,
        "status": None,
        "summary": None,
    }


def repeats(turns: list[Turn], parsed: ParsedReply) -> int:
    """How many times in a row (this reply included) the same action with the same input came."""
    if parsed["kind"] != "action":
        return 0
    count = 1
    for turn in reversed(turns):
        if turn["kind"] != "action":
            break
        if (turn["action"], turn["action_input"]) != (parsed["action"], parsed["action_input"]):
            break
        count += 1
    return count


def parse_reply(state: State, *, deps: Deps) -> dict[str, Any]:
    """Parse the latest reply once; a final answer or a stuck repeat ends the run here."""
    reply = state["reply"]
    if reply is None:
        raise ValueError("parse_reply needs a model reply in the state")
    parsed = parse_react(reply["text"], deps.action_names)
    update: dict[str, Any] = {"parsed": parsed}
    if parsed["kind"] == "answer":
        update["turns"] = [new_turn(state, "answer", reply=reply, parsed=parsed)]
        update.update(answer=parsed["answer"], status="answered")
    elif repeats(state.get("turns") or [], parsed) >= state["settings"]["stuck_repeats"]:
        logger.warning("stuck: %s[%s] repeated", parsed["action"], parsed["action_input"])
        update["turns"] = [new_turn(state, "stuck", reply=reply, parsed=parsed)]
        update["status"] = "stuck"
    return update


def route_after_parse_reply(state: State) -> Literal["run_tool", "__end__"]:
    """End on a final answer or when stuck; otherwise complete the turn."""
    return END if state.get("status") else "run_tool"


def route_after_run_tool(state: State) -> Literal["call_model", "force_answer"]:
    """Go on, or at the turn cap make the forced last call."""
    if len(state.get("turns") or []) >= state["settings"]["max_turns"]:
        return "force_answer"
    return "call_model"
