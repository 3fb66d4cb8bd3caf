"""Reading a typed answer (``nodes/reading/typed_answer.py``): the JSON value in an answer's text,
checked against the schema; pure, never raises, bounded on what a model writes. And the schema
itself: what ``response_format`` becomes, what ``answer_schema`` accepts."""

from __future__ import annotations

import dataclasses
import json
import time
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typing_extensions import TypedDict

from reactgraph.nodes.loop import prompts
from reactgraph.nodes.reading.typed_answer import (
    MAX_ANSWER_CHARS,
    MAX_DEPTH,
    MAX_SCHEMA_CHARS,
    MAX_VALUES,
    Rejected,
    Typed,
    check_schema,
    read_typed,
    schema_of,
)

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


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=30,
    )
)
def test_any_json_value_is_read_back_as_itself(value: object) -> None:
    found = read_typed(json.dumps(value), {})
    assert found == Typed(value, json.dumps(value, ensure_ascii=False))


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
