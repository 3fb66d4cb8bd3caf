"""``read_decision``, the pure reader of a person's resume value: whatever JSON a client sends,
it answers with a decision or ``Malformed``, never another error (a value that raised anything
else was stored by LangGraph and replayed to every later resume, so the thread could never go
on)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactgraph.nodes.running.decisions import Decided, Malformed, check_resume, read_decision

KEYS = [
    "type",
    "decisions",
    "edited_action",
    "name",
    "action",
    "args",
    "arguments",
    "message",
    "said",
]
WORDS = ["approve", "accept", "edit", "respond", "response", "reject", "ignore", "yes", "n"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(WORDS) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=600, deadline=None)
@given(JSON)
def test_any_json_value_is_a_decision_or_malformed(value: Any) -> None:
    with contextlib.suppress(Malformed):
        assert isinstance(read_decision(value), Decided)


@pytest.mark.parametrize(
    "value",
    [
        {"type": ["approve"]},
        {"decisions": [{"type": {"name": "approve"}}]},
        {"type": "edit", "edited_action": {"name": ["x"], "args": {}}},
        {"type": "reject", "message": {"text": "no"}},
    ],
    ids=repr,
)
def test_a_type_or_name_that_is_not_text_is_malformed(value: Any) -> None:
    with pytest.raises(Malformed):
        read_decision(value)


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [33, 5000])
def test_a_value_nested_too_deep_is_malformed_and_refused_by_check_resume(depth: int) -> None:
    """Past the JSON encoder's own limit too (its RecursionError is no ValueError)."""
    edit = {"type": "edit", "edited_action": {"name": "a", "args": {"x": nested(depth)}}}
    with pytest.raises(Malformed, match="nests over 32 levels"):
        read_decision(edit)
    with pytest.raises(ValueError, match="nests over 32 levels"):
        check_resume(nested(depth))


def test_a_value_that_holds_itself_is_refused_without_walking_it_all() -> None:
    loop: list[Any] = []
    loop.extend([loop, loop])
    with pytest.raises(ValueError, match="too large"):
        check_resume(loop)


def test_what_a_person_typed_is_kept_beside_the_decision_one_line_and_bounded() -> None:
    said = read_decision({"decisions": [{"type": "approve"}], "said": " Yes,\n  go "})
    assert (said.decision, said.said) == ("approve", "Yes, go")
    long = read_decision({"decisions": ["no"], "said": "x" * 1000})
    assert long.decision == "reject" and long.said == "x" * 200
    for odd in (None, 3, ["yes"], "  "):
        assert read_decision({"decisions": ["yes"], "said": odd}).said is None
    with pytest.raises(Malformed, match="'maybe' is not a decision: answer yes to run it or no"):
        read_decision("maybe")
