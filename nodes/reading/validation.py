"""Checking a value against an answer schema in bounded time: jsonschema's validator with its
pattern keywords (``pattern``, ``patternProperties``, ``additionalProperties`` beside them) on
RE2 (google-re2), in time linear in the text, never on Python's backtracking ``re``
(``^(a+)+$`` took 0.6 s on 24 characters, hours on 40, the GIL held); ``uniqueItems`` by
hashing, not pair by pair; and every keyword applied, and every pattern's run, spending steps
of a budget of ``MAX_CHECK_STEPS`` for one answer (``COST``)."""

from __future__ import annotations

import contextvars
import functools
import json
from collections.abc import Callable, Iterator
from typing import Any

MAX_CHECK_STEPS = 100_000
"""The most steps checking one answer may take (about a second): a schema keyword applied to
one value is a step, a pattern's run through a text one per ``PATTERN_STEP`` of its length
times the pattern's size. An answer of ``MAX_VALUES`` values checked by a plain schema takes a
few per value."""

PATTERN_STEP = 10_000
"""Characters times RE2 instructions that count as one step (about as long as a keyword)."""

MAX_PATTERN_SIZE = 50_000
"""The largest pattern, in RE2's instructions (``\\p{L}{1,40}`` is about 48,000): a larger one
is refused with the schema."""

_SHOWN_CHARS = 160


@functools.lru_cache(maxsize=256)
def compiled_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2, which runs it in time linear in the text; ValueError for
    one RE2 cannot run (a backreference, a lookaround) or larger than ``MAX_PATTERN_SIZE``."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2's own logging writes to stderr
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(
            f"{shown(repr(pattern))} cannot run in linear time ({reason}); patterns run on RE2: "
            "no backreferences or lookaround"
        ) from None
    if compiled.programsize > MAX_PATTERN_SIZE:
        raise ValueError(
            f"{shown(repr(pattern))} is too large: {compiled.programsize} RE2 instructions, at "
            f"most {MAX_PATTERN_SIZE}"
        )
    return compiled


class Cost:
    """The steps one answer's check has taken so far."""

    def __init__(self) -> None:
        self.steps = 0


class TooCostly(Exception):
    """The check of one answer went past ``MAX_CHECK_STEPS``."""


COST: contextvars.ContextVar[Cost | None] = contextvars.ContextVar("answer_check", default=None)


def _spend(steps: int) -> None:
    cost = COST.get()
    if cost is None:
        return
    cost.steps += steps
    if cost.steps > MAX_CHECK_STEPS:
        raise TooCostly


def _matches(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (as ``re.search``), on RE2; its cost
    is spent before it runs."""
    compiled = compiled_pattern(pattern)
    _spend(1 + len(text) * compiled.programsize // PATTERN_STEP)
    return compiled.search(text) is not None


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _extras_refused(extras: list[str], patterns: list[str]) -> str:
    """jsonschema's words for properties ``additionalProperties: false`` refuses."""
    shown = ", ".join(repr(key) for key in sorted(extras))
    if patterns:
        verb = "does" if len(extras) == 1 else "do"
        listed = ", ".join(repr(p) for p in sorted(patterns))
        return f"{shown} {verb} not match any of the regexes: {listed}"
    verb = "was" if len(extras) == 1 else "were"
    return f"Additional properties are not allowed ({shown} {verb} unexpected)"


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """jsonschema's ``additionalProperties``, its ``patternProperties`` read by RE2."""
    from jsonschema import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in properties and not any(_matches(p, key) for p in patterns)
    ]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        yield ValidationError(_extras_refused(extras, patterns))


def _counted(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """A keyword's check that spends a step each time it is applied to a value."""

    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _spend(1)
        return keyword(validator, value, instance, schema)

    return counted


@functools.lru_cache(maxsize=64)
def validator_class(schema_text: str) -> Any:
    from jsonschema import Draft202012Validator, validators

    schema = json.loads(schema_text)
    base = validators.validator_for(schema, default=Draft202012Validator)
    # uniqueItems by hashing each item's canonical JSON: linear, where jsonschema's own compares
    # pairs of unsortable items (quadratic in a model's answer); patterns on RE2.
    own = {
        "uniqueItems": _unique_items,
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    keywords = {**base.VALIDATORS, **{k: v for k, v in own.items() if k in base.VALIDATORS}}
    return validators.extend(base, {k: _counted(v) for k, v in keywords.items()})


@functools.lru_cache(maxsize=64)
def validator_of(schema_text: str) -> Any:
    """The schema's validator, made once per schema."""
    return validator_class(schema_text)(json.loads(schema_text))


def _canonical(value: Any) -> Any:
    """A JSON value as JSON Schema compares them: 1 and 1.0 alike, true and 1 not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for index, item in enumerate(instance):
        key = json.dumps(_canonical(item), sort_keys=True)
        if key in seen:
            yield ValidationError(f"has non-unique elements: item {index} repeats an earlier one")
            return
        seen.add(key)


def shown(text: str) -> str:
    text = " ".join(text[: _SHOWN_CHARS * 2].split())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
