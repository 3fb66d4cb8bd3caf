"""Typed answers: reading a model's Final Answer as a JSON value that matches the run's answer
schema (``reactgraph.nodes.reading.answer_schema``).

``read_typed`` reads an answer's text: the JSON value in it (the whole text, a code fence, or
the first JSON value with text around it), checked against the schema. Pure: it never raises
and runs in time linear in the text (at most ``MAX_STARTS`` places are tried, each read once);
what the model wrote is bounded in size, depth and number of values before it is validated,
and the check itself is bounded (``reactgraph.nodes.reading.validation``): at most
``MAX_CHECK_STEPS`` steps, else a corrective Observation.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from reactgraph.nodes.reading import validation
from reactgraph.nodes.reading.answer_schema import accepts_string, answer_kind
from reactgraph.nodes.reading.validation import COST, Cost, TooCostly, shown, validator_of
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.storable import MAX_INT, MIN_INT, storable

MAX_ANSWER_CHARS = 65_536
"""The longest JSON answer read; a longer one gets a corrective Observation."""

MAX_VALUES = 5_000
"""The most JSON values (each object, array, string, number...) an answer may hold."""

MAX_DEPTH = 32
"""The deepest nesting of an answer's arrays and objects."""

MAX_STARTS = 8
"""Places in an answer's text where a JSON value is tried, besides the whole text and a fence."""

MAX_PROBLEMS = 3
"""Validation failures named in one corrective Observation."""

_FENCE = re.compile(r"```[ \t]*+(?:json[c5]?+|javascript|js)?+[ \t]*+\r?\n", re.I)

_STARTS = re.compile(r"[{\[]")


class Typed(NamedTuple):
    """An answer that matches the schema."""

    value: Any
    """The JSON value (a dict for an object schema)."""
    text: str
    """Its JSON text: the run's ``answer``."""


class Rejected(NamedTuple):
    """An answer that does not: the corrective Observation saying what failed."""

    error: str


class _Unreadable(ValueError):
    """Not JSON, or JSON past the bounds."""


def _no_constant(name: str) -> Any:
    raise _Unreadable(f"{name} is not JSON")


def _refusal(item: Any) -> str | None:
    """Why one JSON value cannot be stored (an infinite number, or an integer outside 64 bits:
    no checkpointer stores one); None when it can."""
    if isinstance(item, float) and not math.isfinite(item):
        return f"{item} is not a JSON number"
    if isinstance(item, int) and not isinstance(item, bool) and not MIN_INT <= item <= MAX_INT:
        return "it holds a whole number outside 64 bits"
    return None


def _unclean(item: Any) -> bool:
    """Whether a text, or an object's key, has what a store refuses (see ``storable``)."""
    if isinstance(item, str):
        return storable(item) != item
    if isinstance(item, dict):
        return any(storable(k) != k for k in item)
    return False


def _members(item: Any) -> Iterable[Any]:
    """The values an object or an array holds; none for another value."""
    if isinstance(item, dict):
        return item.values()
    return item if isinstance(item, list) else ()


def _bounded(value: Any) -> Any:
    """``value`` as it can be stored: its texts (keys too) with NUL and lone surrogates (JSON
    escapes can write them) replaced by U+FFFD. _Unreadable when it holds more than
    ``MAX_VALUES`` values, nests deeper than ``MAX_DEPTH``, or holds an integer outside 64 bits
    (no checkpointer stores one). Iterative: a deep value cannot exhaust the stack."""
    count = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    unclean = False
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise _Unreadable(f"it holds more than {MAX_VALUES} values")
        if depth > MAX_DEPTH:
            raise _Unreadable(f"it is nested more than {MAX_DEPTH} levels deep")
        refusal = _refusal(item)
        if refusal is not None:
            raise _Unreadable(refusal)
        unclean = unclean or _unclean(item)
        stack.extend((v, depth + 1) for v in _members(item))
    return _cleaned(value) if unclean else value


def _cleaned(value: Any) -> Any:
    """A bounded JSON value's texts made storable."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def _decode_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value at ``start`` and where it ends; _Unreadable when there is none."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, a huge int, deep nesting
        if isinstance(error, _Unreadable):
            raise
        problem = str(error).split(":")[0] if isinstance(error, ValueError) else "too deep"
        raise _Unreadable(problem) from None


def _fenced(text: str) -> str | None:
    """The text of the first fenced block (to its closing fence, or the end), if any."""
    fence = _FENCE.search(text)
    if fence is None:
        return None
    close = text.find("```", fence.end())
    return text[fence.end() : close if close >= 0 else len(text)].strip()


def _whole(text: str) -> tuple[Any, str] | None:
    """The JSON value that is all of ``text``, with it; None when more follows the value;
    _Unreadable when it does not start with one."""
    value, end = _decode_at(text, 0)
    return None if text[end:].strip() else (value, text)


def _extract(text: str) -> tuple[Any, str]:
    """The JSON value an answer holds, with its text: the whole text, else the first fenced
    block's, else the first value starting at one of the first ``MAX_STARTS`` brackets (text
    around it ignored). _Unreadable with the first problem found when none is JSON."""
    stripped = text.strip()
    problem = "no JSON value found"
    for candidate in (stripped, _fenced(stripped)):
        if candidate is None:
            continue
        try:
            found = _whole(candidate)
        except _Unreadable as error:
            problem = str(error)
            continue
        if found is not None:
            return found
    for match in itertools.islice(_STARTS.finditer(stripped), MAX_STARTS):
        try:
            value, end = _decode_at(stripped, match.start())
        except _Unreadable:
            continue
        return value, stripped[match.start() : end]
    raise _Unreadable(problem)


class _Refused(Exception):
    """An answer rejected on the way to its value: the ``Rejected`` that says why."""

    def __init__(self, rejected: Rejected) -> None:
        super().__init__(rejected.error)
        self.rejected = rejected


def _answer_value(text: str, schema: Mapping[str, Any], kind: str) -> Any:
    """The JSON value of an answer (its plain text for a string schema when it holds none),
    bounded and made storable; _Refused when there is none, or it is past the bounds."""
    try:
        value, _ = _extract(text)
    except _Unreadable as error:
        if not (accepts_string(schema) and text.strip()):
            raise _Refused(
                Rejected(prompts.TYPED_ANSWER_NOT_JSON.format(problem=error, kind=kind))
            ) from None
        value = text.strip()
    try:
        return _bounded(value)
    except _Unreadable as error:
        raise _Refused(
            Rejected(prompts.TYPED_ANSWER_TOO_BIG.format(problem=error, kind=kind))
        ) from None


def _failures(
    validator: Any, value: Any, text: str, schema: Mapping[str, Any]
) -> tuple[Any, list[Any]]:
    """The value the answer stands for and its validation failures (up to one more than
    ``MAX_PROBLEMS``): for a string schema, an answer like "Final Answer: 48" is the text."""
    problems = list(itertools.islice(validator.iter_errors(value), MAX_PROBLEMS + 1))
    if accepts_string(schema) and problems and not isinstance(value, str) and text.strip():
        plain = storable(text.strip())
        if not any(True for _ in itertools.islice(validator.iter_errors(plain), 1)):
            return plain, []
    return value, problems


def _validated(
    validator: Any, value: Any, text: str, schema: Mapping[str, Any], kind: str
) -> Typed | Rejected:
    """The answer's value checked against the schema, within ``MAX_CHECK_STEPS`` steps."""
    cost = COST.set(Cost())
    try:
        value, problems = _failures(validator, value, text, schema)
    except TooCostly:
        return Rejected(
            prompts.TYPED_ANSWER_TOO_COSTLY.format(limit=validation.MAX_CHECK_STEPS, kind=kind)
        )
    except Exception as error:  # a schema feature that failed on this value: say so, go on
        return Rejected(prompts.TYPED_ANSWER_UNCHECKED.format(problem=shown(str(error))))
    finally:
        COST.reset(cost)
    if problems:
        named = "; ".join(_problem(p) for p in problems[:MAX_PROBLEMS])
        if len(problems) > MAX_PROBLEMS:
            named += "; and more"
        return Rejected(prompts.TYPED_ANSWER_INVALID.format(problems=named, kind=kind))
    return Typed(value, json.dumps(value, ensure_ascii=False))


def read_typed(text: str | None, schema: Mapping[str, Any]) -> Typed | Rejected:
    """An answer's text read against ``schema``: ``Typed`` when it holds a JSON value that
    matches (a string schema also takes plain text), else ``Rejected`` with the corrective
    Observation naming what failed. Never raises."""
    kind = answer_kind(schema)
    text = text or ""
    if len(text) > MAX_ANSWER_CHARS:
        too_long = prompts.TYPED_ANSWER_TOO_LONG
        return Rejected(too_long.format(length=len(text), limit=MAX_ANSWER_CHARS, kind=kind))
    try:
        schema_key = json.dumps(schema, ensure_ascii=False, allow_nan=False)
        validator = validator_of(schema_key)
    except Exception as error:  # checked when set; never fail a run on it here
        return Rejected(prompts.TYPED_ANSWER_UNCHECKED.format(problem=shown(str(error))))
    try:
        value = _answer_value(text, schema, kind)
    except _Refused as refused:
        return refused.rejected
    return _validated(validator, value, text, schema, kind)


def _problem(error: Any) -> str:
    """One validation failure in words: where in the answer, and what."""
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"at {'$' + path}: {shown(error.message)}"
