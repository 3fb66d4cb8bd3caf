"""The parser: the variants real models write, the ambiguous cases, and never raising."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactgraph.nodes.parsing import clean_reply, parse_react

TOOLS = ["search", "lookup", "calculator", "update_notes"]


def read(text: str) -> dict:
    return parse_react(clean_reply(text), TOOLS)


@pytest.mark.parametrize(
    ("reply", "name", "tool_input"),
    [
        ("Thought: x\nAction: search[Eiffel Tower]", "search", "Eiffel Tower"),
        ("**Thought:** x\n**Action:** search[Eiffel Tower]", "search", "Eiffel Tower"),
        ("**Action**: `search[Eiffel Tower]`", "search", "Eiffel Tower"),
        ("*Action:* search[Eiffel Tower]", "search", "Eiffel Tower"),
        ("### Action: search[Eiffel Tower]", "search", "Eiffel Tower"),
        ("Thought 2: x\nAction 2: search[Eiffel Tower]", "search", "Eiffel Tower"),
        ("Action #3: search[Eiffel Tower]", "search", "Eiffel Tower"),
        ("Thought: x\nAction: search\nAction Input: Eiffel Tower", "search", "Eiffel Tower"),
        ('Action: search\nAction Input: "Eiffel Tower"', "search", "Eiffel Tower"),
        ("Action: search(Eiffel Tower)", "search", "Eiffel Tower"),
        ('Action: search("Eiffel Tower")', "search", "Eiffel Tower"),
        ('Action: search["Eiffel Tower"]', "search", "Eiffel Tower"),
        ("Action: search['Eiffel Tower']", "search", "Eiffel Tower"),
        ('Action: search(query="Eiffel Tower")', "search", "Eiffel Tower"),
        ("Action: update_notes[[x] A [ ] B]", "update_notes", "[x] A [ ] B"),
        ("Action: update_notes['[x] A [ ] B']", "update_notes", "[x] A [ ] B"),
        ("   Action: search[Eiffel Tower]", "search", "Eiffel Tower"),
        ("Action: search[Eiffel Tower] to find the year.", "search", "Eiffel Tower"),
        (
            "Action: search[Eiffel Tower]\nObservation: 1889\nFinal Answer: 1889",
            "search",
            "Eiffel Tower",
        ),
        ("Action: search[Eiffel Tower]\n**Observation**: made up", "search", "Eiffel Tower"),
        ("Action: calculator[(1937-1889)*2]", "calculator", "(1937-1889)*2"),
        ("Action: calculator((1937-1889)*2)", "calculator", "(1937-1889)*2"),
        ('Action: search[{"q": "a]b"}]', "search", '{"q": "a]b"}'),
        ("Action: Search[Eiffel]", "search", "Eiffel"),
        ("Action: update-notes[x]", "update_notes", "x"),
        ("Action:\nsearch[Eiffel Tower]", "search", "Eiffel Tower"),
        ("Thought: first I look it up.\nsearch[Eiffel Tower]", "search", "Eiffel Tower"),
        ("1. Action: search[x]", "search", "x"),
        ("- Action: search[x]", "search", "x"),
        ("Action: search: Eiffel Tower", "search", "Eiffel Tower"),
        ("Action: search[a]\nAction: search[a]", "search", "a"),
        (
            "Action: update_notes[- [x] A\nThought: kept\n- [ ] B]",
            "update_notes",
            "- [x] A\nThought: kept\n- [ ] B",
        ),
        ("Action: update_notes[- Final Answer: later]", "update_notes", "- Final Answer: later"),
        ("<think>Observation: the word inside reasoning</think>\nAction: search[y]", "search", "y"),
        ("the model reasoned here</think>\nAction: search[y]", "search", "y"),
        ("Action: search[unclosed input", "search", "unclosed input"),
        ('Action: calculator["1937-1889"]', "calculator", "1937-1889"),
    ],
)
def test_reads_the_intended_action(reply: str, name: str, tool_input: str) -> None:
    parsed = read(reply)
    assert parsed["kind"] == "action", parsed
    assert (parsed["action"], parsed["action_input"]) == (name, tool_input)


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("Thought: I now have enough information.\nFinal Answer: 48", "48"),
        ("Final Answer: **48**", "48"),
        ("**Final Answer**: 48", "48"),
        ("Final answer: 48 years", "48 years"),
        ("Thought: so the Final Answer: 48", "48"),
        ("Final Answer: line one\nline two", "line one\nline two"),
        ("Final Answer: 48\nAction: search[x]", "48"),
    ],
)
def test_reads_the_final_answer(reply: str, text: str) -> None:
    parsed = read(reply)
    assert parsed["kind"] == "answer", parsed
    assert parsed["answer"] == text


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        ("", "Your reply was empty"),
        ("I think the answer is near.", "Invalid format"),
        ("Action: search[a]\nAction: calculator[1+1]", "more than one action"),
        ("Action: wikipedia[x]", "Unknown action 'wikipedia'"),
        ("Action: search", "has no input"),
        ("Final Answer:   ", "Final Answer was empty"),
    ],
)
def test_rejects_with_a_corrective_observation(reply: str, fragment: str) -> None:
    parsed = read(reply)
    assert parsed["kind"] == "invalid"
    assert fragment in parsed["error"]


def test_invalid_replies_list_the_valid_actions() -> None:
    assert "Valid actions: search, lookup, calculator, update_notes" in read("hmm")["error"]


def test_thought_is_kept() -> None:
    assert read("Thought: need data\nAction: search[x]")["thought"] == "need data"
    assert read("I will look.\nAction: search[x]")["thought"] == "I will look."


def test_clean_reply_cuts_at_the_first_observation() -> None:
    assert clean_reply("Action: a[b]\nObservation: c\nObservation: d") == "Action: a[b]"
    assert clean_reply("<think>x Observation: y</think>Action: a[b]") == "Action: a[b]"


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_never_raises_on_any_text(text: str) -> None:
    parsed = parse_react(clean_reply(text), TOOLS)
    assert parsed["kind"] in ("action", "answer", "invalid")


LABELS = [
    "Thought:",
    "Action:",
    "Action Input:",
    "Final Answer:",
    "Observation:",
    "**",
    "[",
    "]",
    "(",
    ")",
    '"',
    "'",
    "`",
    "\n",
    " ",
    "search",
    "update_notes",
    "{",
    "}",
    "<think>",
    "</think>",
    "1.",
    "#",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(LABELS), st.text(max_size=5)), max_size=30))
def test_never_raises_on_format_like_text(parts: list[str]) -> None:
    parsed = parse_react(clean_reply("".join(parts)), TOOLS)
    if parsed["kind"] == "action":
        assert parsed["action"] in TOOLS
        assert parsed["action_input"] is not None
    if parsed["kind"] == "invalid":
        assert parsed["error"]
