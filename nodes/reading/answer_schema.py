"""Answer schemas: the answer's JSON schema (the ``answer_schema`` setting, ``build_graph``'s
``response_format``) and what one may be.

``schema_of`` turns what a developer passes (a pydantic model class, a ``TypedDict``, a
dataclass, or a JSON schema dict) into a JSON schema; ``check_schema`` checks one, raising
``ValueError``: a valid JSON schema of bounded size, whose references (``$ref``,
``$dynamicRef``) are its own and resolve, none of which loops back to the same value without
going into it (no answer could pass: checking it never ends), whose references expand to a
bounded number of subschemas, and whose patterns RE2 runs (``reactgraph.nodes.reading
.validation``). jsonschema's ``unevaluatedProperties`` reads ``patternProperties`` with
Python's ``re`` itself: the two together are refused.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

from reactgraph.nodes.reading.validation import (
    compiled_pattern,
    shown,
    validator_class,
    validator_of,
)

MAX_SCHEMA_CHARS = 20_000
"""The longest answer schema, as JSON: it is shown in every prompt of the run."""

MAX_APPLIED = 10_000
"""The most subschemas checking one value may apply, references expanded (``allOf``,
``anyOf``, ``$ref``...): more than any schema of ``MAX_SCHEMA_CHARS`` holds without references,
fewer than references doubling at each step make (2^22 took five minutes)."""

MAX_CHAIN = 64
"""The longest chain of subschemas applied to one value, references followed."""

_SCHEMA_DEPTH = 200


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


_REFS = ("$ref", "$dynamicRef", "$recursiveRef")

_IN_PLACE_ONE = ("not", "if", "then", "else")

_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")

_IN_PLACE_MAP = ("dependentSchemas", "dependencies")

_DRAFT3_IN_PLACE = ("type", "disallow", "extends")

_INTO_ONE = (
    "items",
    "additionalItems",
    "contains",
    "propertyNames",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
)

_INTO_MANY = ("prefixItems", "items")

_INTO_MAP = ("properties", "patternProperties")

_UNAPPLIED_MAP = ("$defs", "definitions")


def _schema(key: str, found: Any) -> Iterator[tuple[str, Any]]:
    """A keyword whose value is one subschema."""
    if isinstance(found, dict | bool):
        yield key, found


def _schema_list(key: str, found: Any) -> Iterator[tuple[str, Any]]:
    """A keyword whose value is a list of subschemas."""
    if isinstance(found, list):
        yield from ((f"{key}/{n}", value) for n, value in enumerate(found))


def _schema_map(key: str, found: Any) -> Iterator[tuple[str, Any]]:
    """A keyword whose value maps names to subschemas."""
    if isinstance(found, dict):
        yield from ((f"{key}/{name}", value) for name, value in found.items())


def _dependencies(key: str, found: Any) -> Iterator[tuple[str, Any]]:
    """A keyword whose value maps names to subschemas, or to lists of names (no schemas)."""
    for where, value in _schema_map(key, found):
        if isinstance(value, dict | bool):
            yield where, value


def _draft3(key: str, found: Any) -> Iterator[tuple[str, Any]]:
    """Draft 3's schemas among a type's names, or extended: one, or a list mixed with names."""
    for n, value in enumerate(found if isinstance(found, list) else [found]):
        if isinstance(value, dict):
            yield f"{key}/{n}", value


# How each keyword holds subschemas, and whether they apply to the same value (in place) or
# to a part of it (into it), in the order they are read.
_KEYWORDS = (
    (_IN_PLACE_ONE, _schema, True),
    (_IN_PLACE_MANY, _schema_list, True),
    (_DRAFT3_IN_PLACE, _draft3, True),
    (_IN_PLACE_MAP, _dependencies, True),
    (_INTO_ONE, _schema, False),
    (_INTO_MANY, _schema_list, False),
    ((*_INTO_MAP, *_UNAPPLIED_MAP), _schema_map, False),
)


def _children(node: Mapping[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """A schema's own subschemas: (where, subschema, whether it applies to the same value),
    read by keyword (an ``enum`` value or a property named "pattern" is no schema)."""
    for keys, read, same in _KEYWORDS:
        for key in keys:
            for where, value in read(key, node.get(key)):
                yield where, value, same


def _walk(root: Any) -> dict[int, tuple[str, Any]]:
    """Every subschema of ``root`` by its id: where it is (a JSON pointer) and the schema."""
    found: dict[int, tuple[str, Any]] = {}
    stack: list[tuple[str, Any, int]] = [("", root, 0)]
    while stack:
        where, node, depth = stack.pop()
        if depth > _SCHEMA_DEPTH:
            raise ValueError("answer_schema is nested too deeply")
        if not isinstance(node, dict) or id(node) in found:
            continue
        found[id(node)] = (where or "/", node)
        stack.extend((f"{where}/{at}", child, depth + 1) for at, child, _ in _children(node))
    return found


def _refs(node: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """A schema's references: (keyword, reference)."""
    for word in _REFS:
        ref = node.get(word)
        if isinstance(ref, str):
            yield word, ref


def _target(validator: Any, word: str, ref: str, where: str) -> Any:
    """What a reference (``word`` at ``where``) leads to; ValueError unless it is one of the
    schema's own parts (``#...``) that the schema holds."""
    from referencing.exceptions import Unresolvable

    if not ref.startswith("#"):
        raise ValueError(
            f"answer_schema may refer only to its own parts ('#/...'), not {ref!r} "
            f"({word} at {where})"
        )
    try:
        return validator._resolver.lookup(ref).contents
    except Unresolvable:
        raise ValueError(
            f"answer_schema refers to {ref!r}, which it does not hold ({word} at {where})"
        ) from None


def _check_refs(nodes: dict[int, tuple[str, Any]], validator: Any) -> dict[int, list[int]]:
    """Each subschema's subschemas applied to the same value, its references' targets
    included; ValueError for a reference that is not the schema's own or does not resolve, and
    for an ``$id`` below the root (references then resolve against another base)."""
    root = id(validator.schema)
    edges: dict[int, list[int]] = {}
    for key, (where, node) in nodes.items():
        if key != root and isinstance(node.get("$id"), str):
            raise ValueError(f"answer_schema may set $id only at its root, not at {where}")
        # A boolean schema applies nothing more.
        edges[key] = [id(c) for _, c, same in _children(node) if same and isinstance(c, dict)]
        for word, ref in _refs(node):
            target = _target(validator, word, ref, where)
            if not isinstance(target, dict):
                continue
            edges[key].append(id(target))
            if id(target) not in nodes:  # an anchor's schema is one of them; never else
                nodes[id(target)] = (ref, target)
                edges.setdefault(id(target), [])
    return edges


def _unfinished(
    pending: Iterator[int], visiting: set[int], count: dict[int, int], nodes: Mapping[int, Any]
) -> int | None:
    """The next of ``pending`` not counted yet, None when there is none; ValueError for one
    being visited: it applies to the same value in a loop."""
    for child in pending:
        if child in visiting:
            raise ValueError(
                f"answer_schema's references at {nodes[child][0]} loop back to the same value "
                "without going into it: checking an answer would never end, so none could pass"
            )
        if child not in count:
            return child
    return None


def _tally(node: int, where: str, below: Any, count: dict[int, int], chain: dict[int, int]) -> None:
    """Count what a subschema applies to one value (its own ``below`` counted already): how
    many subschemas, and the longest chain; ValueError past ``MAX_APPLIED`` or ``MAX_CHAIN``."""
    count[node] = min(MAX_APPLIED + 1, 1 + sum(count[c] for c in below))
    chain[node] = 1 + max((chain[c] for c in below), default=0)
    if count[node] > MAX_APPLIED:
        raise ValueError(
            f"answer_schema's references at {where} expand to more than "
            f"{MAX_APPLIED} subschemas applied to one value"
        )
    if chain[node] > MAX_CHAIN:
        raise ValueError(
            f"answer_schema's references at {where} chain more than {MAX_CHAIN} "
            "subschemas applied to one value"
        )


def _check_expansion(nodes: dict[int, tuple[str, Any]], edges: dict[int, list[int]]) -> None:
    """ValueError for subschemas that apply to the same value in a loop (``{"$ref": "#"}``:
    checking never ends, so no answer passes), or whose references expand to more than
    ``MAX_APPLIED`` subschemas for one value or a chain longer than ``MAX_CHAIN``. Iterative,
    each subschema counted once."""
    count: dict[int, int] = {}
    chain: dict[int, int] = {}
    visiting: set[int] = set()
    for start in nodes:
        if start in count:
            continue
        stack = [(start, iter(edges.get(start, ())))]
        visiting.add(start)
        while stack:
            node, pending = stack[-1]
            child = _unfinished(pending, visiting, count, nodes)
            if child is not None:
                visiting.add(child)
                stack.append((child, iter(edges.get(child, ()))))
                continue
            stack.pop()
            visiting.discard(node)
            _tally(node, nodes[node][0], edges.get(node, ()), count, chain)


def _check_own_patterns(node: Mapping[str, Any], where: str) -> None:
    """ValueError for a regular expression of the schema at ``where`` (a
    ``patternProperties`` name or its ``pattern``) that RE2 cannot run."""
    named = node.get("patternProperties")
    patterns = list(named) if isinstance(named, dict) else []
    if isinstance(node.get("pattern"), str):
        patterns.append(node["pattern"])
    for pattern in patterns:
        try:
            compiled_pattern(pattern)
        except ValueError as error:
            raise ValueError(f"answer_schema's pattern at {where}: {error}") from None


def _check_patterns(nodes: dict[int, tuple[str, Any]]) -> None:
    """ValueError for a pattern RE2 cannot run, and for ``unevaluatedProperties`` in a schema
    with ``patternProperties`` (jsonschema would run those on ``re``)."""
    evaluated, named = None, None
    for where, node in nodes.values():
        _check_own_patterns(node, where)
        if isinstance(node.get("patternProperties"), dict) and node["patternProperties"]:
            named = named or where
        if "unevaluatedProperties" in node:
            evaluated = evaluated or where
    if evaluated is not None and named is not None:
        raise ValueError(
            f"answer_schema cannot have both unevaluatedProperties (at {evaluated}) and "
            f"patternProperties (at {named}): their patterns would run on a backtracking engine; "
            "use additionalProperties instead"
        )


def check_schema(value: Any) -> dict[str, Any]:
    """``value`` as the ``answer_schema`` setting: a JSON object that is a valid JSON schema
    (Draft 2020-12 unless its ``$schema`` names another), at most ``MAX_SCHEMA_CHARS`` as JSON,
    whose references are all its own (``#...``) and resolve, none looping back to the same
    value, expanding to at most ``MAX_APPLIED`` subschemas for one value, and whose patterns RE2
    runs; TypeError for what is not a JSON object, ValueError for what is no such schema. A
    copy, in plain JSON values."""
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

    _check_patterns(_walk(schema))  # before the metaschema: RE2's reason, not "is not a 'regex'"
    if not isinstance(schema.get("$schema", ""), str):
        raise ValueError("answer_schema's $schema must be the URI of a JSON Schema draft")
    try:
        validator_class(text).check_schema(schema, format_checker=format_checker())
    except exceptions.SchemaError as error:
        where = "/".join(str(p) for p in error.absolute_path)
        raise ValueError(
            f"answer_schema is not a valid JSON schema: {shown(error.message)}"
            + (f" (at {where})" if where else "")
        ) from None
    validator = validator_of(text)
    nodes = _walk(validator.schema)
    _check_expansion(nodes, _check_refs(nodes, validator))
    return schema


@functools.lru_cache(maxsize=1)
def format_checker() -> Any:
    """The formats the metaschema checks, a pattern's ("regex") by RE2."""
    from jsonschema import FormatChecker

    checker = FormatChecker()
    checker.checks("regex", raises=ValueError)(compiled_pattern)
    return checker


def schema_text(schema: Mapping[str, Any]) -> str:
    """The schema as the prompt shows it."""
    return json.dumps(schema, ensure_ascii=False)


def answer_kind(schema: Mapping[str, Any]) -> str:
    """What the prompts ask for: "object" for an object schema, else "value"."""
    kind = schema.get("type")
    if kind == "object" or (kind is None and "properties" in schema):
        return "object"
    return "value"


def accepts_string(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)
