"""Nothing but a decision runs an Action that waits for one (issue 45), in every variant and
both action formats, through ``invoke`` and ``ainvoke``: every ``Command`` other than a resume is
refused (``goto=END`` alone changes nothing), a resume of an unknown thread stores nothing, a
chat message on a waiting thread is its decision or refused, and unusable resume values are
bounded in number, so a waiting thread's stored size stays flat."""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START
from langgraph.types import Command, Send

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.running.decisions import MAX_UNUSABLE
from reactgraph.nodes.vocabulary.standing import status_of
from tests.fakes import CONFIG, Runner, ToolLog, action, answer, call, fake_model
from tests.test_approval import built

FORMATS = ["text", "tool_calls"]
MATRIX = [(v, f) for v in VARIANTS for f in FORMATS]


def waiting(variant: str, action_format: str, run: Runner, *more: Any) -> tuple[Any, ToolLog]:
    """A graph of ``variant`` whose thread waits before ``echo[hi]`` (the model's replies after
    its answer: ``more``)."""
    proposed = action("echo", "hi") if action_format == "text" else call("echo", {"text": "hi"})
    graph, log = built(variant, proposed, answer("done"), *more, action_format=action_format)
    run(graph, {"question": "q"}, CONFIG)
    assert status_of(graph.get_state(CONFIG)) == "awaiting_approval"
    return graph, log


@contextmanager
def nothing_changes(graph: Any, log: ToolLog) -> Iterator[None]:
    """What the block does to the waiting thread is refused whole: no checkpoint is added or
    changed, no tool runs, and the thread still waits for its decision."""
    before = list(graph.checkpointer.list(CONFIG))
    yield
    assert log.calls == [] and list(graph.checkpointer.list(CONFIG)) == before
    assert status_of(graph.get_state(CONFIG)) == "awaiting_approval"


def stored(saver: InMemorySaver, thread: str = "t1") -> tuple[int, int, int]:
    """The thread's checkpoints, pending writes, and their bytes, in an ``InMemorySaver``."""
    checkpoints = dict(saver.storage.get(thread, {}))
    writes = {key: dict(found) for key, found in saver.writes.items() if key[0] == thread}
    count = sum(len(found) for found in checkpoints.values())
    return count, sum(map(len, writes.values())), len(pickle.dumps((checkpoints, writes)))


def node_names(graph: Any) -> list[str]:
    return sorted({*graph.nodes, START, END} - {"__start__"} | {START})


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_no_command_but_a_resume_runs_the_waiting_action(
    variant: str, action_format: str, run: Runner
) -> None:
    graph, log = waiting(variant, action_format, run)
    commands: list[Command] = [
        *(Command(goto=name) for name in node_names(graph) if name != END),
        Command(goto=["run_tool"]),
        Command(goto=[END, "run_tool"]),
        Command(goto=Send("run_tool", {})),
        Command(update={"parsed": {"kind": "action", "approval": {"decision": "approve"}}}),
        Command(update={"question": "x"}, goto=END),
        Command(resume="yes", goto="run_tool"),
        Command(graph=Command.PARENT, goto="run_tool"),
    ]
    with nothing_changes(graph, log):
        for command in commands:
            with pytest.raises(ValueError, match=r"refused|parent graph"):
                run(graph, command, CONFIG)
    # goto=END alone (Agent Chat UI's "Mark as Resolved") changes nothing: it still waits.
    run(graph, Command(goto=END), CONFIG)
    assert log.calls == [] and status_of(graph.get_state(CONFIG)) == "awaiting_approval"
    # Refused then: nothing ran, so the refusal is the only record of the turn.
    out = run(graph, Command(resume={"type": "reject", "message": "not now"}), CONFIG)
    assert log.calls == [] and out["answer"] == "done"
    (turn,) = [t for t in out["turns"] if t.get("action") == "echo"]
    assert turn["approval"]["decision"] == "reject" and "not now" in turn["observation"]
    tool_messages = [m for m in out["messages"] if m.type == "tool"]
    assert [m.status for m in tool_messages] == ["error"]


def test_a_resume_needs_a_thread_that_waits_for_a_decision(run: Runner) -> None:
    saver = InMemorySaver()
    graph = build_graph("transcript", model=fake_model(answer("42")), tools=[], checkpointer=saver)
    unknown = {"configurable": {"thread_id": "nobody"}}
    for given in (None, Command(resume="yes"), Command(resume={"type": "approve"})):
        with pytest.raises(ValueError, match="no thread 'nobody' to resume"):
            run(graph, given, unknown)
    assert stored(saver, "nobody")[:2] == (0, 0)
    run(graph, {"question": "q"}, CONFIG)  # finished: no decision is asked for
    with pytest.raises(ValueError, match="waits for no decision"):
        run(graph, Command(resume="yes"), CONFIG)


def test_resuming_an_unknown_thread_stores_no_row(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "runs.db", check_same_thread=False) as conn:
        saver = SqliteSaver(conn)
        graph = build_graph(
            "transcript", model=fake_model(answer("42")), tools=[], checkpointer=saver
        )
        with pytest.raises(ValueError, match="no thread"):
            graph.invoke(None, {"configurable": {"thread_id": "ghost"}})
        rows = [
            conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("checkpoints", "writes")
        ]
    assert rows == [0, 0]


# Agent Chat UI answers a tool call left without a result before it sends a message.
UNANSWERED = {"type": "tool", "content": "Successfully handled tool call.", "tool_call_id": "x"}


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
@pytest.mark.parametrize(
    ("said", "decision", "shown"),
    [("yes", "approve", "approved echo[hi]"), (" No. ", "reject", "refused echo[hi]")],
)
def test_a_chat_message_on_a_waiting_thread_is_its_decision_and_stays_in_the_chat(
    variant: str, action_format: str, said: str, decision: str, shown: str, run: Runner
) -> None:
    """The decision typed in the chat leaves its trace (issue 58, 5): the words, in the turn's
    approval and in the chat right after the Action's result (a result follows its call)."""
    graph, log = waiting(variant, action_format, run)
    message = {"messages": [UNANSWERED, {"role": "user", "content": said, "id": "typed"}]}
    out = run(graph, message, CONFIG)
    assert out["answer"] == "done" and out["question"] == "q"
    (turn,) = [t for t in out["turns"] if t.get("action") == "echo"]
    assert turn["approval"]["decision"] == decision and turn["approval"]["said"] == said.strip()
    assert log.calls == ([("echo", "hi")] if decision == "approve" else [])
    kinds = [
        (m.type, m.content if m.type == "ai" and not m.tool_calls else "") for m in out["messages"]
    ]
    call = next(i for i, m in enumerate(out["messages"]) if m.type == "ai" and m.tool_calls)
    assert kinds[call + 1 : call + 3] == [
        ("tool", ""),
        ("ai", f'Decided in the chat: "{said.strip()}" {shown}.'),
    ]
    assert not [m for m in out["messages"] if m.type == "tool" and m.tool_call_id == "x"]


@pytest.mark.parametrize("said", ["what is 2+2?", "edit", "r"])
def test_any_other_question_on_a_waiting_thread_is_refused_saying_why(
    said: str, run: Runner
) -> None:
    graph, log = waiting("transcript", "text", run)
    with (
        nothing_changes(graph, log),
        pytest.raises(ValueError, match=r"waits for a decision on echo\[hi\].*answer yes"),
    ):
        run(graph, {"question": said}, CONFIG)


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_any_other_chat_message_asks_again_quoting_it_and_is_bounded(
    variant: str, action_format: str, run: Runner
) -> None:
    """A chat client's message that is no decision (issue 58, 5): the Action is asked about
    again, the request saying why, so the client's approval card stays on screen; nothing runs,
    nothing of the message enters the chat (its card says it); the MAX_UNUSABLE-th is the last
    taken, then a message is refused before it is stored, and a decision still is taken."""
    graph, log = waiting(variant, action_format, run)
    messages = graph.get_state(CONFIG).values["messages"]
    for tried in range(1, MAX_UNUSABLE + 1):
        typed = {"role": "user", "content": f"what is this? ({tried})"}
        out = run(graph, {"messages": [UNANSWERED, typed]}, CONFIG)
        assert status_of(graph.get_state(CONFIG)) == "awaiting_approval" and log.calls == []
        described = out["__interrupt__"][0].value["action_requests"][0]["description"]
        assert described.startswith(
            f"That answer could not be used: 'what is this? ({tried})' is not a decision: answer "
            "yes to run it or no to refuse it. "
        )
        assert "Please decide again." in described
        assert "The agent wants to run echo[" in described
        assert [m.id for m in out["messages"]] == [m.id for m in messages]
    flat = stored(graph.checkpointer)
    with pytest.raises(ValueError, match=f"{MAX_UNUSABLE} answers to echo.*could not be used"):
        run(graph, {"messages": [{"role": "user", "content": "and now?"}]}, CONFIG)
    assert stored(graph.checkpointer) == flat
    out = run(graph, {"messages": [{"role": "user", "content": "y"}]}, CONFIG)
    assert out["answer"] == "done" and log.calls == [("echo", "hi")]


def test_unusable_resume_values_are_bounded_and_the_thread_stays_flat(run: Runner) -> None:
    graph, log = waiting("transcript", "text", run)
    saver = graph.checkpointer
    bulky = {"type": "wave", "note": "x" * 90_000}
    for tried in range(1, MAX_UNUSABLE + 1):
        out = run(graph, Command(resume=bulky), CONFIG)
        described = out["__interrupt__"][0].value["description"]
        assert ("could not be used: another answer" in described) is (tried == MAX_UNUSABLE)
    flat = stored(saver)
    for value in [
        bulky,
        "maybe",
        {"type": "edit", "edited_action": {"name": "nope", "args": {}}},
    ] * 10:
        with pytest.raises(
            ValueError, match=f"{MAX_UNUSABLE} answers to echo.hi.*could not be used"
        ):
            run(graph, Command(resume=value), CONFIG)
    assert stored(saver) == flat and log.calls == []
    assert status_of(graph.get_state(CONFIG)) == "awaiting_approval"
    # A usable decision is still taken.
    out = run(graph, Command(resume={"decisions": [{"type": "approve"}]}), CONFIG)
    assert out["answer"] == "done" and log.calls == [("echo", "hi")]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_servers_policy_is_a_floor_a_runs_context_cannot_lower(variant: str, run: Runner) -> None:
    expected = {"none": ["echo"], "empty": ["echo"], "add": ["echo", "add"], "unset": ["echo"]}
    contexts = {"none": {"approve": "none"}, "empty": {"approve": []}, "add": {"approve": ["add"]}}
    for name, want in expected.items():
        context = contexts.get(name, {})
        graph, log = built(variant, action("echo", "hi"), answer("done"), approve=None,
                           approve_floor="echo")  # fmt: skip
        out = run(graph, {"question": "q"}, CONFIG, context=context)
        assert "__interrupt__" in out and log.calls == [], context
        settings = graph.get_state(CONFIG).values["settings"]
        assert settings["approve"] == want, name
    # Extended by a context: its own tools wait too.
    graph, log = built(variant, action("add", '{"a": 1, "b": 2}'), answer("3"), approve=None,
                       approve_floor=["echo"])  # fmt: skip
    out = run(graph, {"question": "q"}, CONFIG, context={"approve": "add"})
    assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "add"
    # Studio's form shows the effective value, and says it is the server's.
    field = graph.get_context_jsonschema()["properties"]["approve"]
    assert field["default"] == ["echo"] and "Always at least: echo" in field["description"]
    graph, _ = built(variant, answer("x"), approve=["add"], approve_floor="all")
    assert graph.get_context_jsonschema()["properties"]["approve"]["default"] == ["all"]


def test_the_served_graphs_keep_the_environments_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import reactgraph.studio as studio

    monkeypatch.setenv("REACTGRAPH_APPROVE", "calculator")
    try:
        graph = importlib.reload(studio).transcript
        context = graph.context_schema(approve="none")
        assert context.approve == ("calculator",)
        assert graph.context_schema(approve="search").approve == ("calculator", "search")
        with pytest.raises(TypeError, match="approve_floor"):
            build_graph("transcript", model=fake_model(), tools=[], approve_floor=3)
    finally:
        monkeypatch.delenv("REACTGRAPH_APPROVE")
        importlib.reload(studio)
