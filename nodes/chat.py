"""The chat view of the loop: ``messages``, as chat clients (Studio's chat, Agent Chat UI, the
SDK's ``useStream``) expect them.

``turns`` is the source of truth; ``messages`` is derived from it, a step at a time, by one pure
function (``chat_update``), so nodes never write messages themselves. A run's question is a
human message; each action turn an AI message with one tool call, followed by a tool message
holding the Observation as the model saw it; a compaction a message holding its summary; the
final answer the last AI message. Messages accumulate across the runs of a thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool

from reactgraph.nodes import prompts
from reactgraph.nodes.state import CompactionRecord, Turn
from reactgraph.nodes.statuses import ENDINGS

# Ids of the human messages a run adds for a question given as ``{"question": ...}``.
QUESTION_ID = "rg-question-"
# The tool-call name of a reply that named no valid action (its Observation says why).
INVALID = "invalid_reply"
# The last AI message of a run that ended without an answer (see ``reactgraph.nodes.statuses``).
_ENDINGS = {e.status: e.chat for e in ENDINGS.values() if e.chat is not None}


def is_new_question(messages: Sequence[BaseMessage]) -> bool:
    """Whether the thread's last message is a question a client sent (not one a run added)."""
    if not messages:
        return False
    last = messages[-1]
    return last.type == "human" and not (last.id or "").startswith(QUESTION_ID)


def _tool_call(turn: Turn, call_id: str, tools: Mapping[str, BaseTool]) -> dict[str, Any]:
    """The turn's action as a tool call: a multi-argument tool's JSON object, else the input
    under the tool's one argument (``input`` for the variant's own actions)."""
    name = turn["action"] or INVALID
    text = turn["action_input"] or ""
    tool = tools.get(name)
    keys = list(tool.args) if tool is not None else []
    if len(keys) > 1:
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return {"name": name, "args": value, "id": call_id, "type": "tool_call"}
    key = keys[0] if len(keys) == 1 else "input"
    return {"name": name, "args": {key: text}, "id": call_id, "type": "tool_call"}


def turn_messages(
    turn: Turn, run: int, answer: str | None, tools: Mapping[str, BaseTool]
) -> list[BaseMessage]:
    """One turn as chat messages."""
    base = f"rg-{run}-{turn['turn']}"
    ai_id = turn.get("message_id") or f"{base}-ai"
    if turn["observation"] is not None:
        call_id = f"call-{base}"
        return [
            AIMessage(turn["text"], id=ai_id, tool_calls=[_tool_call(turn, call_id, tools)]),
            ToolMessage(
                turn["observation"],
                tool_call_id=call_id,
                name=turn["action"] or INVALID,
                id=f"{base}-tool",
            ),
        ]
    if turn["kind"] in ("answer", "forced") and answer is not None:
        return [AIMessage(answer, id=ai_id)]
    return [AIMessage(turn["text"] or "(empty reply)", id=ai_id)]


def compaction_message(record: CompactionRecord, run: int) -> BaseMessage:
    """A compaction, as a message holding its summary."""
    text = record["summary"] or prompts.CHAT_NO_SUMMARY
    content = prompts.CHAT_COMPACTION.format(turn=record["turn"], summary=text)
    return AIMessage(content, id=f"rg-{run}-compaction-{record['turn']}")


def chat_update(
    state: Mapping[str, Any], update: Mapping[str, Any], tools: Mapping[str, BaseTool]
) -> tuple[BaseMessage, ...]:
    """The messages a node's update adds to the chat view: a tuple, which the ``messages``
    reducer appends without looking their (new) ids up."""
    run = update.get("run") or state.get("run") or 1
    added: list[BaseMessage] = []
    if "run" in update and not is_new_question(state.get("messages") or []):
        # A question given as {"question": ...}: the chat view shows it as the human's turn.
        question = update.get("question", state.get("question"))  # written only if new
        added.append(HumanMessage(question, id=f"{QUESTION_ID}{run}"))
    compactions = update.get("compactions")
    for record in compactions if isinstance(compactions, list) else []:
        added.append(compaction_message(record, run))
    turns = update.get("turns")
    for turn in turns if isinstance(turns, list) else []:
        added.extend(turn_messages(turn, run, update.get("answer"), tools))
    ending = _ENDINGS.get(update.get("status") or "")
    if ending is not None:
        added.append(AIMessage(ending, id=f"rg-{run}-end"))
    return tuple(added)
