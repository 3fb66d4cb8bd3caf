"""The chat view of the loop: ``messages``, as chat clients (Studio's chat, Agent Chat UI, the
SDK's ``useStream``) expect them.

``turns`` is the source of truth; ``messages`` is derived from it, a step at a time, by one pure
function (``chat_update``), so nodes never write messages themselves. A run's question is a
human message; each model reply an AI message (written as soon as the model answered, with its
one tool call as soon as it is parsed), followed by a tool message holding the Observation as
the model saw it; a compaction a message holding its summary; the final answer's reply, as it
streamed, the last AI message. Messages accumulate across the runs of a thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from reactgraph.nodes.chatview.linebreaks import hard
from reactgraph.nodes.chatview.questions import content_parts, unread_note
from reactgraph.nodes.loop import prompts
from reactgraph.nodes.loop.endings import ENDINGS
from reactgraph.nodes.loop.state import CompactionRecord, Turn
from reactgraph.nodes.running.tool_io import Uncallable, model_json, visible_args

# Ids of the human messages a run adds for a question given as ``{"question": ...}``.
QUESTION_ID = "rg-question-"
# The tool-call name of a reply that named no valid action (its Observation says why).
INVALID = "invalid_reply"
# The last AI message of a run that ended without an answer (see ``reactgraph.nodes.loop.endings``).
_ENDINGS = {e.status: e.chat for e in ENDINGS.values() if e.chat is not None}


def is_new_question(messages: Sequence[BaseMessage]) -> bool:
    """Whether the thread's last message is a question a client sent (not one a run added)."""
    if not messages:
        return False
    last = messages[-1]
    return last.type == "human" and not (last.id or "").startswith(QUESTION_ID)


def arg_names(name: str, tools: Mapping[str, BaseTool]) -> list[str]:
    """The arguments the model fills for the action ``name`` (none for a name of no tool)."""
    tool = tools.get(name)
    try:
        return list(visible_args(tool)) if tool is not None else []
    except Uncallable:
        return []


def tool_args(reading: Mapping[str, Any], tools: Mapping[str, BaseTool]) -> dict[str, Any]:
    """A turn's action input (a turn record or the parse of its reply) as a tool call's
    arguments: a multi-argument tool's JSON object, else the input under the tool's one
    argument (``input`` for the variant's own actions)."""
    text = reading["action_input"] or ""
    keys = arg_names(reading["action"] or INVALID, tools)
    if len(keys) > 1:
        try:
            value = model_json(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return {keys[0] if len(keys) == 1 else "input": text}


def call_args(reading: Mapping[str, Any], tools: Mapping[str, BaseTool]) -> dict[str, Any]:
    """A turn's action's arguments: a native call's as the model sent them (the tool_calls
    format), else read from its input as the text format has it."""
    args = reading.get("args") if reading["action"] else None
    return args if isinstance(args, dict) else tool_args(reading, tools)


def _tool_call(
    reading: Mapping[str, Any], call_id: str, tools: Mapping[str, BaseTool]
) -> dict[str, Any]:
    """A turn's action as a tool call (``call_args``)."""
    name = reading["action"] or INVALID
    return {"name": name, "args": call_args(reading, tools), "id": call_id, "type": "tool_call"}


def shown(text: str) -> str:
    """A reply as chat clients render it: Markdown, each of the model's lines on its own line
    (a hard break, two trailing spaces, where Markdown would join them)."""
    return hard(text) if text else prompts.CHAT_EMPTY_REPLY


def reply_message(
    reply: Mapping[str, Any],
    base: str,
    reading: Mapping[str, Any] | None = None,
    tools: Mapping[str, BaseTool] | None = None,
) -> AIMessage:
    """The model's reply as the turn's AI message, with the id its streamed tokens carry; with
    ``reading`` (an action or an unreadable reply) it holds the turn's one tool call."""
    ai_id = reply.get("message_id") or f"{base}-ai"
    # A native tool call with no text is not an empty reply: its card says what it did.
    content = "" if not reply["text"] and reply.get("tool_calls") else shown(reply["text"])
    if reading is None:
        return AIMessage(content, id=ai_id)
    call = _tool_call(reading, f"call-{base}", tools or {})
    return AIMessage(content, id=ai_id, tool_calls=[call])


def tool_message(turn: Turn, base: str) -> ToolMessage:
    """A completed turn's Observation, exactly as the model saw it (an error when a person
    refused the action, as LangChain's human-in-the-loop middleware marks it)."""
    refused = turn.get("approval", {}).get("decision") == "reject"
    return ToolMessage(
        turn["observation"] or "",
        tool_call_id=f"call-{base}",
        name=turn["action"] or INVALID,
        id=f"{base}-tool",
        status=_TOOL_STATUS[refused],
    )


# A tool message's own status (LangChain's): not how a run ended.
_TOOL_STATUS: dict[bool, Any] = {True: "error", False: "success"}


def compaction_message(record: CompactionRecord, run: int) -> BaseMessage:
    """A compaction, as a message holding its summary."""
    text = record["summary"] or prompts.CHAT_NO_SUMMARY
    content = prompts.CHAT_COMPACTION.format(turn=record["turn"], summary=text)
    return AIMessage(content, id=f"rg-{run}-compaction-{record['turn']}")


def _question_messages(state: Mapping[str, Any], update: Mapping[str, Any], run: int) -> list:
    """A new run's question as the human's turn, or a note on what of the client's question
    went unread."""
    messages = state.get("messages") or []
    if not is_new_question(messages):
        # A question given as {"question": ...}: the chat view shows it as the human's turn.
        question = update.get("question", state.get("question"))  # written only if new
        return [HumanMessage(question, id=f"{QUESTION_ID}{run}")]
    _, others = content_parts(messages[-1].content)
    if not others:
        return []
    note = prompts.CHAT_UNREAD.format(blocks=unread_note(others))
    return [AIMessage(note, id=f"rg-{run}-unread")]


def chat_update(
    state: Mapping[str, Any], update: Mapping[str, Any], tools: Mapping[str, BaseTool]
) -> tuple[BaseMessage, ...] | list[BaseMessage]:
    """The messages a node's update adds to the chat view, so it follows the loop as it runs:
    the reply's AI message once the model has answered, its tool call once the reply is parsed
    (a list, which replaces the message by id), the tool message once the tool returned. New
    messages come as a tuple, which the ``messages`` reducer appends without looking up
    their (new) ids."""
    run = update.get("run") or state.get("run") or 1
    number = len(state.get("turns") or []) + 1
    base = f"rg-{run}-{number}"
    parsed = update.get("parsed")
    if parsed is not None and "turns" not in update and not update.get("status"):
        # parse_reply, an action or an unreadable reply: the message gets its tool call.
        return [reply_message(state["reply"], base, parsed, tools)]
    added: list[BaseMessage] = []
    if "run" in update:
        added.extend(_question_messages(state, update, run))
    compactions = update.get("compactions")
    for record in compactions if isinstance(compactions, list) else []:
        added.append(compaction_message(record, run))
    turns = update.get("turns")
    for turn in turns if isinstance(turns, list) else []:
        base = f"rg-{run}-{turn['turn']}"
        if turn["observation"] is not None:
            added.append(tool_message(turn, base))
        elif turn["kind"] == "forced":
            added.append(reply_message(update["reply"], base))
    if update.get("reply") is not None and parsed is None:
        added.append(reply_message(update["reply"], base))  # call_model: the reply so far
    ending = _ENDINGS.get(cast(Any, update.get("status")))
    if ending is not None:
        added.append(AIMessage(ending, id=f"rg-{run}-end"))
    return tuple(added)
