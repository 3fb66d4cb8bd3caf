"""The parser: the variants real models write, the ambiguous cases, never raising, and linear
time."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactgraph.nodes.reading.textparser import clean_reply, parse_react
from reactgraph.nodes.reading.textscan import MAX_CALLS

TOOLS = ["search", "lookup", "calculator", "update_notes"]


def read(text: str) -> dict:
    return parse_react(clean_reply(text), TOOLS)


def read_as(text: str, kind: str) -> dict:
    """The reply read, which must be of ``kind`` (an action, an answer, invalid)."""
    parsed = read(text)
    assert parsed["kind"] == kind, parsed
    return parsed


# Each call, and the ways real models write it: every one of them reads as that call.
WRITTEN_AS: dict[tuple[str, str], list[str]] = {
    ("search", "Eiffel Tower"): [
        "Thought: x\nAction: search[Eiffel Tower]",
        "**Thought:** x\n**Action:** search[Eiffel Tower]",
        "**Action**: `search[Eiffel Tower]`",
        "*Action:* search[Eiffel Tower]",
        "### Action: search[Eiffel Tower]",
        "Thought 2: x\nAction 2: search[Eiffel Tower]",
        "Action #3: search[Eiffel Tower]",
        "Thought: x\nAction: search\nAction Input: Eiffel Tower",
        'Action: search\nAction Input: "Eiffel Tower"',
        "Action: search(Eiffel Tower)",
        'Action: search("Eiffel Tower")',
        'Action: search["Eiffel Tower"]',
        "Action: search['Eiffel Tower']",
        'Action: search(query="Eiffel Tower")',
        "   Action: search[Eiffel Tower]",
        "Action: search[Eiffel Tower] to find the year.",
        "Action: search[Eiffel Tower]\nObservation: 1889\nFinal Answer: 1889",
        "Action: search[Eiffel Tower]\n**Observation**: made up",
        "Action:\nsearch[Eiffel Tower]",
        "Thought: first I look it up.\nsearch[Eiffel Tower]",
        "Action: search: Eiffel Tower",
        "Action: search\nAction Input: `Eiffel Tower`",
        "`Action:` search[Eiffel Tower]",
        # A signature or description echoed on the Action line: the Action Input wins.
        "Action: search[input]\nAction Input: Eiffel Tower",
        "Action: search the web\nAction Input: Eiffel Tower",
    ],
    # The same for a signature: the Action Input wins.
    ("add", '{"a": 2, "b": 3}'): ['Action: add (add two numbers)\nAction Input: {"a": 2, "b": 3}'],
    ("search", "Eiffel"): ["Action: Search[Eiffel]"],
    ("search", "x"): ["1. Action: search[x]", "- Action: search[x]"],
    ("search", "a"): [
        "Action: search[a]\nAction: search[a]",
        "Action: Search[a]\nAction: search[a]",
    ],
    ("search", "y"): [
        "<think>Observation: the word inside reasoning</think>\nAction: search[y]",
        "the model reasoned here</think>\nAction: search[y]",
    ],
    ("search", "unclosed input"): ["Action: search[unclosed input"],
    ("search", '{"q": "a]b"}'): ['Action: search[{"q": "a]b"}]'],
    ("search", '"one\ntwo"'): ['Action: search\nAction Input: "one\ntwo"'],
    ("calculator", "(1937-1889)*2"): [
        "Action: calculator[(1937-1889)*2]",
        "Action: calculator((1937-1889)*2)",
    ],
    ("calculator", "1937-1889"): ['Action: calculator["1937-1889"]'],
    ("update_notes", "[x] A [ ] B"): [
        "Action: update_notes[[x] A [ ] B]",
        "Action: update_notes['[x] A [ ] B']",
    ],
    ("update_notes", "x"): ["Action: update-notes[x]"],
    ("update_notes", "- [x] A\nThought: kept\n- [ ] B"): [
        "Action: update_notes[- [x] A\nThought: kept\n- [ ] B]"
    ],
    ("update_notes", "- Final Answer: later"): ["Action: update_notes[- Final Answer: later]"],
    ("update_notes", "search[x]"): ["Action: update_notes[\nsearch[x]\n]"],
    # Fenced blocks reach the tool exactly as written.
    ("python", "```python\nprint(1)\n```"): [
        "Action: python\nAction Input: ```python\nprint(1)\n```"
    ],
    ("python", "```\nx = 1\n```"): ["Action: python\nAction Input:\n```\nx = 1\n```"],
    ("python", "```\n# Final Answer: not a label in code\n```"): [
        "Action: python\nAction Input: ```\n# Final Answer: not a label in code\n```"
    ],
    ("python", "```\nprint(1)\n```"): ["Action: python[```\nprint(1)\n```]"],
}


@pytest.mark.parametrize(
    ("reply", "name", "tool_input"),
    [(reply, *call) for call, replies in WRITTEN_AS.items() for reply in replies],
)
def test_reads_the_intended_action(reply: str, name: str, tool_input: str) -> None:
    parsed = parse_react(clean_reply(reply), [*TOOLS, "add", "python"])
    assert parsed["kind"] == "action", parsed
    assert (parsed["action"], parsed["action_input"]) == (name, tool_input)


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("Thought: I now have enough information.\nFinal Answer: 48", "48"),
        ("Final Answer: **48**", "48"),
        ("**Final Answer**: 48", "48"),
        ("Final answer: 48 years", "48 years"),
        ("**Final Answer:** 48", "48"),
        ("1. Final Answer: 48", "48"),
        ("- Final Answer: 48", "48"),
        ("## Final Answer: 48", "48"),
        ("  _Final Answer_: 48", "48"),
        ("`Final Answer:` `48`", "48"),
        ("Final Answer:\n```\ncode\n```", "```\ncode\n```"),
        # The ReAct paper's own finish action.
        ("Action: Finish[1889]", "1889"),
        ("Thought: done.\nAction 3: Finish[Paris]", "Paris"),
        ("Action 3:\nFinish[1889]", "1889"),
        ('Action: finish["48 years"]', "48 years"),
        ("Action: FINISH\nAction Input: 48", "48"),
        ("Thought: I know it now.\nFinish[48]", "48"),
        ("Final Answer: line one\nline two", "line one\nline two"),
        ("Final Answer: 48\nAction: search[x]", "48"),
    ],
)
def test_reads_the_final_answer(reply: str, text: str) -> None:
    assert read_as(reply, "answer")["answer"] == text


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        ("", "Your reply was empty"),
        ("I think the answer is near.", "Invalid format"),
        ("Action: search[a]\nAction: calculator[1+1]", "more than one action"),
        ("Action: wikipedia[x]", "Unknown action 'wikipedia'"),
        ("Action: search", "has no input"),
        ("Final Answer:   ", "Final Answer was empty"),
        ("Action: Finish[]", "Final Answer was empty"),
        ("Action: search[a]\nAction: Finish[b]", "more than one action"),
        # "final answer:" inside a sentence is not the label.
        ("Thought: so the Final Answer: 48", "Invalid format: no Action or Final Answer"),
        ("I will give my final answer: after one more search.", "no Action or Final Answer"),
        ("The final answer: is not yet known", "no Action or Final Answer"),
        # A name followed by a sentence is not a call.
        ('Action: Search the internet using the query "AI 2024".', "tool_name[input]"),
        ("Action: search Eiffel Tower", "tool_name[input]"),
        ("Action: I will search\nAction Input: Eiffel Tower", "tool_name[input]"),
        ("Action: search\nAction Input:", "has no input"),
    ],
)
def test_rejects_with_a_corrective_observation(reply: str, fragment: str) -> None:
    assert fragment in read_as(reply, "invalid")["error"]


def test_invalid_replies_list_the_valid_actions() -> None:
    assert "Valid actions: search, lookup, calculator, update_notes" in read("hmm")["error"]


def test_a_sentence_after_the_action_label_is_not_run() -> None:
    parsed = read_as(
        'Thought: look it up.\nAction: Search the internet using the query "AI 2024".', "invalid"
    )
    assert parsed["action"] is None
    assert "Action: tool_name[input]" in parsed["error"]
    assert "Valid actions: search, lookup, calculator, update_notes" in parsed["error"]
    assert parsed["thought"] == "look it up."


def test_a_tool_named_finish_cannot_shadow_the_finish_action() -> None:
    parsed = parse_react("Action: finish[done]", ["finish", "search"])
    assert (parsed["kind"], parsed["answer"]) == ("answer", "done")


def test_calls_past_the_cap_are_not_read() -> None:
    looping = "Action: search[a]\n" * MAX_CALLS
    assert read(looping + "Action: lookup[b]")["action_input"] == "a"
    assert read(looping + "Final Answer: 48")["answer"] == "48"
    assert read("search[a]\n" * MAX_CALLS + "lookup[b]")["action"] == "search"


def test_one_line_inputs_lose_one_pair_of_quotes() -> None:
    assert read("Action: search\nAction Input: 'x'")["action_input"] == "x"
    assert read('Action: search\nAction Input: ""x""')["action_input"] == '"x"'
    assert read("Action: search\nAction Input: ```x```")["action_input"] == "```x```"


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
    "Action 3:",
    "Action Input:",
    "Final Answer:",
    "Final Answer",
    "final answer: ",
    "Observation:",
    "Finish",
    "finish[",
    "```",
    "```python\n",
    "[[",
    "]]",
    "\n\n",
    "\\",
    "=",
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
    "-",
    "_",
    "<thinking>",
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


# Adversarial replies, as a function of their size in characters: each was quadratic (or
# worse) in some earlier parser, through rescanning to the end for every unclosed bracket or
# through a regex backtracking over a long run of spaces.
SHAPES: dict[str, Callable[[int], str]] = {
    "unclosed bare calls": lambda n: "search[x\n" * (n // 9),
    "unclosed Action calls": lambda n: "Action: search[\n" * (n // 16),
    "unclosed calls in paragraphs": lambda n: "Action: search[x\n\n" * (n // 18),
    "unclosed quoted inputs": lambda n: 'Action: search["\n\n' * (n // 18),
    "unclosed JSON inputs": lambda n: 'search[{"a\n\n' * (n // 12),
    "open parentheses": lambda n: "Action: calculator" + "(" * n,
    "nested brackets": lambda n: "Action: search" + "[" * n,
    "nested brackets on lines": lambda n: "search[\n" * (n // 8),
    "quotes": lambda n: "'\"`" * (n // 3),
    "Final Answer fragments": lambda n: "Final Answer " * (n // 13),
    "final answer phrases": lambda n: "so the final answer: x\n" * (n // 23),
    "unclosed think": lambda n: "<think>" * (n // 7),
    "spaces after a label word": lambda n: "Action" + " " * n + "x",
    "spaces after Observation": lambda n: "Observation" + " " * n + "x",
    "spaces before a label": lambda n: " " * n + "x\nAction: search[x]",
    "unclosed fences": lambda n: "Action: search\nAction Input: ```\n" * (n // 34),
    "identical calls": lambda n: "Action: search[x]\n" * (n // 18),
    "prose actions": lambda n: "Action: Search the internet now.\n" * (n // 33),
    "finish calls": lambda n: "Action 3: Finish[x]\n" * (n // 20),
}
SMALL = 1024
LARGE = 16 * SMALL
# Linear is a ratio near 16, quadratic near 256: 40 leaves room for noise on a busy machine.
MAX_RATIO = 40


def cpu_seconds(text: str) -> float:
    start = time.process_time()
    parse_react(clean_reply(text), TOOLS)
    return time.process_time() - start


def growth(make: Callable[[int], str]) -> float:
    """How much longer 16 times the text takes to parse. CPU time, not wall time: on a busy
    machine a long parse is preempted more often than a short one. The two sizes alternate, so
    both see the same neighbours, and the fastest of several rounds resists the rest of the
    noise."""
    small, large = make(SMALL), make(LARGE)
    best_small = best_large = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(7):
            best_small = min(best_small, cpu_seconds(small))
            best_large = min(best_large, cpu_seconds(large))
    finally:
        gc.enable()
    return best_large / best_small


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_parse_time_grows_linearly(shape: str) -> None:
    ratio = growth(SHAPES[shape])
    assert ratio < MAX_RATIO, f"16x the text took {ratio:.0f}x the time"


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(LABELS), min_size=1, max_size=4).map("".join))
def test_parse_time_grows_linearly_for_any_repeated_fragment(unit: str) -> None:
    ratio = growth(lambda n: unit * (n // len(unit) + 1))
    assert ratio < MAX_RATIO, f"16x the text of {unit!r} took {ratio:.0f}x the time"
