"""The chat view of the loop: ``messages``, as chat clients (Studio's chat, Agent Chat UI, the
SDK's ``useStream``) expect them.

``turns`` is the source of truth; ``messages`` is derived from it, a step at a time, by one pure
function (``chat_update``), so nodes never write messages themselves. A run's question is a
human message; each model reply an AI message (written as soon as the model answered, with its
one tool call as soon as it is parsed), followed by a tool message holding the Observation as
the model saw it; a compaction a message holding its summary; a run budget's 80% warning a
message of its own; the final answer's reply, as it streamed, the last AI message (or, for a run
that ended without one, a message saying how it ended). Messages accumulate across the runs of a
thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from reactgraph.nodes.calling.linebreaks import hard
from reactgraph.nodes.chatview.questions import content_parts, unread_note
from reactgraph.nodes.running.tool_io import Uncallable, model_json, visible_args
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.endings import chat_ending
from reactgraph.nodes.vocabulary.state import CompactionRecord, Turn

# Ids of the human messages a run adds for a question given as ``{"question": ...}``.
QUESTION_ID = "rg-question-"
# The tool-call name of a reply that named no valid action (its Observation says why).
INVALID = "invalid_reply"


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
    return AIMessage(content, id=ai_id, tool_calls=_tool_calls(reading, base, tools or {}))


def _tool_calls(
    reading: Mapping[str, Any], base: str, tools: Mapping[str, BaseTool]
) -> list[dict[str, Any]]:
    """A read reply's tool calls: each of a reply of several calls (``parallel_tool_calls``),
    else its one."""
    several = reading.get("actions")
    if several:
        return [_tool_call(r, f"call-{base}-{i}", tools) for i, r in enumerate(several, 1)]
    return [_tool_call(reading, f"call-{base}", tools)]


def _given_calls(
    state: Mapping[str, Any], base: str, reading: Mapping[str, Any], tools: Mapping[str, BaseTool]
) -> AIMessage:
    """The read reply's AI message, given its tool calls: a copy of the message ``call_model``
    wrote (the same reply, so the same text), which skips validating it again; made anew when
    the chat's last message is not that one (a budget's ending came after it)."""
    reply = state["reply"]
    messages = state.get("messages")
    last = messages[-1] if messages else None
    if (
        type(last) is AIMessage
        and not last.tool_calls
        and last.id == (reply.get("message_id") or f"{base}-ai")
    ):
        return last.model_copy(update={"tool_calls": _tool_calls(reading, base, tools)})
    return reply_message(reply, base, reading, tools)


def not_run_message(turn: Turn, base: str) -> ToolMessage:
    """The tool result of a turn's Action that never ran: the run spent its budget first."""
    name = turn["action"] or INVALID
    return ToolMessage(
        prompts.CHAT_NOT_RUN,
        tool_call_id=f"call-{base}",
        name=name,
        id=f"{base}-tool",
        status=_TOOL_STATUS[True],
    )


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


def tool_messages(turn: Turn, base: str) -> list[ToolMessage]:
    """A completed turn's Observations: one tool message per call of a turn of several
    (``parallel_tool_calls``), each answering its call; else ``tool_message``'s one."""
    several = turn.get("actions")
    if not several:
        return [tool_message(turn, base)]
    return [
        ToolMessage(
            record["observation"],
            tool_call_id=f"call-{base}-{i}",
            name=record["action"] or INVALID,
            id=f"{base}-tool-{i}",
            status=_TOOL_STATUS[record.get("approval", {}).get("decision") == "reject"],
        )
        for i, record in enumerate(several, 1)
    ]


def decided_message(turn: Turn, said: str, base: str) -> AIMessage:
    """What a person typed in the chat to decide on the turn's Action, and what it decided."""
    decided = prompts.DECIDED[turn["approval"]["decision"]]
    action = f"{turn['action']}[{turn['action_input'] or ''}]"
    text = prompts.CHAT_DECIDED.format(said=said, decided=decided, action=action)
    return AIMessage(text, id=f"{base}-decided")


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
    state: Mapping[str, Any],
    update: Mapping[str, Any],
    tools: Mapping[str, BaseTool],
    notes: Sequence[str] = (),
) -> tuple[BaseMessage, ...] | list[BaseMessage]:
    """The messages a node's update adds to the chat view, so it follows the loop as it runs:
    the reply's AI message once the model has answered, its tool call once the reply is parsed
    (a list, which replaces the message by id), the tool message once the tool returned, then
    ``notes`` (the run budgets' warnings the Observation gave, shown on their own). New
    messages come as a tuple, which the ``messages`` reducer appends without looking up
    their (new) ids.

    A run that spent its budget ends where it is: a reply read after that keeps its Action as a
    tool call, answered "not run", and the run's ending comes after it (a reply that spent the
    budget itself is read by ``parse_reply`` before the run ends)."""
    run = int(update.get("run") or state.get("run") or 1)  # a new run's from its update
    number = len(state.get("turns") or ()) + 1
    base = f"rg-{run}-{number}"
    parsed = update.get("parsed")
    if parsed is not None and "turns" not in update and not update.get("status"):
        # parse_reply, an action or an unreadable reply: the message gets its tool call.
        return [_given_calls(state, base, parsed, tools)]
    added = _question_messages(state, update, run) if "run" in update else []
    added.extend(compaction_message(record, run) for record in _listed(update, "compactions"))
    replaced: list[BaseMessage] = []
    for turn in _listed(update, "turns"):
        adds, replaces = _turn_messages(turn, run, state, update, tools)
        added.extend(adds)
        replaced.extend(replaces)
    added.extend(
        AIMessage(note, id=f"rg-{run}-{number}-budget-{i}") for i, note in enumerate(notes)
    )
    awaits_reading = _awaits_reading(update)
    if awaits_reading:
        added.append(reply_message(update["reply"], base))  # call_model: the reply so far
    added.extend(_ending_messages(state, update, awaits_reading, run))
    if replaced:
        return [*replaced, *added]  # looked up by id: the reply's message gets its tool call
    return tuple(added)


def _listed(values: Mapping[str, Any], key: str) -> list[Any]:
    """A list field of a state or an update (``turns``, ``compactions``); [] when absent."""
    found = values.get(key)
    return found if isinstance(found, list) else []


def _awaits_reading(update: Mapping[str, Any]) -> bool:
    """Whether the update brings a reply not yet read (call_model's)."""
    return (
        update.get("reply") is not None and update.get("parsed") is None and "turns" not in update
    )


def _turn_messages(
    turn: Turn,
    run: int,
    state: Mapping[str, Any],
    update: Mapping[str, Any],
    tools: Mapping[str, BaseTool],
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """A completed turn's messages: those it adds (its tool messages and a decision typed in
    the chat; a forced answer's reply; an Action the run's end left not run), and those it
    replaces by id (the reply's message, given its tool call)."""
    base = f"rg-{run}-{turn['turn']}"
    if turn["observation"] is not None:
        said = turn.get("approval", {}).get("said")
        # A decision typed in the chat: its trace, after the result.
        decided = [decided_message(turn, said, base)] if said else []
        return [*tool_messages(turn, base), *decided], []
    if turn["kind"] == "forced":
        return [reply_message(update["reply"], base)], []
    if turn["kind"] == "action":  # the run ended before its Action ran
        reply = update.get("reply") or state["reply"]
        return [not_run_message(turn, base)], [reply_message(reply, base, turn, tools)]
    return [], []


def _ending_messages(
    state: Mapping[str, Any], update: Mapping[str, Any], awaits_reading: bool, run: int
) -> list[BaseMessage]:
    """How the run ended, when this update ends it (or read the reply of a run that spent its
    budget), as a message; none otherwise."""
    status = None if awaits_reading else update.get("status")
    if status is None and update.get("parsed") is not None:
        status = state.get("status")  # the reading of a reply that spent the run's budget
    ending = chat_ending(status, update.get("budget") or state.get("budget"))
    return [] if ending is None else [AIMessage(ending, id=f"rg-{run}-end")]
