"""The ``messages`` reducer carries its id index from one call to the next (a replay of stored
writes, where a run's tuples come back as lists): the same messages as an index built afresh
at every call, for edits, removals, id collisions and forks, and one index for a whole replay
instead of one a step."""

from __future__ import annotations

import random
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from reactgraph.nodes.vocabulary.reducers import added_messages
from tests.fakes import count_index_builds


def _writes(seed: int, count: int = 300) -> list[Any]:
    """Writes as a replay hands them: lists (a stored tuple), edits by id, collisions within a
    write, removals, messages without an id, dicts, now and then a removal of everything."""
    rng = random.Random(seed)
    writes: list[Any] = []
    ids: list[str] = []
    for i in range(count):
        kind = rng.choice(["new", "new", "new", "tuple", "edit", "twice", "remove", "bare", "dict"])
        if kind == "new":
            writes.append(
                [AIMessage(f"a{i}", id=f"rg-1-{i}-ai"), HumanMessage(f"o{i}", id=f"o{i}")]
            )
            ids += [f"rg-1-{i}-ai", f"o{i}"]
        elif kind == "tuple":
            writes.append((AIMessage(f"t{i}", id=f"t{i}"),))
            ids.append(f"t{i}")
        elif kind == "edit" and ids:
            writes.append([HumanMessage(f"edited {i}", id=rng.choice(ids))])
        elif kind == "twice":  # one id twice in one write: the second replaces the first
            writes.append([AIMessage(f"x{i}", id=f"x{i}"), AIMessage(f"y{i}", id=f"x{i}")])
            ids.append(f"x{i}")
        elif kind == "remove" and ids:
            writes.append([RemoveMessage(id=ids.pop(rng.randrange(len(ids))))])
        elif kind == "bare":
            writes.append([HumanMessage(f"b{i}")])
        elif i % 97 == 0:
            writes.append([RemoveMessage(id=REMOVE_ALL_MESSAGES)])
            ids = []
        else:
            writes.append([{"type": "human", "content": f"d{i}", "id": f"d{i}"}])
            ids.append(f"d{i}")
    return writes


def _shown(messages: list[Any]) -> list[tuple[Any, ...]]:
    return [(type(m).__name__, m.id, m.content) for m in messages]


@pytest.mark.parametrize("seed", range(5))
def test_a_carried_index_gives_what_a_fresh_one_gives(seed: int) -> None:
    writes = _writes(seed)
    carried: list[Any] = []
    fresh: list[Any] = []
    for write in writes:
        carried = added_messages(carried, [write])  # the list it returned: its index goes on
        fresh = added_messages(list(fresh), [write])  # a copy: the index is built afresh
    assert _shown(carried) == _shown(fresh) == _shown(added_messages([], writes))


def test_a_list_handed_to_two_calls_gives_each_its_own_result() -> None:
    base = added_messages([], [[HumanMessage("q", id="h"), AIMessage("a", id="a")]])
    left = added_messages(base, [[AIMessage("edited", id="a")]])
    right = added_messages(base, [[AIMessage("b", id="b")], [AIMessage("again", id="h")]])
    assert _shown(base) == [("HumanMessage", "h", "q"), ("AIMessage", "a", "a")]
    assert _shown(left) == [("HumanMessage", "h", "q"), ("AIMessage", "a", "edited")]
    assert [m.content for m in right] == ["again", "a", "b"]


def test_a_list_changed_in_place_is_indexed_again() -> None:
    held = added_messages([], [[HumanMessage("q", id="h"), AIMessage("a", id="a")]])
    held[0] = HumanMessage("other", id="z")  # not the reducer's to expect, but not wrong
    out = added_messages(held, [[HumanMessage("edited", id="z")], [AIMessage("new", id="n")]])
    assert [m.id for m in out] == ["z", "a", "n"] and out[0].content == "edited"
    held = added_messages([], [[HumanMessage("q", id="h"), AIMessage("a", id="a")]])
    held.append(AIMessage("appended", id="p"))
    out = added_messages(held, [[AIMessage("edited", id="p")]])
    assert [m.id for m in out] == ["h", "a", "p"] and out[-1].content == "edited"


def test_a_replay_builds_the_id_index_once_not_once_a_step(monkeypatch: Any) -> None:
    built = count_index_builds(monkeypatch)
    held: list[Any] = []
    for i in range(200):  # a run's new messages, as stored writes hand them back: lists
        held = added_messages(
            held, [[AIMessage(f"a{i}", id=f"a{i}"), HumanMessage("o", id=f"o{i}")]]
        )
        held = added_messages(held, [[AIMessage(f"a{i}, parsed", id=f"o{i}")]])
    assert len(held) == 400 and held[-1].content == "a199, parsed"
    assert built == [1]
