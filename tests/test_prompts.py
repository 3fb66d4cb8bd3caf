"""Every prompt and Observation template renders with its fields."""

from __future__ import annotations

import re
import string

import pytest

from reactgraph.nodes.vocabulary import prompts

FIELDS = {
    "blocks": "an image block",
    "tool_descriptions": "search[input]: look things up",
    "question": "Q?",
    "name": "search",
    "description": "d",
    "text": "t",
    "cut": 1,
    "total": 2,
    "valid": "search",
    "actions": "a[b], c[d]",
    "error": "boom",
    "seconds": 0.5,
    "keys": "a, b",
    "schema": '{"a": integer}',
    "hanging": 8,
    "kind": "int",
    "turn": 3,
    "index": 2,
    "cap": 8,
    "proposed": "search[Paris]",
    "problem": "bad",
    "notes": "[x] A",
    "limit": 4000,
    "length": 5000,
    "summary": "s",
    "previous": "",
    "dropped": "d",
    "kept": "k",
    "max_words": 300,
    "observation": "o",
    "size": 200000,
    "tokens": 64,
    "expects": "thing: Opaque",
    "why": "no JSON schema",
    "action": "search[Eiffel Tower]",
    "reason": "not that one",
    "input": "x",
    "earlier": "Asked: Where is it?\nAnswered: Paris.",
    "runs": "Asked: Where is it?\nAnswered: Paris.",
    "answer": "Paris.",
    "status": "the run did not finish",
    "instructions": "Answer in French.",
    "block": "Instructions: be brief.",
    "problems": "at $.years: not an integer",
    "count": 3,
    "spent": 960,
    "budget": "max_run_tokens",
    "said": "yes",
    "decided": "approved",
    "unit": "tokens",
    "where": " at http://127.0.0.1:8000/v1",
}
TEMPLATES = {
    name: value
    for name, value in vars(prompts).items()
    if name.isupper() and isinstance(value, str)
}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_template_renders(name: str) -> None:
    template = TEMPLATES[name]
    needed = {field for _, field, _, _ in string.Formatter().parse(template) if field}
    assert needed <= set(FIELDS), f"{name} needs unknown fields {needed - set(FIELDS)}"
    rendered = template.format(**FIELDS)
    assert rendered.strip()
    assert not re.search(r"\{[a-z_]+\}", rendered)  # no field left unfilled


def test_react_prompt_is_the_seed_prompt() -> None:
    rendered = prompts.REACT_PROMPT.format(tool_descriptions="T", question="Q")
    assert rendered.startswith(
        "Answer the question by interleaving Thought, Action and Observation."
    )
    assert "Available actions:\nT\n" in rendered
    assert (
        "Action: tool_name[input]\nObservation: (written by the system, never by you)" in rendered
    )
    assert rendered.endswith("Question: Q")
    # A run's own blocks (answer format, instructions) go right before this question line.
    assert prompts.REACT_PROMPT.endswith("\n\n" + prompts.TOOL_CALLS_QUESTION)


def test_bad_action_asks_for_the_bracket_form() -> None:
    rendered = prompts.BAD_ACTION.format(text="Search the web for AI.", valid="search, lookup")
    assert "'Search the web for AI.'" in rendered
    assert "Action: tool_name[input]" in rendered
    assert rendered.endswith("Valid actions: search, lookup.")
