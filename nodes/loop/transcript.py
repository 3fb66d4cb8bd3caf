"""The model's view of the transcript, and the turn records that make up the transcript.

``render_prompt`` is the one place that decides what the model sees. A variant's ``View`` says
which parts it shows: its notes, a window of recent turns, the latest summary.
"""

from __future__ import annotations

import functools
import json
import logging
import operator
import threading
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from reactgraph.nodes.loop import formats
from reactgraph.nodes.loop.earlier import earlier_block
from reactgraph.nodes.reading.answer_schema import answer_kind, schema_text
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.run_settings import (
    NotesSettings,
    RunSettings,
    narrowed,
    notes_limit,
)
from reactgraph.nodes.vocabulary.state import CallRecord, State, Turn
from reactgraph.nodes.vocabulary.view import View

logger = logging.getLogger(__name__)


# Messages are immutable values and a prompt is rebuilt every turn from the same turns: caching
# them keeps a turn's cost independent of the transcript's length.
@functools.lru_cache(maxsize=8192)
def _turn_messages(
    text: str, observation: str | None, edited: str | None = None, labelled: bool = False
) -> tuple[BaseMessage, ...]:
    reply = AIMessage(text or "(empty reply)")
    if observation is None:
        return (reply,)
    if labelled:  # several calls' Observations, each labelled already
        return (reply, HumanMessage(observation))
    if edited is not None:  # the model's own Action is not what ran: it is told what did
        shown = prompts.OBSERVATION_EDITED.format(action=edited, text=observation)
        return (reply, HumanMessage(shown))
    return (reply, HumanMessage(prompts.OBSERVATION.format(text=observation)))


def _edited(turn: Turn) -> str | None:
    """The Action that ran, when a person changed the model's before it ran."""
    approval = turn.get("approval")
    if approval is None or approval["decision"] != "edit":
        return None
    return f"{turn['action']}[{turn['action_input']}]"


@functools.lru_cache(maxsize=8192)
def _call_turn_messages(
    text: str,
    observation: str | None,
    calls: str,
    edited: str | None = None,
    answers: str | None = None,
) -> tuple[BaseMessage, ...]:
    """A ``tool_calls`` turn: the reply with its tool calls, then one tool message per call (the
    first holds the Observation, every other one says one action per turn); a reply with no
    tool call gets its Observation as the text format does. ``calls`` is their JSON (a key);
    ``edited``: the Action that ran instead, when a person changed it; ``answers``: a turn of
    several calls' Observations by call id (JSON), each call answered by its own."""
    records = json.loads(calls)
    if answers is not None:
        own = json.loads(answers)
        tool_calls = [
            {"name": c["name"], "args": c["args"], "id": c["id"], "type": "tool_call"}
            for c in records
        ]
        return (
            AIMessage(text or " ", tool_calls=tool_calls),
            *(
                ToolMessage(own.get(c["id"], ""), tool_call_id=c["id"], name=c["name"])
                for c in records
            ),
        )
    if not records:
        return _turn_messages(text, observation, edited)
    tool_calls = [
        {"name": c["name"], "args": c["args"], "id": c["id"], "type": "tool_call"} for c in records
    ]
    # A call with no text is sent with a space: ChatOpenAI sends empty content as null, which
    # llama-cpp-python's server refuses in an assistant message (a 500 on the next call).
    messages: list[BaseMessage] = [AIMessage(text or " ", tool_calls=tool_calls)]
    for index, call in enumerate(records):
        if index == 0 and observation is not None:
            content = observation
            if edited is not None:
                content = prompts.TOOL_RESULT_EDITED.format(action=edited, text=observation)
        else:
            content = prompts.ONE_ACTION_PER_TURN.format(name=call["name"])
        messages.append(ToolMessage(content, tool_call_id=call["id"], name=call["name"]))
    return tuple(messages)


_CALLS_KEPT = 8192
_calls_json: dict[int, tuple[Any, str]] = {}  # id(calls) -> (calls, their JSON)
_calls_lock = threading.Lock()


def _calls_key(calls: Any) -> str:
    """A turn's tool calls as JSON, made once per stored value (a state's turns are never
    changed in place), not once per turn per prompt: a prompt then costs its new turns only."""
    found = _calls_json.get(id(calls))
    if found is not None and found[0] is calls:
        return found[1]
    key = json.dumps(calls)
    with _calls_lock:
        if len(_calls_json) >= _CALLS_KEPT:
            _calls_json.clear()
        _calls_json[id(calls)] = (calls, key)  # the value held: its identity is not reused
    return key


def turn_messages(turn: Turn) -> tuple[BaseMessage, ...]:
    """One turn as the model sees it in later prompts."""
    calls, edited, several = turn.get("tool_calls"), _edited(turn), turn.get("actions")
    if calls is None:
        return _turn_messages(turn["text"], turn["observation"], edited, several is not None)
    answers = None
    if several is not None:
        answers = json.dumps({a["call_id"]: answered(a) for a in several if a["call_id"]})
    return _call_turn_messages(
        turn["text"], turn["observation"], _calls_key(calls), edited, answers
    )


def answered(record: CallRecord) -> str:
    """One call's Observation as its tool message holds it (a person's edit said)."""
    approval = record.get("approval")
    if approval is not None and approval["decision"] == "edit":
        action = f"{record['action']}[{record['action_input']}]"
        return prompts.TOOL_RESULT_EDITED.format(action=action, text=record["observation"])
    return record["observation"]


def parallel_rules(message: BaseMessage, cap: int) -> BaseMessage:
    """The rules of the opening ``message`` with its one-action lines replaced by those of
    ``parallel_tool_calls`` (``prompts.PARALLEL_RULES``)."""
    content = message.content
    if not isinstance(content, str):
        return message
    changed = _parallel_text(content, cap)
    return message if changed == content else message.model_copy(update={"content": changed})


@functools.lru_cache(maxsize=256)
def _parallel_text(content: str, cap: int) -> str:
    for one, several in prompts.PARALLEL_RULES.items():
        content = content.replace(one, several.format(cap=cap), 1)
    return content


def instructions_block(settings: RunSettings) -> str:
    """The application's instructions as their block (``instructions``), or ""."""
    text = settings.instructions
    return prompts.INSTRUCTIONS_BLOCK.format(instructions=text.strip()) if text else ""


@functools.lru_cache(maxsize=64)
def _answer_format(schema: str, template: str) -> str:
    loaded = json.loads(schema)
    return template.format(kind=answer_kind(loaded), schema=schema_text(loaded))


def run_blocks(settings: RunSettings) -> str:
    """What a run adds to the loop's rules, before the question: the answer format of an
    answer schema, then the application's instructions; "" when it adds nothing."""
    blocks = []
    if settings.answer_schema is not None:
        key = json.dumps(settings.answer_schema, ensure_ascii=False)
        blocks.append(_answer_format(key, formats.of(settings).answer_format))
    instructions = instructions_block(settings)
    if instructions:
        blocks.append(instructions)
    return "\n\n".join(blocks)


@functools.lru_cache(maxsize=256)
def _notes_message(notes: str, resumed: bool, template: str) -> HumanMessage:
    block = template.format(notes=notes if notes.strip() else prompts.NOTES_EMPTY)
    return HumanMessage(f"{prompts.NOTES_RESUMED}\n{block}" if resumed else block)


@functools.lru_cache(maxsize=64)
def _progress_message(summary: str) -> HumanMessage:
    return HumanMessage(prompts.PROGRESS.format(summary=summary))


def window_start(turns: int, window_turns: int, window_step: int) -> int:
    """Where the notes' window starts among ``turns`` turns: it keeps between ``window_turns``
    and ``window_turns + window_step - 1`` of the latest, and moves ``window_step`` turns at
    once, so that between two moves each prompt extends the previous one (a server's prefix
    cache reuses it). ``window_step=1``: always the last ``window_turns``."""
    return max(0, (turns - window_turns) // window_step * window_step)


def visible_turns(state: State, view: View, settings: RunSettings) -> list[Turn]:
    """The turns in the model's view: those since the latest compaction, then those of the
    notes' window (``window_start``). Only those are copied, however long the transcript is."""
    turns = state.get("turns") or []
    start = 0
    compactions = state.get("compactions") or []
    if view.summary and compactions:
        # Turn numbers are 1-based positions in the append-only transcript.
        start = compactions[-1]["first_kept_turn"] - 1
    if view.window:
        notes = narrowed(settings, NotesSettings)
        step = min(notes.window_step, notes.window_turns)
        start = max(start, window_start(len(turns), notes.window_turns, step))
    return turns[start:]


def render_prompt(
    state: State, view: View, tool_descriptions: str, settings: RunSettings
) -> list[BaseMessage]:
    """The messages for the next model call: the filled ReAct prompt (the run's answer format
    and instructions after its rules, ``run_blocks``; the thread's earlier runs in a block before
    its question), the notes when the view has them, the summary when the run was compacted,
    then the visible turns."""
    action_format = formats.of(settings)
    notes_chars = notes_limit(settings)
    blocks = run_blocks(settings)
    earlier = earlier_block(state, view, settings)
    messages = action_format.opening(
        tool_descriptions, state["question"], notes_chars, blocks, earlier
    )
    if settings.parallel_tool_calls:
        messages = [parallel_rules(m, settings.max_parallel_calls) for m in messages]
    if view.notes:
        notes = state.get("notes") or ""
        resumed = bool(state.get("resumed_notes"))
        messages.append(_notes_message(notes, resumed, action_format.notes_block))
    summary = state.get("summary")
    if view.summary and summary is not None and state.get("compactions"):
        messages.append(_progress_message(summary))
    messages.extend(_turns_messages(visible_turns(state, view, settings)))
    return messages


_RENDERINGS_KEPT = 256  # about one per run in flight
# id(first turn) -> (the turns rendered, the end of each one's messages, the messages)
_renderings: dict[int, tuple[list[Turn], list[int], list[BaseMessage]]] = {}


def _turns_messages(turns: list[Turn]) -> list[BaseMessage]:
    """The turns' messages. The turns rendered for a run's last prompt are its next prompt's
    turns but the new one: those found the same (the same stored values, checked by identity,
    linear but cheap) are taken from that rendering, and only the rest rendered."""
    if not turns:
        return []
    found = _renderings.get(id(turns[0]))
    kept, ends, messages = found if found is not None else ([], [], [])
    same = len(kept)
    if same > len(turns) or not all(map(operator.is_, kept, turns)):  # compared in C
        same = 0
        for old, turn in zip(kept, turns, strict=False):  # the kept ones may be more
            if old is not turn:
                break
            same += 1
    kept, ends = kept[:same], ends[:same]
    messages = messages[: ends[-1]] if ends else []
    for turn in turns[same:]:
        messages.extend(turn_messages(turn))
        kept.append(turn)
        ends.append(len(messages))
    with _calls_lock:
        _renderings.pop(id(turns[0]), None)
        _renderings[id(turns[0])] = (kept, ends, messages)  # the turns held: ids not reused
        while len(_renderings) > _RENDERINGS_KEPT:
            del _renderings[next(iter(_renderings))]
    return list(messages)
