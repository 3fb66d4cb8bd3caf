"""The grammar of one ReAct step (``constrained_decoding="gbnf"``) and the JSON-schema grammar,
read back: as a regular expression (exactly what it allows), as random replies it allows (every
one must be read by the parser as an action or an answer), and by llama.cpp's own grammar parser
when llama-cpp-python and SmolLM2 are installed (``make test-real-model`` installs them)."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

from reactgraph.nodes.calling.binding import action_arguments
from reactgraph.nodes.calling.gbnf import MAX_DEPTH, literal
from reactgraph.nodes.calling.grammar import (
    STEP_TOKENS,
    Lengths,
    callable_names,
    react_grammar,
    schema_grammar,
)
from reactgraph.nodes.reading.textparser import clean_reply, parse_react
from reactgraph.nodes.running.tool_io import tool_arguments
from reactgraph.tools import calculator, search_tools
from tests.fakes import add
from tests.gbnf_reader import llama_parses, read, sample, to_regex

TEXT = {"query": {"type": "string"}}
SEED: dict[str, Any] = {"search": TEXT, "lookup": {"keyword": {"type": "string"}}}
SEED["calculator"] = {"expression": {"type": "string"}}
NOTES = {**SEED, "update_notes": {"text": {"type": "string", "maxLength": 4000}}}
SCHEMAS: dict[str, Any] = {
    "add": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "book": {
        "city": {"type": "string", "maxLength": 20},
        "nights": {"type": "integer", "default": 1},
        "class": {"enum": ["economy", "first", 'say "hi"'], "default": "economy"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3, "default": []},
    },
    "optional": {
        "x": {"type": "number", "default": 0},
        "y": {"type": "boolean", "default": False},
        "z": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "nested": {
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
        },
        "limit": {"type": "integer"},
    },
    "seconds": {"seconds": {"type": "integer"}},
    "pid": {},
    "mode": {"mode": {"enum": ["fast", "slow"]}},
}
HOSTILE = [
    'say "hi"',
    "back\\slash",
    "tab\tname",
    "中文工具",
    "emoji😀tool",
    "x ::= y",
    "root",
    "#hash",
    "a|b",
    "(paren)",
    "nul\x00byte",
    "bell\x07",
    "line\u2028sep",
    "new\nline",
    "open[bracket",
    "close]bracket",
    "Final Answer",
    "",
]


def checked(grammar: str) -> str:
    """The grammar, once llama.cpp's parser took it (when it is installed here)."""
    assert llama_parses(grammar) in (True, None), grammar
    return grammar


def replies(grammar: str, n: int = 300, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [sample(grammar, rng) for _ in range(n)]


@pytest.mark.parametrize(
    "actions", [SEED, NOTES, SCHEMAS, {**SEED, **SCHEMAS}], ids=["seed", "notes", "schemas", "all"]
)
@pytest.mark.parametrize("cap", [64, 4096, None])
def test_every_reply_the_grammar_allows_is_an_action_or_an_answer(
    actions: dict[str, Any], cap: int | None
) -> None:
    grammar = checked(react_grammar(actions, max_completion_tokens=cap))
    pattern = to_regex(grammar)
    kinds = set()
    for text in replies(grammar):
        assert pattern.fullmatch(text)
        assert (
            clean_reply(text) == text.strip()
        )  # nothing cut as an Observation: the stop never hits
        parsed = parse_react(text, list(actions))
        assert parsed["kind"] in ("action", "answer"), (text, parsed)
        kinds.add(parsed["kind"])
        if parsed["kind"] == "action":
            name = parsed["action"]
            assert name in actions
            arguments = actions[name]
            given = parsed["action_input"]
            if list(arguments.values()) == [{"type": "string"}]:  # the text as written
                assert text[text.index(f"{name}[") + len(name) + 1 : -1].strip() == given
            if len(arguments) > 1:
                value = json.loads(given)
                schema = {"type": "object", "properties": arguments}
                schema["required"] = [a for a, s in arguments.items() if "default" not in s]
                schema["additionalProperties"] = False
                jsonschema.validate(value, schema)
    assert kinds == {"action", "answer"}


def test_the_forced_answer_s_grammar_has_only_the_answer() -> None:
    grammar = checked(react_grammar(NOTES, forced=True, max_completion_tokens=64))
    pattern = to_regex(grammar)
    assert not pattern.fullmatch("Thought: t\nAction: search[x]")
    assert pattern.fullmatch("Thought: t\nFinal Answer: 42")
    assert "search" not in grammar
    for text in replies(grammar):
        assert parse_react(text, list(NOTES))["kind"] == "answer"


def test_every_tool_name_and_update_notes_are_offered() -> None:
    tools = [*search_tools(), calculator, add]
    actions = action_arguments(
        {t.name: t for t in tools}, {}, [("update_notes", "replace your notes")], 300
    )
    grammar = checked(react_grammar(actions, max_completion_tokens=200))
    pattern = to_regex(grammar)
    for name in ("search", "lookup", "calculator", "update_notes"):
        assert pattern.fullmatch(f"Thought: I look.\nAction: {name}[Eiffel Tower]")
    assert pattern.fullmatch('Thought: sum\nAction: add[{"a": 1, "b": 2}]')
    assert not pattern.fullmatch('Thought: sum\nAction: add[{"a": 1}]')  # b is required
    assert not pattern.fullmatch('Thought: sum\nAction: add[{"a": "1", "b": 2}]')
    assert not pattern.fullmatch("Thought: t\nAction: unknown[x]")
    # What the grammar lets the model write, the tool takes.
    rng = random.Random(3)
    for _ in range(200):
        parsed = parse_react(sample(grammar, rng), [*actions])
        if parsed["kind"] == "action" and parsed["action"] == "add":
            assert set(tool_arguments(add, parsed["action_input"])) == {"a", "b"}


def test_a_step_is_one_thought_line_then_one_action_or_answer() -> None:
    pattern = to_regex(checked(react_grammar(SEED, max_completion_tokens=4096)))
    assert pattern.fullmatch("Thought: I need the year.\nAction: search[Eiffel Tower]")
    assert pattern.fullmatch("Thought: I know it.\nFinal Answer: 1889")
    for text in [
        "Action: search[x]",  # no Thought
        "Thought: a\nb\nAction: search[x]",  # two lines of thought
        "Thought: a\nAction: search[x]\nAction: lookup[y]",  # two actions
        "Thought: a\nAction: search[x]\nFinal Answer: y",
        "Thought: a\nFinal Answer: ",  # an empty answer
        "Thought: a\nFinal Answer: **",  # only what the parser strips
        "Thought: a\nAction: search[]",  # an empty input
        "Thought: a\nAction: search[x]y]",  # a bracket inside a text input
        "Thought: a\nAction: search[x\ny]",
        "Thought: Observation: made up\nFinal Answer: 3",  # never the stop sequence
        "Thought: a\nFinal Answer: see Observation: 3",
        "Thought: a\nAction: search[Observation: x]",
        "The answer is 18 years.",
    ]:
        assert not pattern.fullmatch(text), text


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_tool_names_are_escaped_or_left_out(name: str) -> None:
    actions = {**SEED, name: TEXT}
    grammar = checked(react_grammar(actions, max_completion_tokens=4096))
    read(grammar)  # every rule reads back whole: no name ended a literal or a line
    pattern = to_regex(grammar)
    reply = f"Thought: t\nAction: {name}[x]"
    offered = name in callable_names(actions)
    parsed = parse_react(reply, list(actions))
    # Offered exactly when the parser reads it back as that tool.
    assert offered == (parsed["kind"] == "action" and parsed["action"] == name)
    assert bool(pattern.fullmatch(reply)) == offered
    if offered:
        assert literal(name + "[") in grammar
    assert pattern.fullmatch("Thought: t\nAction: search[x]")  # the others stay


def test_hostile_names_and_values_inside_a_schema_are_escaped() -> None:
    hostile = {
        'k"ey': {"type": "string"},
        "back\\slash\n": {"enum": ['a"]b', "c\\d", "\x00", "中"]},
    }
    grammar = checked(react_grammar({"tool": hostile}, max_completion_tokens=4096))
    pattern = to_regex(grammar)
    value = {'k"ey': "v", "back\\slash\n": 'a"]b'}
    reply = f"Thought: t\nAction: tool[{json.dumps(value, ensure_ascii=False)}]"
    assert pattern.fullmatch(reply)
    parsed = parse_react(reply, ["tool"])
    assert parsed["kind"] == "action" and json.loads(parsed["action_input"]) == value


@pytest.mark.parametrize("count", [1, 10, 100])
def test_a_grammar_for_many_tools_stays_small(count: int) -> None:
    tools = {f"tool_{n:03d}": TEXT for n in range(count)}
    tools.update({f"json_tool_{n:03d}": SCHEMAS["add"] for n in range(count)})
    grammar = checked(react_grammar(tools, max_completion_tokens=4096))
    names = sum(len(literal(name + "[")) for name in tools)
    # Each tool adds its name and a rule line of a few dozen characters; shared rules once.
    assert len(grammar) <= 1500 + names + 40 * len(tools), len(grammar)
    assert len(grammar.splitlines()) <= 20 + 2 * len(tools)
    pattern = to_regex(grammar)
    for name in tools:
        given = '{"a": 1, "b": 2}' if name.startswith("json") else "x"
        assert pattern.fullmatch(f"Thought: t\nAction: {name}[{given}]")


def test_the_lengths_fit_the_reply_cap() -> None:
    assert Lengths.within(None) == Lengths()
    small = Lengths.within(64, longest_name=10)
    assert small.thought + small.input <= 64 - 10 and small.thought + small.answer <= 64 - 10
    grammar = react_grammar(SEED, max_completion_tokens=64)
    pattern = to_regex(grammar)
    assert pattern.fullmatch(f"Thought: {'a' * small.thought}\nFinal Answer: {'b' * small.answer}")
    assert not pattern.fullmatch(f"Thought: {'a' * (small.thought + 1)}\nFinal Answer: b")
    assert not pattern.fullmatch(f"Thought: a\nAction: search[{'q' * (small.input + 1)}]")
    big = Lengths.within(10**6)
    assert big == Lengths()  # bounded whatever the cap: a grammar stays small


def nested(levels: int, bottom: dict[str, Any]) -> dict[str, Any]:
    """An object holding an object... ``levels`` deep, then ``bottom``."""
    schema = bottom
    for _ in range(levels):
        schema = {"type": "object", "properties": {"d": schema}, "required": ["d"]}
    return schema


DEEP = nested(MAX_DEPTH + 2, {"type": "string"})
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 40},
        "year": {"type": "integer"},
        "confidence": {"type": "number"},
        "sources": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
        "kind": {"enum": ["person", "place", None]},
        "extra": {"type": "object"},
    },
    "required": ["answer", "year", "sources"],
}


def test_an_answer_schema_makes_the_answer_a_json_value_following_it() -> None:
    for forced in (False, True):
        grammar = checked(
            react_grammar(
                SEED, forced=forced, answer_schema=ANSWER_SCHEMA, max_completion_tokens=512
            )
        )
        answers = 0
        for text in replies(grammar, 200):
            parsed = parse_react(text, list(SEED))
            assert parsed["kind"] in ("action", "answer")
            if parsed["kind"] == "answer":
                answers += 1
                value = json.loads(parsed["answer"])
                jsonschema.validate(value, {**ANSWER_SCHEMA, "additionalProperties": False})
        assert answers > (199 if forced else 0)


@pytest.mark.parametrize(
    "schema",
    [
        ANSWER_SCHEMA,
        {"type": "string", "minLength": 2, "maxLength": 5},
        {"type": "array", "items": {"type": "integer"}, "maxItems": 4},
        {"type": ["integer", "null"]},
        {"const": {"a": [1, "x"]}},
        {"anyOf": [{"type": "boolean"}, {"type": "object", "properties": {"b": {"type": "null"}}}]},
        {"type": "object", "properties": {"o1": {"type": "integer"}, "o2": {"type": "string"}}},
        {"description": "anything"},
        DEEP,
    ],
)
def test_a_json_schema_as_gbnf(schema: dict[str, Any]) -> None:
    grammar = checked(schema_grammar(schema, max_chars=30))
    pattern = to_regex(grammar)
    if schema is DEEP:  # followed MAX_DEPTH levels down; below, any JSON value
        schema = nested(MAX_DEPTH - 1, {})
    closed = json.loads(
        json.dumps(schema).replace('"properties"', '"additionalProperties": false, "properties"')
    )
    for text in replies(grammar, 200):
        assert pattern.fullmatch(text)
        jsonschema.validate(json.loads(text), closed)


def test_an_object_of_optional_properties_writes_any_of_them_with_commas_between() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    pattern = to_regex(schema_grammar(schema))
    for text in ["{}", '{"a": 1}', '{"b": 2}', '{"a":1,"b":2}']:
        assert pattern.fullmatch(text), text
    for text in ['{"b": 2, "a": 1}', '{, "b": 2}', '{"a": 1,}', '{"c": 1}']:
        assert not pattern.fullmatch(text), text


def test_misuse_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="answer_schema"):
        react_grammar(SEED, answer_schema="a string")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="schema"):
        schema_grammar(["not", "a", "dict"])  # type: ignore[arg-type]


def test_a_tool_whose_schema_cannot_be_read_is_left_out() -> None:
    grammar = react_grammar({**SEED, "broken": None})
    assert "broken" not in grammar


LABELLED: dict[str, Any] = {
    "mode": {"enum": ["Observation: made up", "OBSERVATION: x", "fine"]},
    "note": {"const": "see observation:\nbelow"},
    "Observation:": {"type": "integer"},  # a property so named
    "short": {"type": "string", "maxLength": 40},  # lengths exact: a colon is its escape
}


def no_observation(text: str) -> None:
    """Nothing the parser or the server's stop sequence would take for an Observation."""
    assert "observation:" not in text.lower(), text
    assert clean_reply(text) == text.strip(), text


@pytest.mark.parametrize("cap", [256, 4096])
def test_a_value_holding_observation_is_written_escaped_never_as_the_label(cap: int) -> None:
    """A ``const``, an ``enum`` value or a property's name holding "Observation:" was a literal
    the model could write, and the server's stop sequence cut the reply there: it is written
    with the n as its JSON escape, the same value, and no reply the grammar allows holds the
    label in any case."""
    grammar = checked(react_grammar({"tool": LABELLED}, max_completion_tokens=cap))
    assert "observation:" not in grammar.lower()
    pattern = to_regex(grammar)
    value = {"mode": "Observation: made up", "note": "see observation:\nbelow", "Observation:": 1}
    value["short"] = "at 10:30"
    raw = f"Thought: t\nAction: tool[{json.dumps(value)}]"
    assert not pattern.fullmatch(raw)
    escaped = json.dumps(value).replace("n:", "\\u006e:").replace("N:", "\\u004e:")
    escaped = escaped.replace("0:", "0\\u003a")
    reply = f"Thought: t\nAction: tool[{escaped}]"
    assert pattern.fullmatch(reply), reply
    no_observation(reply)
    parsed = parse_react(reply, ["tool"])
    assert parsed["kind"] == "action" and json.loads(parsed["action_input"]) == value
    schema = {"type": "object", "properties": LABELLED, "required": list(LABELLED)}
    for text in replies(grammar, n=200):
        no_observation(text)
        found = parse_react(text, ["tool"])
        assert found["kind"] in ("action", "answer"), (text, found)
        if found["kind"] == "action":
            jsonschema.validate(json.loads(found["action_input"]), schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"const": "Observation: done"},
        {"enum": ["observation: a", {"Observation:": "n:"}]},
        {"type": "object", "properties": {"Observation:": {"type": "string", "maxLength": 9}}},
    ],
)
def test_an_answer_schemas_values_never_write_the_label(schema: dict[str, Any]) -> None:
    for grammar in (
        react_grammar(SEED, forced=True, answer_schema=schema, max_completion_tokens=512),
        schema_grammar(schema),
    ):
        checked(grammar)
        assert "observation:" not in grammar.lower()
        for text in replies(grammar, n=100):
            no_observation(text)
            if text.startswith("Thought"):
                found = parse_react(text, list(SEED))
                assert found["kind"] == "answer", (text, found)
                text = found["answer"]
            jsonschema.validate(json.loads(text), schema)


@pytest.mark.parametrize("most", [2, 3, 8])
def test_parallel_calls_allow_one_to_max_action_lines(most: int) -> None:
    grammar = checked(react_grammar(SEED, max_completion_tokens=4096, max_calls=most))
    pattern = to_regex(grammar)
    lines = [f"Action: search[topic {i}]" for i in range(most + 1)]
    for count in range(1, most + 1):
        assert pattern.fullmatch("Thought: several.\n" + "\n".join(lines[:count]))
    assert not pattern.fullmatch("Thought: too many.\n" + "\n".join(lines))
    assert pattern.fullmatch("Thought: I know it.\nFinal Answer: 1889")
    assert not pattern.fullmatch("Thought: a\nAction: search[x]\nFinal Answer: y")
    # What the grammar allows, the parser reads as that many calls (or one, or an answer).
    names = [*SEED]
    for text in replies(grammar, n=200):
        parsed = parse_react(text, names, max_calls=most)
        assert parsed["kind"] in ("action", "answer"), text
        assert all(c["error"] is None for c in parsed.get("actions", [])), text


def test_the_default_grammar_is_unchanged_by_the_parallel_settings() -> None:
    assert react_grammar(SEED, max_completion_tokens=4096) == react_grammar(
        SEED, max_completion_tokens=4096, max_calls=None
    )
    assert react_grammar(SEED, max_completion_tokens=4096) == react_grammar(
        SEED, max_completion_tokens=4096, max_calls=1
    )


def test_several_calls_fit_the_completion_cap() -> None:
    one = Lengths.within(1024, 10)
    eight = Lengths.within(1024, 10, calls=8)
    assert eight.input < one.input
    # The Thought, then eight lines of a label, a name and an input: within the cap.
    assert eight.thought + 8 * (eight.input + 10 + STEP_TOKENS) <= 1024
