"""Typed answers: the answer's JSON schema (the ``answer_schema`` setting, ``build_graph``'s
``response_format``), and reading a model's Final Answer as a JSON value that matches it.

- ``schema_of`` turns what a developer passes (a pydantic model class, a ``TypedDict``, a
  dataclass, or a JSON schema dict) into a JSON schema; ``check_schema`` checks one (a valid
  JSON schema, of bounded size, whose ``$ref`` are its own), raising ``ValueError``.
- ``read_typed`` reads an answer's text: the JSON value in it (the whole text, a code fence, or
  the first JSON value with text around it), checked against the schema. Pure: it never raises
  and runs in time linear in the text (at most ``MAX_STARTS`` places are tried, each read once);
  what the model wrote is bounded in size, depth and number of values before it is validated,
  and ``uniqueItems`` is checked by hashing, not pair by pair.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from reactgraph.nodes.loop import prompts

MAX_SCHEMA_CHARS = 20_000
"""The longest answer schema, as JSON: it is shown in every prompt of the run."""
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
_SHOWN_CHARS = 160

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


def schema_of(response_format: Any) -> dict[str, Any]:
    """A ``response_format`` as a JSON schema: a pydantic model class, a ``TypedDict`` or a
    dataclass (pydantic's JSON schema of it), or a JSON schema dict (as it is); TypeError for
    anything else. Checked by ``check_schema`` after."""
    if isinstance(response_format, Mapping):
        return dict(response_format)
    if isinstance(response_format, type):
        from pydantic import BaseModel, TypeAdapter
        from typing_extensions import is_typeddict

        try:
            if issubclass(response_format, BaseModel):
                return response_format.model_json_schema()
            if is_typeddict(response_format) or dataclasses.is_dataclass(response_format):
                try:
                    return TypeAdapter(response_format).json_schema()
                except Exception:
                    if not is_typeddict(response_format):
                        raise
                    # typing.TypedDict before Python 3.12, which pydantic refuses: LangChain's
                    # own conversion reads it.
                    from langchain_core.utils.function_calling import convert_to_json_schema

                    return convert_to_json_schema(response_format)
        except Exception as error:  # pydantic cannot describe one of its fields
            raise TypeError(
                f"response_format {response_format.__name__} has no JSON schema: {error}"
            ) from None
    raise TypeError(
        "response_format must be a pydantic model class, a TypedDict, a dataclass or a JSON "
        f"schema dict; got {response_format!r}"[:300]
    )


def _refs(value: Any, depth: int = 0) -> Iterator[str]:
    """Every ``$ref`` of a schema (JSON already bounded in size)."""
    if depth > 200:
        raise ValueError("answer_schema is nested too deeply")
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            yield ref
        for item in value.values():
            yield from _refs(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item, depth + 1)


def check_schema(value: Any) -> dict[str, Any]:
    """``value`` as the ``answer_schema`` setting: a JSON object that is a valid JSON schema
    (Draft 2020-12 unless its ``$schema`` names another), at most ``MAX_SCHEMA_CHARS`` as JSON,
    whose references are all its own (``#...``); TypeError for what is not a JSON object,
    ValueError for what is no schema. A copy, in plain JSON values."""
    if not isinstance(value, Mapping):
        raise TypeError(
            f"answer_schema must be a JSON schema (an object), got {type(value).__name__}"
        )
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise TypeError(f"answer_schema must hold only JSON values: {error}") from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise ValueError(
            f"answer_schema must be at most {MAX_SCHEMA_CHARS} characters as JSON, got {len(text)}"
        )
    schema = json.loads(text)
    from jsonschema import exceptions
    from referencing.exceptions import Unresolvable

    try:
        kind = _validator_class(text)
        kind.check_schema(schema)
    except exceptions.SchemaError as error:
        where = "/".join(str(p) for p in error.absolute_path)
        raise ValueError(
            f"answer_schema is not a valid JSON schema: {_short(error.message)}"
            + (f" (at {where})" if where else "")
        ) from None
    validator = _validator(text)
    for ref in _refs(schema):
        if not ref.startswith("#"):
            raise ValueError(
                f"answer_schema may refer only to its own parts ('#/...'), not {ref!r}"
            )
        try:
            validator._resolver.lookup(ref)
        except Unresolvable:
            raise ValueError(f"answer_schema refers to {ref!r}, which it does not hold") from None
    return schema


@functools.lru_cache(maxsize=64)
def _validator_class(schema_text: str) -> Any:
    from jsonschema import Draft202012Validator, validators

    schema = json.loads(schema_text)
    base = validators.validator_for(schema, default=Draft202012Validator)
    # uniqueItems by hashing each item's canonical JSON: linear, where jsonschema's own compares
    # pairs of unsortable items (quadratic in a model's answer).
    return validators.extend(base, {"uniqueItems": _unique_items})


@functools.lru_cache(maxsize=64)
def _validator(schema_text: str) -> Any:
    """The schema's validator, made once per schema."""
    return _validator_class(schema_text)(json.loads(schema_text))


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


def schema_text(schema: Mapping[str, Any]) -> str:
    """The schema as the prompt shows it."""
    return json.dumps(schema, ensure_ascii=False)


def answer_kind(schema: Mapping[str, Any]) -> str:
    """What the prompts ask for: "object" for an object schema, else "value"."""
    kind = schema.get("type")
    if kind == "object" or (kind is None and "properties" in schema):
        return "object"
    return "value"


def _accepts_string(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def _short(text: str) -> str:
    text = " ".join(text[: _SHOWN_CHARS * 2].split())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


class _Unreadable(ValueError):
    """Not JSON, or JSON past the bounds."""


def _no_constant(name: str) -> Any:
    raise _Unreadable(f"{name} is not JSON")


def _bounded(value: Any) -> None:
    """_Unreadable when a value holds more than ``MAX_VALUES`` values or nests deeper than
    ``MAX_DEPTH`` (iterative: a deep value cannot exhaust the stack)."""
    count = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise _Unreadable(f"it holds more than {MAX_VALUES} values")
        if depth > MAX_DEPTH:
            raise _Unreadable(f"it is nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, float) and not math.isfinite(item):
            raise _Unreadable(f"{item} is not a JSON number")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


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


def _extract(text: str) -> tuple[Any, str]:
    """The JSON value an answer holds, with its text: the whole text, else the first fenced
    block's, else the first value starting at one of the first ``MAX_STARTS`` brackets (text
    around it ignored). _Unreadable with the first problem found when none is JSON."""
    stripped = text.strip()
    problem = "no JSON value found"
    try:
        value, end = _decode_at(stripped, 0)
        if not stripped[end:].strip():
            return value, stripped
    except _Unreadable as error:
        problem = str(error)
    fence = _FENCE.search(stripped)
    if fence is not None:
        close = stripped.find("```", fence.end())
        inner = stripped[fence.end() : close if close >= 0 else len(stripped)].strip()
        try:
            value, end = _decode_at(inner, 0)
            if not inner[end:].strip():
                return value, inner
        except _Unreadable as error:
            problem = str(error)
    for match in itertools.islice(_STARTS.finditer(stripped), MAX_STARTS):
        try:
            value, end = _decode_at(stripped, match.start())
        except _Unreadable:
            continue
        return value, stripped[match.start() : end]
    raise _Unreadable(problem)


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
        validator = _validator(schema_key)
    except Exception as error:  # checked when set; never fail a run on it here
        return Rejected(prompts.TYPED_ANSWER_UNCHECKED.format(problem=_short(str(error))))
    try:
        value, _ = _extract(text)
    except _Unreadable as error:
        if not (_accepts_string(schema) and text.strip()):
            return Rejected(prompts.TYPED_ANSWER_NOT_JSON.format(problem=error, kind=kind))
        value = text.strip()
    try:
        _bounded(value)
    except _Unreadable as error:
        return Rejected(prompts.TYPED_ANSWER_TOO_BIG.format(problem=error, kind=kind))
    try:
        problems = list(itertools.islice(validator.iter_errors(value), MAX_PROBLEMS + 1))
    except Exception as error:  # a schema feature that failed on this value: say so, go on
        return Rejected(prompts.TYPED_ANSWER_UNCHECKED.format(problem=_short(str(error))))
    if _accepts_string(schema) and problems and not isinstance(value, str) and text.strip():
        # "Final Answer: 48" for a string schema: the text is the string.
        plain = text.strip()
        if not any(True for _ in itertools.islice(validator.iter_errors(plain), 1)):
            value, problems = plain, []
    if problems:
        named = "; ".join(_problem(p) for p in problems[:MAX_PROBLEMS])
        if len(problems) > MAX_PROBLEMS:
            named += "; and more"
        return Rejected(prompts.TYPED_ANSWER_INVALID.format(problems=named, kind=kind))
    return Typed(value, json.dumps(value, ensure_ascii=False))


def _problem(error: Any) -> str:
    """One validation failure in words: where in the answer, and what."""
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return f"at {'$' + path}: {_short(error.message)}"
