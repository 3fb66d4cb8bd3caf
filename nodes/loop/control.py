"""The loop's control: starting a run, reading each reply, and the pure decisions the graph's
routers are made of (the routers themselves, which name nodes, are ``routing``'s).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import get_runtime
from langgraph.types import Overwrite

from reactgraph.nodes.chatview.chat import is_new_question
from reactgraph.nodes.chatview.questions import content_parts, unread_note
from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.loop.middleware.scope import current
from reactgraph.nodes.loop.model import read_reply
from reactgraph.nodes.reading.toolcalls import canonical_args
from reactgraph.nodes.vocabulary.effects import Effect
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.nodes.vocabulary.state import ParsedReply, State, Turn, TurnKind
from reactgraph.nodes.vocabulary.turns import new_turn

logger = logging.getLogger(__name__)


def question_of(state: Mapping[str, Any]) -> str | None:
    """The run's question: the text of a human message a chat client just sent, else
    ``question``."""
    messages = state.get("messages") or []
    if is_new_question(messages):
        text, _ = content_parts(messages[-1].content)
        return text if text.strip() else None
    question = state.get("question")
    return question if isinstance(question, str) and question.strip() else None


def start_run(
    state: State, config: RunnableConfig, deps: Deps, settings: RunSettings
) -> dict[str, Any]:
    """Begin a run: fix its settings and thread id, and clear what a previous run on the same
    thread left behind (a resumed run does not come through here)."""
    question = question_of(state)
    if question is None:
        raise ValueError("the input needs a question: a non-empty 'question' or a human message")
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id") or uuid.uuid4().hex
    logger.info("run on thread %s: %s", thread_id, question)
    # The question is stored once a run: written again (and stored again) only when it came
    # from a chat message rather than the input's own "question".
    fixed = {} if question == state.get("question") else {"question": question}
    messages = state.get("messages") or []
    unread = content_parts(messages[-1].content)[1] if is_new_question(messages) else []
    if unread:
        logger.warning("the question's %s went unread: only text is read", unread_note(unread))
    return {
        **fixed,
        # A list of names (``approve``) as a list: what a checkpointer gives back.
        "settings": settings.as_dict(),
        "thread_id": str(thread_id),
        "run": (state.get("run") or 0) + 1,
        "turns": Overwrite([]),
        "compactions": Overwrite([]),
        "reply": None,
        "parsed": None,
        "answer": None,
        "status": None,
        "summary": None,
        "notes": None,
        "structured_answer": None,
    }


def begin_run(
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """``start_run`` with the run's settings (the built values under the run's context, already
    checked: the context is the graph's own schema, built from the caller's mapping), then the
    ``before_agent`` hooks of the loop's middleware on the run as it begins."""
    context = get_runtime().context
    chosen: dict[str, Any] = vars(context) if context is not None else {}
    settings = deps.settings.over(chosen)
    update = start_run(state, config, deps, settings)
    scope = current(state, config, deps)
    scope.settings = settings
    begun = yield from deps.chain.before_agent({**state, **update}, scope)
    return {**update, **begun}


def call_key(reading: Mapping[str, Any]) -> tuple[Any, str]:
    """What makes two actions the same: the action and its input, or for a native tool call
    (``args``) the call's name and its arguments with their keys sorted; for a reply of
    several calls (``actions``), the set of its calls' keys (their order does not matter)."""
    several = reading.get("actions")
    if several:
        return None, repr(sorted(repr(call_key(call)) for call in several))
    args = reading.get("args")
    if args is not None:
        return reading["action"], canonical_args(args)
    return reading["action"], reading["action_input"] or ""


def calls_key(calls: Sequence[Mapping[str, Any]] | None) -> list[tuple[str, str, str]]:
    """A reply's tool calls as compared word for word: names, arguments, errors (not ids)."""
    return [(c["name"], canonical_args(c["args"]), c.get("error", "")) for c in calls or []]


def repeats(
    turns: Sequence[Turn],
    parsed: ParsedReply,
    text: str,
    limit: int,
    calls: Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """How many times in a row (this reply included, at most ``limit``) the same action with
    the same input came, or the same unreadable reply word for word (its tool calls too). Only
    the last ``limit`` turns are looked at."""
    if parsed["kind"] == "answer":
        return 0
    count = 1
    key = call_key(parsed) if parsed["kind"] == "action" else (text, calls_key(calls))
    for index in range(len(turns) - 1, max(len(turns) - limit + 1, 0) - 1, -1):
        turn = turns[index]
        if parsed["kind"] == "action":
            same = turn["kind"] == "action" and call_key(turn) == key
        else:
            same = (
                turn["kind"] == "invalid"
                and (turn["text"], calls_key(turn.get("tool_calls"))) == key
            )
        if not same:
            break
        count += 1
    return count


def empty_twice(turns: Sequence[Turn], reply: Mapping[str, Any]) -> bool:
    """An empty reply right after an empty reply (no text, no tool call): the model keeps
    returning nothing."""
    if reply["text"] or reply.get("tool_calls") or not turns:
        return False
    last = turns[-1]
    return last["kind"] == "invalid" and not last["text"] and not last.get("tool_calls")


def parse_reply(state: State, config: RunnableConfig, deps: Deps) -> dict[str, Any]:
    """Parse the latest reply once; a final answer or a stuck repeat ends the run here."""
    reply = state["reply"]
    if reply is None and state.get("status"):
        return {}  # the run's time ran out in the model call (``budgets``): nothing to read
    if reply is None:
        if state.get("status"):
            return {}  # the run ended before its call (a middleware's: a spent budget)
        raise ValueError("parse_reply needs a model reply in the state")
    settings = deps.run_settings(state)
    parsed = read_reply(reply, deps, settings)  # a reply cut at the cap is not read
    update: dict[str, Any] = {"parsed": parsed}
    turns = state.get("turns") or []
    limit = settings.stuck_repeats
    calls = reply.get("tool_calls")
    if state.get("status"):
        # The call spent the run's budget (``budgets``): its reply is kept, and its answer if
        # it gave one, but nothing it asked for runs.
        kind: TurnKind = "answer" if parsed["kind"] == "answer" else parsed["kind"]
        update["turns"] = [new_turn(state, kind, reply=reply, parsed=parsed)]
        if parsed["kind"] == "answer":
            update["answer"] = parsed["answer"]
    elif parsed["kind"] == "answer":
        update["turns"] = [new_turn(state, "answer", reply=reply, parsed=parsed)]
        update.update(answer=parsed["answer"], status="answered")
        if "structured_answer" in parsed:
            update["structured_answer"] = parsed["structured_answer"]
    elif repeats(turns, parsed, reply["text"], limit, calls) >= limit or empty_twice(turns, reply):
        logger.warning("stuck: the same reply again: %r", reply["text"][:200])
        update["turns"] = [new_turn(state, "stuck", reply=reply, parsed=parsed)]
        update["status"] = "stuck"
    return update


def turn_cap_reached(state: Mapping[str, Any], settings: RunSettings) -> bool:
    """Whether the run has used its ``max_turns`` turns."""
    return len(state.get("turns") or []) >= settings.max_turns


def stop_run(state: State, config: RunnableConfig, deps: Deps) -> dict[str, Any]:
    """The cap exit that makes no forced call: the state (and any notes) carry the work to the
    next run on the thread."""
    logger.info("turn cap reached; stopping early")
    return {"status": "stopped_early"}
