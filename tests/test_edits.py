"""Editing an earlier question as Agent Chat UI does it (issue 58, 3), in process: the client
reads the thread's 10 newest checkpoints and forks the edit from the parent of the oldest state
it read that holds the message. The history read (``reactgraph.nodes.chatview.edits``) holds
each earlier question's first state, so the fork starts where the question's run did: the
edited question replaces it and every later exchange, and the next prompt agrees, in every
variant, both action formats, through invoke and ainvoke, whatever the number of checkpoints a
run writes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.chatview import edits
from reactgraph.nodes.vocabulary import prompts
from reactgraph.scripted import DEMO_REPLIES, DEMO_TOOL_CALLS
from reactgraph.storage.database import open_db
from reactgraph.tools import default_tools
from reactgraph.variants import REGISTRY
from tests.fakes import FakeChatModel, Runner, prompt_text, runner

FORMATS = ["text", "tool_calls"]
HEADING = prompts.EARLIER_BLOCK.split("{runs}")[0]
LIMIT = 10  # Agent Chat UI's history read (useStream's fetchStateHistory: true)


def graph_for(variant: str, fmt: str, runs: int, checkpointer: Any = None) -> Any:
    """A graph whose model answers ``runs`` questions the demo's way (four replies each); its
    model is ``graph.model``."""
    demo = DEMO_REPLIES if fmt == "text" else DEMO_TOOL_CALLS
    extra: dict[str, Any] = {}
    if "token_counter" in REGISTRY[variant].objects:
        extra = {"token_counter": lambda messages: 10 * len(messages), "context_window": 100_000}
    model = FakeChatModel(replies=list(demo) * runs)
    graph = build_graph(
        variant,
        model=model,
        tools=default_tools(),
        checkpointer=checkpointer or InMemorySaver(),
        action_format=fmt,
        **extra,
    )
    graph.model = model
    return graph


def history(graph: Any, config: dict[str, Any], mode: str, **read: Any) -> list[Any]:
    """The thread's history as a client reads it, through the sync or the async method."""
    if mode == "invoke":
        return list(graph.get_state_history(config, **read))

    async def read_all() -> list[Any]:
        return [state async for state in graph.aget_state_history(config, **read)]

    return asyncio.run(read_all())


def plain(graph: Any, config: dict[str, Any], **read: Any) -> list[Any]:
    """LangGraph's own history read, the checkpoints alone."""
    return list(CompiledStateGraph.get_state_history(graph, config, **read))


def ids(states: list[Any]) -> list[str]:
    return [s.config["configurable"]["checkpoint_id"] for s in states]


def fork_point(read: list[Any], message_id: str) -> dict[str, Any]:
    """Where Agent Chat UI forks an edit of a message from: the parent of the oldest state it
    read that holds it (``getMessagesMetadata``: ``firstSeenState.parent_checkpoint``)."""
    for state in reversed(read):
        if any(m.id == message_id for m in state.values.get("messages") or []):
            return state.parent_config
    raise AssertionError(f"no state read holds {message_id}")


def ask(run: Runner, graph: Any, text: str, config: dict[str, Any]) -> dict[str, Any]:
    out = run(graph, {"messages": [{"type": "human", "content": text}]}, config)
    assert out["status"] == "answered" and out["answer"] == "48", out.get("status")
    return out


def humans(values: dict[str, Any]) -> list[Any]:
    return [m for m in values["messages"] if m.type == "human"]


def said(values: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in humans(values)]


def record(run: int, question: str) -> dict[str, Any]:
    return {"run": run, "question": question, "answer": "48", "status": "answered"}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_editing_the_first_of_two_questions_replaces_it_and_what_came_after(
    variant: str, fmt: str, run: Runner
) -> None:
    graph = graph_for(variant, fmt, runs=5)
    config = {"configurable": {"thread_id": "t"}}
    ask(run, graph, "First?", config)
    first, second = humans(ask(run, graph, "Second?", config))
    read = history(graph, config, run.mode, limit=LIMIT)
    assert ids(read[:LIMIT]) == ids(plain(graph, config, limit=LIMIT))
    assert len(read) == LIMIT + 2  # then each question's first state, newest first
    # The client alone would fork both edits from the oldest state it read: mid-run 2.
    alone = plain(graph, config, limit=LIMIT)
    assert fork_point(alone, first.id) == fork_point(alone, second.id)
    assert alone[-1].values["run"] == 2 and alone[-1].values["status"] is None
    calls = len(graph.model.calls)
    edited = ask(run, graph, "First, edited?", fork_point(read, first.id))
    assert said(edited) == ["First, edited?"] and edited["earlier_runs"] == [
        record(1, "First, edited?")
    ]
    assert said(graph.get_state(config).values) == ["First, edited?"]
    # The model's prompt agrees with the screen: no earlier question at all.
    for sent in graph.model.calls[calls:]:
        text = prompt_text(sent["messages"])
        assert HEADING not in text and "Second?" not in text and "First, edited?" in text
    # Editing the newest question keeps the first exchange, in the chat and in the prompt.
    (kept,) = humans(graph.get_state(config).values)
    ask(run, graph, "Second?", config)
    read = history(graph, config, run.mode, limit=LIMIT)
    last = humans(graph.get_state(config).values)[-1]
    again = ask(run, graph, "Second, edited?", fork_point(read, last.id))
    assert said(again) == ["First, edited?", "Second, edited?"] and humans(again)[0].id == kept.id
    assert [r["question"] for r in again["earlier_runs"]] == ["First, edited?", "Second, edited?"]
    block = "Asked: First, edited?\nAnswered: 48\n\n"
    assert block in prompt_text(graph.model.calls[-1]["messages"])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_editing_the_only_question_leaves_one_exchange(variant: str, fmt: str, run: Runner) -> None:
    graph = graph_for(variant, fmt, runs=2)
    config = {"configurable": {"thread_id": "t"}}
    (question,) = humans(ask(run, graph, "Only?", config))
    read = history(graph, config, run.mode, limit=LIMIT)
    assert len(read) == LIMIT + 1
    edited = ask(run, graph, "Only, edited?", fork_point(read, question.id))
    assert said(edited) == ["Only, edited?"] and edited["earlier_runs"] == [
        record(1, "Only, edited?")
    ]
    assert HEADING not in prompt_text(graph.model.calls[-1]["messages"])
    tools = [m for m in edited["messages"] if m.type == "tool"]
    assert len(tools) == 3 and edited["messages"][-1].content.endswith("Final Answer: 48")


def test_each_question_forks_from_its_own_run_however_long_and_however_asked(
    run: Runner,
) -> None:
    """Five questions (one given as ``{"question": ...}``), edits of each from the newest
    first, one edit made twice (a fork's own input checkpoint on the branch): every edit
    replaces its question and everything after it."""
    graph = graph_for("transcript", "text", runs=12)
    config = {"configurable": {"thread_id": "t"}}
    questions = ["One?", "Two?", "Three?", "Four?", "Five?"]
    for number, text in enumerate(questions):
        if number == 2:
            out = run(graph, {"question": text}, config)
        else:
            out = ask(run, graph, text, config)
    assert said(out) == questions
    for index in (3, 1, 1, 0):
        read = history(graph, config, run.mode, limit=LIMIT)
        target = humans(graph.get_state(config).values)[index]
        text = f"{questions[index]} (edited)"
        edited = ask(run, graph, text, fork_point(read, target.id))
        questions = [*questions[:index], text]
        assert said(edited) == questions
        assert [r["question"] for r in edited["earlier_runs"]] == questions


def test_reads_that_are_not_cut_at_their_limit_are_langgraphs_own(run: Runner) -> None:
    graph = graph_for("transcript", "text", runs=2)
    config = {"configurable": {"thread_id": "t"}}
    ask(run, graph, "One?", config)
    ask(run, graph, "Two?", config)
    whole = plain(graph, config)
    for read in (
        {},
        {"limit": len(whole)},
        {"limit": len(whole) + 5},
        {"limit": LIMIT, "before": whole[3].config},
        {"limit": LIMIT, "filter": {"source": "loop"}},
    ):
        assert ids(history(graph, config, run.mode, **read)) == ids(plain(graph, config, **read))
    at = {"configurable": {**config["configurable"], "checkpoint_id": ids(whole)[0]}}
    assert ids(history(graph, at, run.mode, limit=1)) == ids(plain(graph, at, limit=1))


def test_the_states_added_and_the_checkpoints_walked_are_bounded(
    run: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = graph_for("transcript", "text", runs=4)
    config = {"configurable": {"thread_id": "t"}}
    for text in ("One?", "Two?", "Three?", "Four?"):
        ask(run, graph, text, config)
    assert len(history(graph, config, run.mode, limit=LIMIT)) == LIMIT + 4
    monkeypatch.setattr(edits, "EDITABLE_QUESTIONS", 2)
    added = history(graph, config, run.mode, limit=LIMIT)[LIMIT:]
    assert [said(s.values)[-1] for s in added] == ["Four?", "Three?"]
    monkeypatch.setattr(edits, "EDITABLE_QUESTIONS", 20)
    monkeypatch.setattr(edits, "MAX_WALKED", 20)  # a run is 14 checkpoints
    added = history(graph, config, run.mode, limit=LIMIT)[LIMIT:]
    assert [said(s.values)[-1] for s in added] == ["Four?", "Three?"]


def test_a_sqlite_thread_reads_and_forks_the_same(tmp_path: Path) -> None:
    run = runner("invoke")  # the command line's saver is a sync one
    with open_db(str(tmp_path / "runs.sqlite")) as (saver, _):
        graph = graph_for("notes", "tool_calls", runs=3, checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        ask(run, graph, "First?", config)
        first, _ = humans(ask(run, graph, "Second?", config))
        read = history(graph, config, run.mode, limit=LIMIT)
        edited = ask(run, graph, "First, edited?", fork_point(read, first.id))
        assert said(edited) == ["First, edited?"]
