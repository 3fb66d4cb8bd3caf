"""Reading a typed answer (``nodes/reading/typed_answer.py``): the JSON value in an answer's text,
checked against the schema; pure, never raises, bounded on what a model writes. And the schema
itself: what ``response_format`` becomes, what ``answer_schema`` accepts."""

from __future__ import annotations

import dataclasses
import json
import time
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typing_extensions import TypedDict

from reactgraph.nodes.reading import validation
from reactgraph.nodes.reading.answer_schema import (
    MAX_APPLIED,
    MAX_CHAIN,
    MAX_SCHEMA_CHARS,
    check_schema,
    schema_of,
)
from reactgraph.nodes.reading.typed_answer import (
    MAX_ANSWER_CHARS,
    MAX_DEPTH,
    MAX_VALUES,
    Rejected,
    Typed,
    read_typed,
)
from reactgraph.nodes.reading.validation import MAX_PATTERN_SIZE
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.storable import MAX_INT, MIN_INT, storable

YEARS = {
    "type": "object",
    "properties": {"years": {"type": "integer"}, "first": {"type": "string"}},
    "required": ["years", "first"],
}
GOOD = {"years": 48, "first": "Eiffel Tower"}


@pytest.mark.parametrize(
    "text",
    [
        '{"years": 48, "first": "Eiffel Tower"}',
        '  {"years": 48,\n "first": "Eiffel Tower"}  ',
        '```json\n{"years": 48, "first": "Eiffel Tower"}\n```',
        '```\n{"years": 48, "first": "Eiffel Tower"}\n```',
        'Here is the answer:\n```json\n{"years": 48, "first": "Eiffel Tower"}\n```\nThanks.',
        'The answer is {"years": 48, "first": "Eiffel Tower"} as asked.',
        'Using {braces} loosely, then {"years": 48, "first": "Eiffel Tower"}',
    ],
)
def test_the_json_value_is_read_with_text_or_a_fence_around_it(text: str) -> None:
    found = read_typed(text, YEARS)
    assert found == Typed(GOOD, json.dumps(GOOD))


def test_what_failed_validation_is_named() -> None:
    found = read_typed('{"years": "48", "extra": 1}', YEARS)
    assert isinstance(found, Rejected)
    assert "at $.years: '48' is not of type 'integer'" in found.error
    assert "'first' is a required property" in found.error
    nested = {"type": "object", "properties": {"items": {"type": "array", "items": YEARS}}}
    deep = read_typed('{"items": [{"years": 1, "first": "a"}, {"years": 2}]}', nested)
    assert isinstance(deep, Rejected) and "at $.items[1]:" in deep.error


@pytest.mark.parametrize(
    "text", ["forty-eight years", '{"years": 48, "first": "Eif', '```json\n{"years": 4', ""]
)
def test_text_or_truncated_json_gets_a_correction_asking_for_json(text: str) -> None:
    found = read_typed(text, YEARS)
    assert isinstance(found, Rejected)
    assert found.error.startswith("Your Final Answer is not JSON")
    assert "one JSON object" in found.error


def test_a_string_schema_takes_plain_text_and_json_strings() -> None:
    schema = {"type": "string", "maxLength": 10}
    assert read_typed("Paris", schema) == Typed("Paris", '"Paris"')
    assert read_typed('"Paris"', schema) == Typed("Paris", '"Paris"')
    assert read_typed("48", schema) == Typed("48", '"48"')
    assert isinstance(read_typed("a very long city name", schema), Rejected)


def test_scalars_and_arrays() -> None:
    assert read_typed("48", {"type": "integer"}) == Typed(48, "48")
    assert read_typed("[1, 2]", {"type": "array", "items": {"type": "integer"}}) == Typed(
        [1, 2], "[1, 2]"
    )
    assert isinstance(read_typed("NaN", {"type": "number"}), Rejected)
    assert isinstance(read_typed("1e999", {"type": "number"}), Rejected)


def test_what_a_model_writes_is_bounded_before_it_is_validated() -> None:
    long = read_typed('{"first": "' + "x" * MAX_ANSWER_CHARS + '"}', YEARS)
    assert isinstance(long, Rejected) and "over the limit" in long.error
    deep = read_typed("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), {"type": "array"})
    assert isinstance(deep, Rejected) and "nested more than" in deep.error
    very_deep = read_typed("[" * 50_000, {"type": "array"})  # no RecursionError escapes
    assert isinstance(very_deep, Rejected)
    many = read_typed(json.dumps(list(range(MAX_VALUES + 1))), {"type": "array"})
    assert isinstance(many, Rejected) and f"more than {MAX_VALUES} values" in many.error
    huge_int = read_typed("9" * 5000, {"type": "integer"})
    assert isinstance(huge_int, Rejected)


def test_unique_items_is_checked_by_hashing() -> None:
    schema = {"type": "array", "uniqueItems": True}
    items = [{"k": i, "v": [i, str(i)]} for i in range(MAX_VALUES // 6)]
    started = time.perf_counter()
    assert isinstance(read_typed(json.dumps(items), schema), Typed)
    spent = time.perf_counter() - started
    repeated = read_typed(json.dumps([*items, {"v": [0, "0"], "k": 0.0}]), schema)
    assert isinstance(repeated, Rejected) and "non-unique" in repeated.error
    assert isinstance(read_typed("[1, true]", schema), Typed)  # true is not 1 in JSON Schema
    assert spent < 30  # pairwise comparison would be ~500k dict comparisons; hashing is linear


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]",:0123456789aetrunl \n`json\\', max_size=400))
def test_reading_never_raises(text: str) -> None:
    found = read_typed(text, YEARS)
    assert isinstance(found, Typed | Rejected)
    if isinstance(found, Typed):
        assert json.loads(found.text) == found.value


def made_storable(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(k): made_storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [made_storable(v) for v in value]
    return value


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(MIN_INT, MAX_INT) | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=30,
    )
)
def test_any_json_value_is_read_back_as_itself_made_storable(value: object) -> None:
    """Itself, but for NUL and lone surrogates (which JSON escapes can write and no
    checkpointer stores): U+FFFD, as in every other text a model writes."""
    found = read_typed(json.dumps(value), {})
    kept = made_storable(value)
    assert found == Typed(kept, json.dumps(kept, ensure_ascii=False))


def test_the_corrections_are_the_prompts_constants() -> None:
    invalid = read_typed('{"years": 1}', YEARS)
    assert isinstance(invalid, Rejected)
    assert invalid.error.startswith(prompts.TYPED_ANSWER_INVALID.split("{")[0])


# --- The schema -------------------------------------------------------------------------------


class Years(BaseModel):
    years: int
    first: str


class YearsDict(TypedDict):
    years: int
    first: str


class YearsPlainDict(typing.TypedDict):
    years: int
    first: str


@dataclasses.dataclass
class YearsData:
    years: int
    first: str


@pytest.mark.parametrize("kind", [Years, YearsDict, YearsPlainDict, YearsData])
def test_a_class_becomes_its_json_schema(kind: type) -> None:
    schema = check_schema(schema_of(kind))
    assert schema["type"] == "object" and set(schema["required"]) == {"years", "first"}
    assert read_typed(json.dumps(GOOD), schema) == Typed(GOOD, json.dumps(GOOD))
    assert isinstance(read_typed('{"years": "x", "first": "y"}', schema), Rejected)


def test_a_nested_pydantic_model_refers_to_its_own_parts() -> None:
    class Place(BaseModel):
        name: str

    class Trip(BaseModel):
        places: list[Place]

    schema = check_schema(schema_of(Trip))
    assert "$defs" in schema
    assert isinstance(read_typed('{"places": [{"name": "Paris"}]}', schema), Typed)
    assert isinstance(read_typed('{"places": [{"nom": "Paris"}]}', schema), Rejected)


def test_a_schema_is_checked() -> None:
    assert check_schema(YEARS) == YEARS
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        check_schema({"type": "integer", "minimum": "zero"})
    with pytest.raises(ValueError, match="refer only to its own parts"):
        check_schema({"$ref": "https://example.com/schema.json"})
    with pytest.raises(ValueError, match="which it does not hold"):
        check_schema({"$ref": "#/$defs/Missing"})
    with pytest.raises(ValueError, match=f"at most {MAX_SCHEMA_CHARS}"):
        check_schema({"description": "x" * MAX_SCHEMA_CHARS})
    with pytest.raises(TypeError):
        check_schema(["not", "an", "object"])
    with pytest.raises(TypeError):
        check_schema({"default": object()})
    with pytest.raises(TypeError):
        schema_of("a string")


# A pattern Python's backtracking ``re`` takes exponential time on: 24 characters 0.6 s, 40
# about 11 hours, the GIL held.
BACKTRACKING = "^(a+)+$"
HOURS = "a" * 40 + "b"


def no_python_re(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's ``re.search``/``re.match`` fail the test if a schema's pattern reaches them
    (jsonschema's own keywords call ``re.search`` with the pattern)."""
    import re

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a schema pattern ran on Python's re: {args[:1]}")

    monkeypatch.setattr(re, "search", forbidden)
    monkeypatch.setattr(re, "match", forbidden)


@pytest.mark.parametrize(
    ("schema", "bad", "good"),
    [
        ({"type": "string", "pattern": BACKTRACKING}, json.dumps(HOURS), '"aaa"'),
        (
            {"type": "object", "propertyNames": {"pattern": BACKTRACKING}},
            json.dumps({HOURS: 1}),
            '{"aaa": 1}',
        ),
        (
            {
                "type": "object",
                "patternProperties": {BACKTRACKING: {"type": "integer"}},
                "additionalProperties": False,
            },
            json.dumps({HOURS: 1}),
            '{"aaa": 1}',
        ),
        (
            {"type": "object", "patternProperties": {BACKTRACKING: {"type": "integer"}}},
            json.dumps({"a" * 30: "not an integer", HOURS: "x"}),
            json.dumps({"a" * 30: 1, HOURS: "x"}),
        ),
        (
            {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "patternProperties": {"^x-": {}},
                "additionalProperties": {"type": "integer"},
            },
            '{"id": "a", "x-note": "any", "other": "text"}',
            '{"id": "a", "x-note": "any", "other": 3}',
        ),
    ],
)
def test_schema_patterns_run_on_a_linear_time_engine_never_on_pythons_re(
    schema: dict[str, Any], bad: str, good: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pattern``, ``patternProperties`` (and ``additionalProperties`` beside them),
    ``propertyNames``: a backtracking pattern on 41 characters is refused at once (on Python's
    ``re``: hours), and nothing reaches ``re``."""
    checked = check_schema(schema)
    no_python_re(monkeypatch)
    refused = read_typed(bad, checked)
    assert isinstance(refused, Rejected) and "does not match the answer's JSON schema" in (
        refused.error
    )
    assert isinstance(read_typed(good, checked), Typed)


def test_patterns_follow_re2s_syntax() -> None:
    """RE2's syntax, closer to ECMA-262 than Python's: Unicode classes, ASCII ``\\d``."""
    letters = check_schema({"type": "string", "pattern": "^\\p{L}+$"})
    assert isinstance(read_typed('"Eiffelturm\u00e9"', letters), Typed)
    assert isinstance(read_typed('"Eiffel 1889"', letters), Rejected)
    digits = check_schema({"type": "string", "pattern": "^\\d+$"})
    assert isinstance(read_typed('"1889"', digits), Typed)
    assert isinstance(read_typed('"\u0661\u0662"', digits), Rejected)  # Arabic-Indic digits


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "string", "pattern": "(a)\\1"}, "cannot run in linear time"),
        ({"type": "string", "pattern": "^(?=a)"}, "no backreferences or lookaround"),
        ({"type": "object", "patternProperties": {"(?<!x)y": {}}}, "cannot run in linear"),
        ({"properties": {"a": {"type": "string", "pattern": "["}}}, "at /properties/a"),
        ({"type": "string", "pattern": "\\p{L}{100}"}, f"at most {MAX_PATTERN_SIZE}"),
        (
            {"patternProperties": {"^a": {}}, "unevaluatedProperties": False},
            "both unevaluatedProperties",
        ),
    ],
)
def test_a_pattern_the_linear_engine_cannot_run_is_refused_with_the_schema(
    schema: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValueError, match=re_escape(says)):
        check_schema(schema)


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_a_pattern_is_read_only_where_a_schema_has_one() -> None:
    """An ``enum`` value, a ``const`` or a property named "pattern" is no pattern."""
    check_schema({"enum": [{"pattern": "(a)\\1"}], "const": {"pattern": "(?=x)"}})
    schema = check_schema({"type": "object", "properties": {"pattern": {"type": "string"}}})
    assert isinstance(read_typed('{"pattern": "(a)\\\\1"}', schema), Typed)


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"$ref": "#"}, "loop back to the same value"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "at /$defs/a loop"),
        (
            {
                "$defs": {
                    "a": {"anyOf": [{"$ref": "#/$defs/b"}]},
                    "b": {"not": {"$ref": "#/$defs/a"}},
                },
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/a"}},
            },
            "loop back",
        ),
        ({"$dynamicAnchor": "meta", "$dynamicRef": "#meta"}, "loop back"),
        ({"$dynamicRef": "https://example.com/schema#meta"}, "refer only to its own parts"),
        ({"$dynamicRef": "#nowhere"}, "which it does not hold"),
        (
            {
                "$schema": "https://json-schema.org/draft/2019-09/schema",
                "$recursiveAnchor": True,
                "$recursiveRef": "#",
            },
            "loop back",
        ),
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "definitions": {"a": {"allOf": [{"$ref": "#/definitions/a"}]}},
            },
            "loop back",
        ),
        ({"properties": {"a": {"$id": "https://example.com/a", "$ref": "#"}}}, "$id only at"),
    ],
)
def test_a_schema_no_answer_can_pass_is_refused(schema: dict[str, Any], says: str) -> None:
    """A reference that comes back to the same value without going into it never ends (no
    answer passes: each was "could not be checked"); one outside the schema, or to nothing,
    cannot be read."""
    with pytest.raises(ValueError, match=re_escape(says)):
        check_schema(schema)


def test_a_recursive_schema_that_goes_into_the_answer_is_taken() -> None:
    class Node(BaseModel):
        name: str
        children: list[Node] = []

    for schema in (
        schema_of(Node),
        {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
        {
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {"next": {"$dynamicRef": "#node"}},
        },
    ):
        checked = check_schema(schema)
        tree = {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}
        value = tree if "$defs" in checked else {"kids": [{"kids": []}], "next": {"next": {}}}
        assert isinstance(read_typed(json.dumps(value), checked), Typed), schema


def test_references_that_expand_without_bound_are_refused() -> None:
    """Each definition used twice by the one before: 2^22 subschemas for one value (five
    minutes of checking before), refused; a chain of references longer than ``MAX_CHAIN``
    too."""
    doubling: dict[str, Any] = {f"d{i}": {"type": "string"} for i in (22,)}
    for i in range(22):
        doubling[f"d{i}"] = {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2}
    with pytest.raises(ValueError, match=f"more than {MAX_APPLIED} subschemas"):
        check_schema({"$defs": doubling, "$ref": "#/$defs/d0"})
    chain: dict[str, Any] = {f"c{i}": {"$ref": f"#/$defs/c{i + 1}"} for i in range(MAX_CHAIN)}
    chain[f"c{MAX_CHAIN}"] = {"type": "string"}
    with pytest.raises(ValueError, match=f"more than {MAX_CHAIN}"):
        check_schema({"$defs": chain, "$ref": "#/$defs/c0"})
    chain[f"c{MAX_CHAIN - 2}"] = {"type": "string"}  # the root and MAX_CHAIN - 1 of them
    check_schema({"$defs": chain, "$ref": "#/$defs/c0"})


def test_checking_one_answer_is_bounded_in_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """References that double at each level of the answer (each level is fine alone): an
    answer nested 30 deep would be checked 2^30 times. The check stops at its bound and says
    so; an answer the same schema checks cheaply still passes."""
    levels: dict[str, Any] = {"l0": {"type": "string"}}
    for i in range(1, 31):
        twice = [{"$ref": f"#/$defs/l{i - 1}"}] * 2
        levels[f"l{i}"] = {"type": ["array", "string"], "items": {"allOf": twice}}
    schema = check_schema({"$defs": levels, "$ref": "#/$defs/l30"})
    monkeypatch.setattr(validation, "MAX_CHECK_STEPS", 2_000)  # 2^12 applications below
    nested: Any = "x"
    for _ in range(12):
        nested = [nested]
    costly = read_typed(json.dumps(nested), schema)
    assert costly == Rejected(prompts.TYPED_ANSWER_TOO_COSTLY.format(limit=2_000, kind="value"))
    assert isinstance(read_typed('[["x"]]', schema), Typed)


def test_a_long_text_under_a_large_pattern_is_bounded_before_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pattern's run costs its text's length times its size: counted before it runs."""
    schema = check_schema({"type": "string", "pattern": "a.{999}b.{999}c"})
    monkeypatch.setattr(validation, "MAX_CHECK_STEPS", 10_000)
    long = read_typed(json.dumps("ab" * 10_000), schema)  # 20,000 x 15,991 / 10,000 steps
    assert isinstance(long, Rejected) and "takes too long to check" in long.error
    short = read_typed(json.dumps("ab" * 200), schema)
    assert isinstance(short, Rejected) and "does not match" in short.error


def test_a_plain_schema_checks_an_answer_of_every_allowed_value_within_the_bound() -> None:
    schema = check_schema(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "minimum": 0},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 20},
                },
                "required": ["n", "name"],
                "additionalProperties": False,
            },
        }
    )
    items = [{"n": i, "name": "paris"} for i in range((MAX_VALUES - 1) // 3)]
    assert isinstance(read_typed(json.dumps(items), schema), Typed)


def test_an_answer_no_checkpointer_can_store_is_corrected_or_cleaned() -> None:
    """A whole number outside 64 bits is refused (no checkpointer stores it: the run failed
    at its next write); NUL and lone surrogates, which JSON escapes write, become U+FFFD."""
    big = read_typed('{"years": 123456789012345678901234567890, "first": "x"}', YEARS)
    assert isinstance(big, Rejected) and "outside 64 bits" in big.error
    found = read_typed('{"years": 48, "first": "a\\ud800b", "x\\u0000": 1}', {"type": "object"})
    assert found == Typed(
        {"years": 48, "first": "a\ufffdb", "x\ufffd": 1},
        '{"years": 48, "first": "a\ufffdb", "x\ufffd": 1}',
    )


KEYWORDS = [
    "$schema", "$id", "$ref", "$dynamicRef", "$dynamicAnchor", "$anchor", "$defs", "allOf",
    "anyOf", "not", "if", "then", "properties", "patternProperties", "additionalProperties",
    "items", "prefixItems", "pattern", "type", "extends", "dependencies", "unevaluatedProperties",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-5, 5)
        | st.sampled_from(["#", "#/$defs/a", "(", "a+", "x"]),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from([*KEYWORDS, "a"]), inner, max_size=4)
        ),
        max_leaves=20,
    ).filter(lambda v: isinstance(v, dict))
)
def test_checking_any_schema_raises_only_value_or_type_errors(schema: dict[str, Any]) -> None:
    try:
        checked = check_schema(schema)
    except (ValueError, TypeError):
        return
    assert isinstance(read_typed('{"a": ["x", 1]}', checked), Typed | Rejected)
