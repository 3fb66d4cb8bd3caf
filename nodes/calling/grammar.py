"""The grammar of one ReAct step (``constrained_decoding="gbnf"``), built from the run's live
actions: one ``Thought:`` line, then exactly one of ``Action: <action>[<input>]`` or
``Final Answer: <text>``. Sent with each model call of the text format, a server that honours
it (llama.cpp's ``grammar``, vLLM's ``structured_outputs.grammar``) can only write replies this
loop's parser reads as an action or an answer.

- An action's input follows what it takes (``binding.parameters``): a line of text for one
  string argument (or a schema-less tool); a JSON value of its type for one other argument; a
  JSON object following its schema for several; ``[]`` for none.
- Only actions whose name the parser reads back as that action are offered (a name holding a
  bracket or a line break could never be called from a text Action; escaping keeps every
  other name, whatever it holds, inside its literal). ``build_graph`` takes no other tool
  (``reactgraph.nodes.loop.deps.TOOL_NAME``), so a graph's grammar offers all its tools.
- The forced answer's grammar has the Final Answer branch only; with an answer schema the
  answer is a JSON value following it.
- Every part has a length bound, from the run's ``max_completion_tokens``: a reply the grammar
  allows ends before the cap cuts it (for text of a character or more a token).

Pure and small: a hundred tools make a grammar of a few KB (tests/test_grammar.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reactgraph.nodes.calling.gbnf import Grammar, json_object, json_value, line_text, literal
from reactgraph.nodes.reading.textparser import parse_react

THOUGHT = "Thought: "
ACTION = "Action: "
FINAL_ANSWER = "Final Answer: "
MAX_THOUGHT_CHARS = 400
MAX_INPUT_CHARS = 300
MAX_ANSWER_CHARS = 600
MIN_CHARS = 8
STEP_TOKENS = 12
"""Tokens of a step besides its free text: the labels, the brackets, the line break."""
# Where the parser would strip or read a character at an input's start: a blank, a quote (a
# quoted input), an opening brace (a JSON input). Inside a text input: brackets.
_INPUT_FIRST = "\"'{*_`"
_INPUT_BANNED = "[]"
_ANSWER_FIRST = "*_`"

Actions = Mapping[str, Mapping[str, Any] | None]
"""Each action's name -> its arguments (name -> JSON schema, ``binding.parameters``), or None
for one the loop cannot call (its schema unreadable): left out."""


@dataclass(frozen=True)
class Lengths:
    """How long a step's free texts may be, in characters."""

    thought: int = MAX_THOUGHT_CHARS
    input: int = MAX_INPUT_CHARS
    answer: int = MAX_ANSWER_CHARS

    @classmethod
    def within(
        cls, max_completion_tokens: int | None, longest_name: int = 0, calls: int = 1
    ) -> Lengths:
        """Lengths whose whole step fits in ``max_completion_tokens`` (a character a token at
        least, as for plain text), half of the room each to the Thought and to what follows
        (shared by ``calls`` Action lines)."""
        if max_completion_tokens is None:
            return cls()
        room = max(2 * MIN_CHARS, max_completion_tokens - STEP_TOKENS - longest_name)
        thought = min(MAX_THOUGHT_CHARS, max(MIN_CHARS, room // 2))
        rest = max(MIN_CHARS, room - thought)
        each = max(MIN_CHARS, (rest - (calls - 1) * (STEP_TOKENS + longest_name)) // calls)
        return cls(thought, min(MAX_INPUT_CHARS, each), min(MAX_ANSWER_CHARS, rest))


def callable_names(actions: Actions) -> list[str]:
    """The actions the grammar offers: those the parser reads back, name and input, from
    ``Action: <name>[x]`` (and that the loop can call)."""
    names = list(actions)
    offered = []
    for name in names:
        if actions[name] is None or not name or len(name) > 200:
            continue
        parsed = parse_react(f"{THOUGHT}t\n{ACTION}{name}[x]", names)
        if parsed["kind"] == "action" and parsed["action"] == name:
            offered.append(name)
    return offered


def _input(grammar: Grammar, name: str, arguments: Mapping[str, Any], chars: int) -> str:
    """The rule of an action's bracketed input."""
    if len(arguments) == 1:
        ((_, schema),) = arguments.items()
        kinds = schema.get("type") if isinstance(schema, Mapping) else None
        if kinds in (None, "string") and not _enum_or_const(schema):
            most = schema.get("maxLength") if isinstance(schema, Mapping) else None
            if isinstance(most, int) and not isinstance(most, bool) and most > 0:
                chars = min(chars, most)
            return line_text(grammar, "text", chars, _INPUT_FIRST, _INPUT_BANNED)
        return json_value(grammar, schema, chars, hint=f"{name}-input")
    strings = sum(
        1
        for spec in arguments.values()
        if not isinstance(spec, Mapping) or spec.get("type") in (None, "string")
    )
    schema = {"type": "object", "properties": dict(arguments), "required": _required(arguments)}
    body = json_object(grammar, schema, max(MIN_CHARS, chars // max(1, strings)), hint=name)
    return grammar.rule(f"{name}-input", body)


def _enum_or_const(schema: Any) -> bool:
    return isinstance(schema, Mapping) and ("enum" in schema or "const" in schema)


def _required(arguments: Mapping[str, Any]) -> list[str]:
    """As the tool-call schemas say (``binding``): an argument without a default is required."""
    return [
        n for n, spec in arguments.items() if not (isinstance(spec, Mapping) and "default" in spec)
    ]


def _answer(grammar: Grammar, lengths: Lengths, answer_schema: Mapping[str, Any] | None) -> str:
    if answer_schema is not None:
        value = json_value(grammar, answer_schema, lengths.answer, hint="answer-value")
    else:
        value = line_text(grammar, "answer-text", lengths.answer, _ANSWER_FIRST)
    return grammar.rule("answer", f"{literal(FINAL_ANSWER)} {value}")


def react_grammar(
    actions: Actions,
    *,
    forced: bool = False,
    answer_schema: Mapping[str, Any] | None = None,
    max_completion_tokens: int | None = None,
    max_calls: int | None = None,
) -> str:
    """The GBNF grammar of one step of a run whose actions are ``actions`` (tools and the
    variant's own, ``update_notes``): ``Thought: <line>`` then ``Action: <name>[<input>]`` or
    ``Final Answer: <text>`` (only the answer when ``forced``: the forced last answer; a JSON
    value following ``answer_schema`` when given), each within ``max_completion_tokens``; with
    ``max_calls`` (``parallel_tool_calls``), 1 to ``max_calls`` Action lines."""
    if answer_schema is not None and not isinstance(answer_schema, Mapping):
        raise TypeError(f"answer_schema must be a JSON schema (a dict), got {answer_schema!r}")
    offered = [] if forced else callable_names(actions)
    most = max(1, max_calls or 1)
    longest = max((len(n) for n in offered), default=0)
    lengths = Lengths.within(max_completion_tokens, longest, most)
    grammar = Grammar()
    thought = line_text(grammar, "thought", lengths.thought)
    branches = [_answer(grammar, lengths, answer_schema)]
    if offered:
        calls = []
        for name in offered:
            arguments = actions[name] or {}
            if not arguments:  # its input is ignored: none is written
                calls.append(grammar.rule("call", literal(f"{name}[]")))
                continue
            given = _input(grammar, name, arguments, lengths.input)
            calls.append(grammar.rule("call", f'{literal(name + "[")} {given} "]"'))
        named = grammar.rule("action", f"{literal(ACTION)} ({' | '.join(calls)})")
        if most > 1:  # 1 to ``most`` Action lines, each optional one inside the last
            more = ""
            for _ in range(most - 1):
                more = f'("\\n" {named} {more})?' if more else f'("\\n" {named})?'
            named = grammar.rule("actions", f"{named} {more}")
        branches.insert(0, named)
    step = grammar.rule("step", " | ".join(branches))
    return grammar.text(f'{literal(THOUGHT)} {thought} "\\n" {step}')


def schema_grammar(schema: Mapping[str, Any], max_chars: int = MAX_ANSWER_CHARS) -> str:
    """The GBNF grammar of one JSON value following ``schema`` (a JSON schema dict), its
    strings at most ``max_chars`` characters: what a server constrains a structured answer
    with."""
    if not isinstance(schema, Mapping):
        raise TypeError(f"schema must be a JSON schema (a dict), got {schema!r}")
    grammar = Grammar()
    return grammar.text(json_value(grammar, schema, max_chars))
