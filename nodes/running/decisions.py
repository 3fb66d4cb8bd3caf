"""A person's decision on an Action, read from the value a client resumes the run with
(``Command(resume=...)``). Pure: it never raises anything but ``Malformed``.

The value is untrusted (it comes from whoever can reach the thread), so it is bounded in size
and read by its shape only. Every shape the chat clients and LangChain send is read:

- LangChain's human-in-the-loop response, as Agent Chat UI sends it: ``{"decisions": [{"type":
  "approve"}]}``; ``{"type": "edit", "edited_action": {"name": ..., "args": {...}}}``;
  ``{"type": "reject", "message": ...}``; ``{"type": "respond", "message": ...}``;
- the agent inbox's ``HumanResponse`` (LangGraph's prebuilt ``HumanInterrupt``, earlier Agent
  Chat UI versions), alone or in a list: ``{"type": "accept"}``; ``{"type": "edit", "args":
  {"action": ..., "args": {...}}}``; ``{"type": "response", "args": "text"}``; ``{"type":
  "ignore"}``;
- one decision on its own (``{"type": "approve"}``), or a word: ``"approve"``, ``"yes"``,
  ``"reject"``, ``"no"``.

Any of them may say who decided: ``"by": "name"`` beside ``decisions`` or in the decision, and
beside ``decisions`` what the person typed in the chat to decide (``"said": "yes"``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from reactgraph.nodes.vocabulary.state import Decision
from reactgraph.nodes.vocabulary.storable import unstorable

MAX_RESUME_CHARS = 100_000
"""The largest resume value taken, as JSON text (an edited input or a person's reply)."""
MAX_UNUSABLE = 5
"""Answers to one Action that could not be used before only a usable decision is taken: every
value given is kept and replayed at each resume, so their number is bounded (a further
unusable one is refused before it is stored; the thread keeps waiting)."""
MAX_BY_CHARS = 200
MAX_RESUME_DEPTH = 32
"""The deepest a resume value may nest (an edit's arguments are JSON objects, rarely deep)."""

_TYPES: dict[str, Decision] = {
    "approve": "approve",
    "accept": "approve",
    "edit": "edit",
    "respond": "respond",
    "response": "respond",
    "reject": "reject",
    "ignore": "reject",
}
_WORDS: dict[str, Decision] = {
    "approve": "approve",
    "accept": "approve",
    "yes": "approve",
    "y": "approve",
    "reject": "reject",
    "ignore": "reject",
    "no": "reject",
    "n": "reject",
}
_SHAPES = (
    '{"decisions": [{"type": "approve"}]}, or a decision of type edit (with edited_action '
    "{name, args}), reject (with a message) or respond (with a message)"
)


class Malformed(ValueError):
    """A resume value that says no decision this loop can act on; its text says what to send."""


@dataclass(frozen=True)
class Decided:
    """One decision, as read."""

    decision: Decision
    action: str | None = None
    """``edit``: the tool to run (None: the one the model named)."""
    args: Any = None
    """``edit``: the arguments to run it with (a mapping), or its raw input (a string)."""
    message: str | None = None
    """``respond``: the person's text; ``reject``: their reason, if they gave one."""
    by: str | None = None
    """Who decided, as the value says."""
    said: str | None = None
    """What the person typed in the chat to decide, as the value says."""


def check_resume(value: Any) -> None:
    """ValueError for a resume value no checkpointer should store: nested over
    ``MAX_RESUME_DEPTH`` levels, over ``MAX_RESUME_CHARS`` as JSON, not JSON at all, or holding
    a character no checkpointer can store."""
    problem = _shape_problem(value)
    if problem is not None:
        raise ValueError(f"the resume value {problem}")
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        raise ValueError("the resume value must be JSON: a decision such as " + _SHAPES) from None
    if len(text) > MAX_RESUME_CHARS:
        raise ValueError(
            f"the resume value is too large ({len(text)} characters of JSON; at most "
            f"{MAX_RESUME_CHARS})"
        )
    for part in _texts(value):
        problem = unstorable(part)
        if problem is not None:
            raise ValueError(f"the resume value cannot be stored: a text in it holds a {problem}")


def _shape_problem(value: Any) -> str | None:
    """What is wrong with the shape of ``value``, read level by level without recursion, and
    never past ``MAX_RESUME_DEPTH`` levels or ``MAX_RESUME_CHARS`` items (each is a character
    of JSON at least): it nests too deep, or holds too much."""
    level = [value]
    for _ in range(MAX_RESUME_DEPTH + 1):
        inner: list[Any] = []
        for item in level:
            if isinstance(item, Mapping):
                inner.extend(item.values())
            elif isinstance(item, list | tuple):
                inner.extend(item)
            if len(inner) > MAX_RESUME_CHARS:
                return f"is too large (over {MAX_RESUME_CHARS} items)"
        if not inner:
            return None
        level = inner
    return f"nests over {MAX_RESUME_DEPTH} levels"


def _texts(value: Any) -> Any:
    """Every string in a JSON value, keys included (JSON text escapes a NUL, so it is looked
    for in the strings themselves)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _texts(key)
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def read_decision(value: Any) -> Decided:
    """The one decision ``value`` holds; ``Malformed`` saying what to send otherwise."""
    value, by, said = _unwrapped(value)
    decided = _one(value, by)
    return replace(decided, said=said) if said else decided


def read_decisions(value: Any, count: int) -> list[Decided]:
    """The decisions on ``count`` calls waiting together (a reply of several calls,
    ``parallel_tool_calls``), in the calls' order: a list of exactly that many (``{"decisions":
    [...]}``, as LangChain's human-in-the-loop protocol has it: a client that showed one call
    and answered it approves no other), or one decision given on its own, not in a list (a
    word typed in the chat: ``yes``), that is not an edit, taken for every call; ``Malformed``
    saying what to send otherwise."""
    value, by, said = _unwrapped(value)
    if isinstance(value, list | tuple):
        if len(value) != count:
            raise Malformed(
                f"{count} decisions were asked for, one per call in their order, and "
                f"{len(value)} came."
            )
        found = [_one(v, by) for v in value]
    else:
        one = _one(value, by)
        if one.decision == "edit" and count > 1:
            raise Malformed(f"an edit is one call's: send {count} decisions, one per call.")
        found = [one] * count
    return [replace(d, said=said) if said else d for d in found]


def _unwrapped(value: Any) -> tuple[Any, Any, str | None]:
    """The decisions a checked resume value holds, who decided and what they said (``{"decisions":
    ..., "by": ..., "said": ...}``; a value without ``decisions`` is the decisions themselves);
    ``Malformed`` where the value is not one to resume with."""
    try:
        check_resume(value)
    except ValueError as error:
        raise Malformed(f"{error}.") from None
    if isinstance(value, Mapping) and "decisions" in value:
        return value["decisions"], value.get("by"), _by(value.get("said"))
    return value, None, None


def _only(value: Any) -> Any:
    """The one item of a list of decisions (a value that is no list is one already)."""
    if not isinstance(value, list | tuple):
        return value
    if len(value) != 1:
        raise Malformed(f"one decision was asked for, and {len(value)} came.")
    return value[0]


def _worded(value: str, by: Any) -> Decided:
    """A decision given as a word (yes, no...)."""
    word = _WORDS.get(value.strip().lower())
    if word is None:
        raise Malformed(
            f"{value[:40]!r} is not a decision: answer yes to run it or no to refuse it."
        )
    return Decided(word, by=_by(by))


def _with_message(
    decision: Decision, kind: str, value: Mapping[str, Any], by: str | None
) -> Decided:
    """A reject or respond decision, with its message (``message``, or ``args``): text, and
    some for a respond."""
    message = value.get("message", value.get("args"))
    if message is not None and not isinstance(message, str):
        raise Malformed(f"a {kind} decision's message must be text.")
    if decision == "respond" and not (message or "").strip():
        raise Malformed("a respond decision needs a message: the text the agent reads.")
    return Decided(decision, message=(message or "").strip() or None, by=by)


def _one(value: Any, by: Any) -> Decided:
    """The one decision of a checked value (``decisions`` unwrapped)."""
    value = _only(value)
    if isinstance(value, str):
        return _worded(value, by)
    kind = value.get("type") if isinstance(value, Mapping) else None
    if not isinstance(kind, str) or kind not in _TYPES:
        raise Malformed(f"no decision type was given; send {_SHAPES}.")
    decision = _TYPES[kind]
    by = _by(value.get("by", by))
    if decision == "approve":
        return Decided("approve", by=by)
    if decision == "edit":
        action, args = _edited(value)
        return Decided("edit", action=action, args=args, by=by)
    return _with_message(decision, kind, value, by)


def _edited(value: Mapping[str, Any]) -> tuple[str | None, Any]:
    """The tool and arguments of an edit: ``edited_action`` (LangChain's, with ``args`` or
    ``arguments``), the agent inbox's ``args: {action, args}``, or ``args`` alone."""
    edited = value.get("edited_action")
    if edited is None:
        edited = value.get("args")
        if isinstance(edited, str):
            return None, edited  # the raw input itself
        if isinstance(edited, Mapping) and not isinstance(edited.get("args"), Mapping | str):
            return None, dict(edited)  # the arguments themselves
    if not isinstance(edited, Mapping):
        raise Malformed("an edit decision needs edited_action: {name, args}.")
    name = edited.get("name", edited.get("action"))
    args = edited.get("args", edited.get("arguments"))
    if name is not None and not isinstance(name, str):
        raise Malformed("an edited action's name must be text.")
    if not isinstance(args, Mapping | str):
        raise Malformed("an edited action needs its args: an object, or the input as text.")
    return name, dict(args) if isinstance(args, Mapping) else args


def _by(value: Any) -> str | None:
    """Who decided, as the value says: text, one line, bounded; anything else is not a name."""
    if not isinstance(value, str) or not value.strip():
        return None
    return " ".join(value.split())[:MAX_BY_CHARS]
