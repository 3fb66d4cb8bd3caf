"""What reactgraph relies on in LangGraph's DeltaChannel (beta), pinned: a LangGraph upgrade that
changes any of it fails here first, naming what moved."""

from __future__ import annotations

import inspect
import random
import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.pregel import _checkpoint

from reactgraph import build_graph
from reactgraph.nodes.vocabulary.delta import MAX_STEPS_BETWEEN_SNAPSHOTS, bound_replay
from reactgraph.nodes.vocabulary.reducers import SNAPSHOT_EVERY, added_messages, appended, latest
from tests.fakes import ToolLog, action, answer, fake_model

DELTA_CHANNELS = {
    "turns": SNAPSHOT_EVERY,
    "messages": SNAPSHOT_EVERY,
    "compactions": 1,
    "notes": 1,
    "summary": 1,
    # What a run fixes at its start: stored when written (once a run), not in every checkpoint.
    "question": 1,
    "settings": 1,
    "thread_id": 1,
    "run": 1,
}


def test_the_constructor_we_call() -> None:
    params = inspect.signature(DeltaChannel.__init__).parameters
    assert list(params)[:3] == ["self", "reducer", "typ"]
    assert params["snapshot_frequency"].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_state_declares_delta_channels_with_their_frequencies() -> None:
    graph = build_graph("notes_compaction", model=fake_model(), tools=[], context_window=1000)
    for name, frequency in DELTA_CHANNELS.items():
        channel = graph.channels[name]
        assert isinstance(channel, DeltaChannel), name
        assert channel.snapshot_frequency == frequency, name


def test_the_replay_bound_is_the_internal_we_set() -> None:
    assert isinstance(_checkpoint.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT, int)
    assert bound_replay() <= MAX_STEPS_BETWEEN_SNAPSHOTS


def test_checkpoints_hold_a_delta_snapshot_marker_not_the_transcript() -> None:
    saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    model = fake_model(*[action("echo", str(i)) for i in range(5)], answer("done"))
    graph = build_graph("transcript", model=model, tools=[ToolLog().echo()], checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"question": "q"}, config)
    latest_checkpoint = saver.get_tuple(config).checkpoint
    stored = latest_checkpoint["channel_values"].get("turns")
    assert stored is None or isinstance(stored, _DeltaSnapshot)
    assert len(graph.get_state(config).values["turns"]) == 6


def test_a_new_run_resets_the_transcript_with_overwrite() -> None:
    saver = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    model = fake_model(action("echo", "1"), answer("one"), answer("two"))
    graph = build_graph("transcript", model=model, tools=[ToolLog().echo()], checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"question": "first"}, config)
    out = graph.invoke({"question": "second"}, config)
    assert [t["turn"] for t in out["turns"]] == [1]
    assert [m.content for m in out["messages"] if isinstance(m, HumanMessage)] == [
        "first",
        "second",
    ]


items = st.lists(st.lists(st.integers(), max_size=3), max_size=6)


@settings(max_examples=200, deadline=None)
@given(start=st.lists(st.integers(), max_size=4), xs=items, ys=items)
def test_our_reducers_are_batching_invariant_and_copy(start: list, xs: list, ys: list) -> None:
    before = list(start)
    assert appended(appended(start, xs), ys) == appended(start, xs + ys)
    assert start == before
    if xs and ys:
        assert latest(latest(start, xs), ys) == latest(start, xs + ys)


def test_the_message_reducer_is_batching_invariant_and_deterministic() -> None:
    rng = random.Random(7)
    writes = []
    for i in range(30):
        kind = rng.choice(["ours", "model", "client", "edit", "bare"])
        if kind == "ours":
            writes.append([AIMessage(f"a{i}", id=f"rg-1-{i}-ai")])
        elif kind == "model":  # a run's own chat view: the model's message id, as a tuple
            writes.append((AIMessage(f"m{i}", id=f"run-{i}"),))
        elif kind == "client":
            writes.append([HumanMessage(f"h{i}", id=f"client-{i}")])
        elif kind == "edit" and i > 2:
            writes.append([HumanMessage(f"edited {i}", id=f"client-{i - 3}")])
        else:
            writes.append([{"type": "human", "content": f"b{i}"}])
    whole = added_messages([], writes)
    cut = rng.randrange(1, len(writes))
    split = added_messages(added_messages([], writes[:cut]), writes[cut:])
    assert [(m.id, m.content) for m in whole] == [(m.id, m.content) for m in split]
    again = added_messages([], writes)
    assert [m.id for m in again] == [m.id for m in whole]


class _Unreadable:
    """A message whose id cannot be read: a reducer that looks at the messages held fails."""

    @property
    def id(self) -> str:
        raise AssertionError("the reducer looked at a message it already held")


def test_a_runs_own_messages_are_appended_without_looking_at_those_held() -> None:
    held = [_Unreadable()] * 5000
    mine = (AIMessage("reply", id="run-model-id"), HumanMessage("obs", id="rg-1-7-tool"))
    out = added_messages(held, [mine])  # type: ignore[arg-type]
    assert out[-2:] == list(mine) and len(out) == 5002
    # A client's edit in the same call still finds a message the run added just before.
    edited = HumanMessage("obs, edited", id="run-model-id")
    out = added_messages([], [mine, [edited]])
    assert [m.content for m in out] == ["obs, edited", "obs"]
