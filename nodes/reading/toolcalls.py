"""Reading a reply in the ``tool_calls`` action format: its tool calls as records, and the reply
as one ``ParsedReply``, the same reading the text format's parser gives, so nothing downstream
asks which format produced it. Pure: never raises, linear in the reply.

What a reply means (``action_format="tool_calls"``):

- **Tool calls**: the Action is the first call (calls whose arguments could be read come
  first), the reply's text its Thought. One action per turn: every other call is answered
  "not run: one action per turn" in the next prompt, so every call id the model sent gets its
  ``ToolMessage``. At most ``MAX_CALLS`` calls of a reply are kept; the rest are dropped from
  the record and from every later prompt (so none is left unanswered).
- **No tool call, some text**: the final answer, as ``create_agent`` reads it. A ``Final
  Answer:`` label (or the ReAct paper's ``Finish[answer]``) marks where the answer starts, so a
  model keeping the ReAct habit answers "48", not its whole reply.
- **No tool call and no text** (or ``Final Answer:`` with nothing after it): a corrective
  Observation, as in the text format; two empty replies in a row are ``stuck``.
- **A call of an unknown tool, or whose arguments are not a JSON object** (the provider's
  ``invalid_tool_calls``): a corrective Observation, answering that call.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from reactgraph.nodes.reading.textparser import (
    canonical_name,
    parse_react,
    refused_answer,
    several,
)
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.state import CallReading, ParsedReply, ToolCallRecord
from reactgraph.nodes.vocabulary.storable import storable

logger = logging.getLogger(__name__)

MAX_CALLS = 16
"""Tool calls kept from one reply: a reply of thousands costs no more than one of sixteen."""
_MAX_DEPTH = 64
_SHOWN_CHARS = 120
UNNAMED = "unnamed_call"
"""The name a call without one is given (it is still answered, never run)."""


class _TooDeep(ValueError):
    """Arguments nested deeper than ``_MAX_DEPTH``."""


def _plain(value: Any, depth: int = 0) -> Any:
    """A tool call's argument value as plain, storable JSON values."""
    if depth > _MAX_DEPTH:
        raise _TooDeep(f"nested more than {_MAX_DEPTH} levels deep")
    if isinstance(value, str):
        return storable(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {storable(str(k)): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    return storable(str(value))


def _shorten(text: Any) -> str:
    text = " ".join(str(text)[: _SHOWN_CHARS * 2].split())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _call_id(given: Any, position: int, seen: set[str]) -> str:
    """A call's id, unique within its reply: the model's, else made up from its position
    (``call-2``); one ``seen`` already gets its position added (``call-1-2``)."""
    call_id = storable(str(given)) if given else f"call-{position + 1}"
    return f"{call_id}-{position + 1}" if call_id in seen else call_id


def _read_args(record: ToolCallRecord, call: Mapping[str, Any], unread: bool) -> None:
    """A call's arguments into its ``record`` (a plain JSON object), or why they cannot be
    (``error``): LangChain could not read them (``unread``), not an object, nested too deeply."""
    args = call.get("args")
    if unread:
        why = call.get("error") or "not valid JSON"
        record["error"] = storable(f"{_shorten(why)}: {_shorten(args)!r}")
    elif not isinstance(args, Mapping):
        record["error"] = f"not a JSON object: {type(args).__name__}"
    else:
        try:
            record["args"] = _plain(args)
        except (_TooDeep, RecursionError) as error:
            record["error"] = str(error) or "nested too deeply"


def calls_of(message: Any) -> list[ToolCallRecord]:
    """The tool calls of a model's message as records: those LangChain could read
    (``tool_calls``), then those it could not (``invalid_tool_calls``), at most ``MAX_CALLS``,
    each with an id unique within the reply (made up where the model gave none)."""
    valid = getattr(message, "tool_calls", None) or []
    invalid = getattr(message, "invalid_tool_calls", None) or []
    kept: list[ToolCallRecord] = []
    seen: set[str] = set()
    every = itertools.chain(((c, False) for c in valid), ((c, True) for c in invalid))
    for position, (call, unread) in enumerate(itertools.islice(every, MAX_CALLS)):
        call = call if isinstance(call, Mapping) else {}
        name = storable(str(call.get("name") or "")) or UNNAMED
        call_id = _call_id(call.get("id"), position, seen)
        seen.add(call_id)
        record = ToolCallRecord(name=name, args={}, id=call_id)
        _read_args(record, call, unread)
        kept.append(record)
    dropped = len(valid) + len(invalid) - len(kept)
    if dropped > 0:
        logger.warning(
            "a reply had %d tool calls; the last %d were dropped", len(kept) + dropped, dropped
        )
    return kept


def strict_calls(chunks: Sequence[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A streamed reply's tool calls read from the complete text of each call's arguments, as a
    plain reply's are (``json.loads``: a JSON object, or no text at all for no arguments), never
    repaired as LangChain's partial-JSON reading repairs them (``{"expression": "1937-18``
    would run ``1937-18``). ``chunks`` are the merged message's ``tool_call_chunks``; returns
    its ``tool_calls`` and ``invalid_tool_calls``. Never raises; linear in the arguments."""
    valid: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for chunk in chunks:
        chunk = chunk if isinstance(chunk, Mapping) else {}
        raw = chunk.get("args")
        name, call_id = chunk.get("name"), chunk.get("id")
        error: str | None = None
        args: Any = {}
        if raw:
            try:
                args = json.loads(raw) if isinstance(raw, str) else None
            except (ValueError, RecursionError) as failure:
                error = f"not valid JSON ({str(failure)[:80]})"
            else:
                if not isinstance(args, dict):
                    error = "not a JSON object"
        if error is None:
            valid.append({"name": name, "args": args, "id": call_id, "type": "tool_call"})
        else:
            invalid.append(
                {
                    "name": name,
                    "args": raw if isinstance(raw, str) else None,
                    "id": call_id,
                    "error": error,
                    "type": "invalid_tool_call",
                }
            )
    return valid, invalid


def reread_calls(message: Any, chunks: Sequence[Any] | None = None) -> Any:
    """``message`` with its tool calls read by ``strict_calls`` from ``chunks`` (default: its
    own ``tool_call_chunks``, a streamed reply's), in a copy; a message without any as it is."""
    if chunks is None:
        chunks = getattr(message, "tool_call_chunks", None)
    if not chunks or not hasattr(message, "model_copy"):
        return message
    valid, invalid = strict_calls(chunks)
    return message.model_copy(update={"tool_calls": valid, "invalid_tool_calls": invalid})


# One encoder, made once (``json.dumps`` with options makes one per call); it keeps no state.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)


def canonical_args(args: Mapping[str, Any] | None) -> str:
    """How two calls' arguments are compared (stuck detection): their JSON, keys sorted."""
    return _CANONICAL.encode(args or {})


def input_text(params: Sequence[str], args: Mapping[str, Any]) -> str:
    """A call's arguments as the turn record's ``action_input``, as the text format writes
    them: a one-argument action's value (a string as it is: ``search[Eiffel Tower]``; else its
    JSON: ``double[21]``), else the JSON object (``add[{"a": 2, "b": 3}]``)."""
    if not args:
        return ""
    if len(params) == 1 and len(args) == 1:
        (value,) = args.values()
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return json.dumps(args, ensure_ascii=False)


def _reading(kind: str, thought: str | None, **fields: Any) -> ParsedReply:
    reading = ParsedReply(
        kind=kind,  # type: ignore[typeddict-item]
        thought=thought,
        action=None,
        action_input=None,
        answer=None,
        error=None,
    )
    reading.update(fields)  # type: ignore[typeddict-item]
    return reading


def _named(name: str, params: Mapping[str, Sequence[str]]) -> str | None:
    """The action a call names: by its name, else by its canonical name (``canonical_name``);
    None when it names none."""
    if name in params:
        return name
    wanted = canonical_name(name)
    return next((n for n in params if canonical_name(n) == wanted), None)


def _thought(text: str) -> str | None:
    """The Thought of a reply's text that comes with its tool calls (None: no text)."""
    return parse_react(text, ())["thought"] if text.strip() else None


def _first_call(
    first: ToolCallRecord,
    thought: str | None,
    params: Mapping[str, Sequence[str]],
    valid: str,
) -> ParsedReply:
    """A reply read by its first call: the action it runs, or why it cannot run."""
    ids = {"call_id": first["id"], "args": None}
    if "error" in first:
        error = prompts.BAD_CALL_ARGS.format(name=first["name"], error=first["error"])
        return _reading("invalid", thought, error=error, **ids)
    name = _named(first["name"], params)
    if name is None:
        error = prompts.UNKNOWN_TOOL.format(name=first["name"], valid=valid)
        return _reading("invalid", thought, error=error, **ids)
    return _reading(
        "action",
        thought,
        action=name,
        action_input=input_text(params[name], first["args"]),
        call_id=first["id"],
        args=first["args"],
    )


def _call(
    call: ToolCallRecord, index: int, cap: int, params: Mapping[str, Sequence[str]], valid: str
) -> CallReading:
    """One call of a reply of several: the tool and arguments it runs with, or why not."""
    name = _named(call["name"], params)
    error = None
    if index >= cap:
        error = prompts.PAST_PARALLEL_CAP.format(cap=cap, name=call["name"])
    elif "error" in call:
        error = prompts.BAD_CALL_ARGS.format(name=call["name"], error=call["error"])
    elif name is None:
        error = prompts.UNKNOWN_TOOL.format(name=call["name"], valid=valid)
    if error is not None or name is None:
        return CallReading(
            action=None, action_input=None, call_id=call["id"], args=None, error=error
        )
    return CallReading(
        action=name,
        action_input=input_text(params[name], call["args"]),
        call_id=call["id"],
        args=call["args"],
        error=None,
    )


def read_tool_calls(
    text: str,
    calls: Sequence[ToolCallRecord],
    params: Mapping[str, Sequence[str]],
    max_calls: int | None = None,
) -> ParsedReply:
    """Read a reply of the ``tool_calls`` format: its cleaned text and its tool calls (see
    ``calls_of``). ``params`` names every action the model may call (the tools and the
    variant's own) with its arguments. With ``max_calls`` (``parallel_tool_calls``),
    a reply of several calls is read as several actions (``several``), each on its own."""
    valid = ", ".join(params) or "(none)"
    if max_calls is not None and len(calls) > 1:
        readings = [_call(c, i, max_calls, params, valid) for i, c in enumerate(calls)]
        return several(readings, _thought(text))
    if calls:
        return _first_call(calls[0], _thought(text), params, valid)
    if not text.strip():
        return _reading("invalid", None, error=prompts.EMPTY_REPLY_TOOLS.format(valid=valid))
    parsed = parse_react(text, ())
    if parsed["kind"] == "answer" or refused_answer(parsed):
        return parsed
    return _reading("answer", None, answer=text.strip())
