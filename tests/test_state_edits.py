"""State edits and forks never stand in for a person's decision (issue 57, items 1 and 2), in
every variant and both action formats, through the Python API, sync and async
(``update_state``/``bulk_update_state`` with ``invoke``, ``aupdate_state``/``abulk_update_state``
with ``ainvoke``): on a thread that waits for a decision every edit is refused and nothing is
stored; on any thread an edit cannot change the loop's own fields, while the edits the docs name
(the chat view's messages, a fork's question) still work; and a fork from the checkpoint before
an approved Action's tool asks again, each time, instead of running it again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.graph import END
from langgraph.types import Command, StateUpdate

from reactgraph import VARIANTS
from reactgraph.nodes.vocabulary.standing import status_of
from reactgraph.state_edits import LOOP_FIELDS, EditRefused
from tests.fakes import CONFIG, Runner, ToolLog, action, answer, call
from tests.test_approval_guard import MATRIX, node_names, nothing_changes, waiting

APPROVE = {"decisions": [{"type": "approve"}]}


def edit(run: Runner, graph: Any, config: Any, values: Any, as_node: str | None = None) -> Any:
    """``update_state`` with ``invoke``'s runner, ``aupdate_state`` with ``ainvoke``'s."""
    if run.mode == "invoke":  # type: ignore[attr-defined]
        return graph.update_state(config, values, as_node=as_node)
    return asyncio.run(graph.aupdate_state(config, values, as_node=as_node))


def bulk(run: Runner, graph: Any, config: Any, supersteps: Any) -> Any:
    if run.mode == "invoke":  # type: ignore[attr-defined]
        return graph.bulk_update_state(config, supersteps)
    return asyncio.run(graph.abulk_update_state(config, supersteps))


def proposed(action_format: str, text: str = "hi") -> Any:
    return action("echo", text) if action_format == "text" else call("echo", {"text": text})


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_every_edit_of_a_waiting_thread_is_refused(
    variant: str, action_format: str, run: Runner
) -> None:
    graph, log = waiting(variant, action_format, run)
    nodes = [n for n in node_names(graph) if n != END] + [None]
    edits: list[tuple[Any, str | None]] = [
        *((Command(goto="run_tool"), node) for node in nodes),
        *((Command(goto="approve_action"), node) for node in nodes),
        *(({"question": "x"}, node) for node in nodes),
        *(({}, node) for node in nodes),
        ({"settings": {"approve": []}}, "call_model"),
        (None, END),  # drop the steps due
        (None, "__copy__"),
        ([({"question": "x"}, "start_run")], "__copy__"),
        ({"question": "a new question"}, "__input__"),
    ]
    with nothing_changes(graph, log):
        for values, as_node in edits:
            with pytest.raises(EditRefused, match=r"waits for a person's decision on echo\[hi\]"):
                edit(run, graph, CONFIG, values, as_node)
        with pytest.raises(ValueError, match=r"Command\(resume=DECISION\)"):
            bulk(run, graph, CONFIG, [[StateUpdate({"question": "x"}, "call_model")]])
    # A decision still goes on, once.
    out = run(graph, Command(resume=APPROVE), CONFIG)
    assert log.calls == [("echo", "hi")] and out["answer"] == "done"


def finished(variant: str, run: Runner, action_format: str = "text") -> tuple[Any, ToolLog, Any]:
    graph, log = waiting(variant, action_format, run, answer("again"), answer("more"))
    out = run(graph, Command(resume=APPROVE), CONFIG)
    assert out["answer"] == "done" and log.calls == [("echo", "hi")]
    return graph, log, out


CHANGES: dict[str, Any] = {
    "settings": lambda s: {**s, "approve": []},
    "usage": lambda u: {**u, "total_tokens": 0, "prompt_tokens": 0},
    "budget": lambda b: {"budget": "max_run_tokens", "limit": 1, "spent": 2, "turn": 1},
    "budget_warned": lambda w: ["max_run_tokens"],
    "parsed": lambda p: {
        **p,
        "kind": "action",
        "action": "echo",
        "action_input": "rm",
        "approval": {"decision": "approve", "by": "x"},
    },
    "reply": lambda r: {**(r or {}), "raw": "Action: echo[rm]", "text": "Action: echo[rm]"},
    "turns": lambda t: [*t, {**t[0], "turn": 3}],
    "run": lambda r: (r or 0) + 5,
    "thread_id": lambda t: "another",
    "trace": lambda t: {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"},
    "rung": lambda r: (r or 0) + 1,
    "escalations": lambda e: [*(e or []), {"turn": 0, "rung": 1, "reason": "fault"}],
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_an_edit_cannot_change_the_loops_fields(variant: str, run: Runner) -> None:
    assert set(CHANGES) == set(LOOP_FIELDS)
    graph, log, _ = finished(variant, run)
    state = graph.get_state(CONFIG).values
    before = list(graph.checkpointer.list(CONFIG))
    for field, change in CHANGES.items():
        for as_node in (None, "call_model", "start_run"):
            with pytest.raises(EditRefused, match=f"writes '{field}'.*only the loop changes"):
                edit(run, graph, CONFIG, {field: change(state.get(field))}, as_node)
        with pytest.raises(EditRefused, match=f"writes '{field}'"):
            edit(run, graph, CONFIG, Command(update={field: change(state.get(field))}), None)
    for command in (Command(goto="run_tool"), Command(resume=APPROVE)):
        with pytest.raises(EditRefused, match=r"cannot route the run|gives no decision"):
            edit(run, graph, CONFIG, command, "parse_reply")
    with pytest.raises(EditRefused, match="writes 'usage'"):
        edit(run, graph, CONFIG, Command(update=[("question", "q"), ("usage", {})]))
    assert list(graph.checkpointer.list(CONFIG)) == before
    # A new thread made with a faked approved Action and a route to its tool.
    faked = CHANGES["parsed"](state["parsed"])
    fresh = {"configurable": {"thread_id": "fresh"}}
    for values in (
        {"question": "q", "parsed": faked},
        Command(update={"question": "q"}, goto="run_tool"),
    ):
        with pytest.raises(EditRefused):
            bulk(run, graph, fresh, [[StateUpdate(values, "parse_reply")]])
    assert list(graph.checkpointer.list(fresh)) == []
    edit(run, graph, CONFIG, Command(update=[("question", "paired")]))
    assert graph.get_state(CONFIG).values["question"] == "paired"
    # The whole state sent back with one field changed (Studio's state editor): the loop's
    # fields are left as they are, the change is made, nothing is added twice.
    edit(run, graph, CONFIG, {**state, "question": "edited"})
    after = graph.get_state(CONFIG).values
    assert after["question"] == "edited"
    assert {k: after.get(k) for k in LOOP_FIELDS} == {k: state.get(k) for k in LOOP_FIELDS}
    # The chat view's messages (the state editor), as the docs say.
    messages = [*after["messages"][:-1], after["messages"][-1].model_copy(update={"content": "x"})]
    edit(run, graph, CONFIG, {"messages": messages})
    assert graph.get_state(CONFIG).values["messages"][-1].content == "x"
    # A follow-up question still runs, its approval asked again as the settings say.
    again = run(graph, {"question": "once more"}, CONFIG)
    assert again["answer"] == "again" and log.calls == [("echo", "hi")]


def run_tool_checkpoints(graph: Any) -> list[Any]:
    return [s for s in graph.get_state_history(CONFIG) if s.next == ("run_tool",)]


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_a_fork_of_an_approved_action_asks_again(
    variant: str, action_format: str, run: Runner
) -> None:
    graph, log, _ = finished(variant, run, action_format)
    (before_tool,) = run_tool_checkpoints(graph)
    assert before_tool.values["parsed"]["approval"]["decision"] == "approve"
    history = graph.get_state_history(CONFIG)
    (before_decision,) = [s for s in history if s.next == ("approve_action",)]
    assert run(graph, None, before_decision.config)["__interrupt__"]  # asks by itself
    for _ in range(3):
        out = run(graph, None, before_tool.config)
        (pending,) = out["__interrupt__"]
        assert pending.value["action_requests"][0]["args"] == {"text": "hi"}
        assert status_of(graph.get_state(CONFIG)) == "awaiting_approval"
        assert log.calls == [("echo", "hi")]  # never run again without a decision
    # The fork waits like any thread: its edits refused, a decision runs the Action once.
    with pytest.raises(EditRefused):
        edit(run, graph, CONFIG, {"question": "x"})
    out = run(graph, Command(resume={"type": "reject", "message": "not twice"}), CONFIG)
    assert log.calls == [("echo", "hi")] and "not twice" in out["turns"][-2]["observation"]


@pytest.mark.parametrize("variant", ["transcript", "notes_compaction"])
def test_a_fork_of_an_edited_action_asks_about_what_the_model_proposed(
    variant: str, run: Runner
) -> None:
    graph, log = waiting(variant, "text", run, answer("again"))
    bye = {"name": "echo", "args": {"text": "bye"}}
    edited = {"decisions": [{"type": "edit", "edited_action": bye}]}
    run(graph, Command(resume=edited), CONFIG)
    assert log.calls == [("echo", "bye")]
    (before_tool,) = run_tool_checkpoints(graph)
    out = run(graph, None, before_tool.config)
    (pending,) = out["__interrupt__"]
    assert pending.value["action_requests"][0]["args"] == {"text": "hi"}
    assert graph.get_state(CONFIG).values["parsed"].get("approval") is None
    out = run(graph, Command(resume=APPROVE), CONFIG)
    assert log.calls == [("echo", "bye"), ("echo", "hi")] and out["answer"] == "again"


def cut_after(graph: Any, checkpoint_id: str) -> None:
    """The thread as a kill right after ``checkpoint_id`` leaves it: the later checkpoints and
    their writes gone from the ``InMemorySaver``."""
    saver = graph.checkpointer
    stored = saver.storage["t1"][""]
    for later in [c for c in stored if c > checkpoint_id]:
        del stored[later]
    for key in [k for k in saver.writes if k[0] == "t1" and k[2] >= checkpoint_id]:
        del saver.writes[key]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_newest_checkpoint_runs_the_action_its_decision_was_given_for(
    variant: str, run: Runner
) -> None:
    """Killed between the decision and the tool: the thread's newest checkpoint is no fork, so
    a resume (with or without its checkpoint's id) runs the approved Action, once."""
    graph, log, _ = finished(variant, run)
    (before_tool,) = run_tool_checkpoints(graph)
    cut_after(graph, before_tool.config["configurable"]["checkpoint_id"])
    newest = graph.get_state(CONFIG)
    assert newest.next == ("run_tool",)
    for config in (newest.config, CONFIG):
        log.calls.clear()
        out = run(graph, None, config)
        assert "__interrupt__" not in out and out["answer"] in ("again", "more")
        assert log.calls == [("echo", "hi")]
        cut_after(graph, before_tool.config["configurable"]["checkpoint_id"])
