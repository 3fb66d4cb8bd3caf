"""A person approves, edits, answers or rejects an Action before it runs (the ``approve``
setting), in every variant, through ``invoke`` and ``ainvoke``: the run stops with the request
Agent Chat UI renders, is checkpointed there, and goes on with each decision in every shape the
clients send; a value that is no decision is asked about again."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.running.decisions import MAX_RESUME_CHARS
from reactgraph.nodes.vocabulary.standing import status_of
from reactgraph.variants import REGISTRY
from tests.fakes import (
    CONFIG,
    Runner,
    ToolLog,
    action,
    add,
    answer,
    call,
    fake_model,
    prompt_text,
)


def built(variant: str, *replies: Any, approve: Any = ("echo",), **more: Any) -> tuple[Any, Any]:
    """A graph of ``variant`` on a fresh checkpointer whose echo (and add) need approval, and
    the log of its tool calls."""
    log = ToolLog()
    extra = {"context_window": 100_000} if REGISTRY[variant].setting("context_window") else {}
    model = fake_model(*replies)
    graph = build_graph(
        variant,
        model=model,
        tools=[log.echo(), log.echo("other"), add],
        checkpointer=InMemorySaver(),
        approve=approve,
        **extra,
        **more,
    )
    graph.model = model  # type: ignore[attr-defined]
    return graph, log


def decided(
    run: Runner, variant: str, proposed: str, value: Any, final: str, ran: list[Any]
) -> tuple[Any, ...]:
    """A run of ``variant`` stopped before ``echo[proposed]``, resumed with ``value``, which
    made the tool calls ``ran`` and answered ``final``: its output, its first turn, and the
    graph (its model's prompts)."""
    graph, log = built(variant, action("echo", proposed), answer(final))
    run(graph, {"question": "q"}, CONFIG)
    out = run(graph, Command(resume=value), CONFIG)
    assert log.calls == ran and out["answer"] == final
    return out, out["turns"][0], graph


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_run_stops_before_the_action_with_the_request_agent_chat_ui_renders(
    variant: str, run: Runner
) -> None:
    graph, log = built(variant, action("echo", "rm -rf /tmp/x"), answer("done"))
    out = run(graph, {"question": "Clean up?"}, CONFIG)
    assert log.calls == [] and out.get("status") is None
    (pending,) = out["__interrupt__"]
    request = pending.value
    # LangChain's HITLRequest, which this Agent Chat UI renders (approve, edit, reject).
    (asked,) = request["action_requests"]
    assert (asked["name"], asked["args"]) == ("echo", {"text": "rm -rf /tmp/x"})
    assert "echo[rm -rf /tmp/x]" in asked["description"]
    # It offers what Agent Chat UI's card can do, nothing it has no control for (issue 58, 5).
    assert asked["description"].endswith(
        "Approve it to run it as written, edit its input first, or reject it with a reason, "
        "which the agent reads."
    )
    assert "respond" not in asked["description"] and "tool's place" not in asked["description"]
    (review,) = request["review_configs"]
    assert review["action_name"] == "echo"
    assert {"approve", "edit", "reject", "respond"} == set(review["allowed_decisions"])
    # LangGraph's prebuilt HumanInterrupt beside it (the agent inbox, earlier clients).
    assert request["action_request"] == {"action": "echo", "args": {"text": "rm -rf /tmp/x"}}
    assert all(request["config"][k] for k in ("allow_accept", "allow_edit", "allow_respond"))
    assert request["config"]["allow_ignore"] and request["description"]
    # Checkpointed there: the thread is waiting, its chat view shows the call and no result.
    snapshot = graph.get_state(CONFIG)
    assert snapshot.next == ("approve_action",) and status_of(snapshot) == "awaiting_approval"
    last = snapshot.values["messages"][-1]
    assert last.type == "ai" and last.tool_calls[0]["args"] == {"text": "rm -rf /tmp/x"}
    assert snapshot.values["turns"] == []
    # Resumed without a decision (a restart, a client's plain resume) it asks again.
    again = run(graph, None, CONFIG)
    assert again["__interrupt__"][0].value == request and log.calls == []


APPROVALS = {
    "LangChain's HITL response": {"decisions": [{"type": "approve"}]},
    "one decision": {"type": "approve"},
    "the agent inbox's accept": [{"type": "accept", "args": None}],
    "a word": "yes",
}


@pytest.mark.parametrize("shape", sorted(APPROVALS))
def test_an_approved_action_runs_as_written(shape: str, run: Runner) -> None:
    out, first, _ = decided(run, "transcript", "hi", APPROVALS[shape], "done", [("echo", "hi")])
    assert (first["action_input"], first["observation"]) == ("hi", "echo: hi")
    assert first["approval"] == {"decision": "approve", "by": "unnamed"}
    kinds = [(m.type, getattr(m, "status", None)) for m in out["messages"]]
    assert kinds == [("human", None), ("ai", None), ("tool", "success"), ("ai", None)]


EDITS = {
    "LangChain's edited_action": {
        "decisions": [
            {"type": "edit", "edited_action": {"name": "echo", "args": {"text": "safer"}}}
        ]
    },
    "its older arguments key": {
        "type": "edit",
        "edited_action": {"name": "echo", "arguments": {"text": "safer"}},
    },
    "the agent inbox's edit": [
        {"type": "edit", "args": {"action": "echo", "args": {"text": "safer"}}}
    ],
    "the input as text": {"type": "edit", "args": "safer"},
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", sorted(EDITS))
def test_an_edited_action_runs_with_the_persons_input(
    variant: str, shape: str, run: Runner
) -> None:
    out, first, graph = decided(run, variant, "risky", EDITS[shape], "done", [("echo", "safer")])
    assert (first["action"], first["action_input"], first["observation"]) == (
        "echo",
        "safer",
        "echo: safer",
    )
    assert first["reply"] == action("echo", "risky")  # what the model wrote stays as it was
    assert first["approval"] == {
        "decision": "edit",
        "by": "unnamed",
        "proposed_action": "echo",
        "proposed_input": "risky",
    }
    # The chat view's tool call is what ran; the model is told what ran in its next prompt.
    call = out["messages"][1].tool_calls[0]
    assert call["args"] == {"text": "safer"} and out["messages"][2].content == "echo: safer"
    assert (
        "a person changed this action before it ran: it ran as echo[safer]"
        in (graph.model.prompts[-1])
    )


def test_an_edit_may_name_another_tool_and_fill_several_arguments(run: Runner) -> None:
    graph, log = built("transcript", action("echo", "2 and 3"), answer("5"), approve="all")
    run(graph, {"question": "q"}, CONFIG)
    edit = {"type": "edit", "edited_action": {"name": "add", "args": {"a": "2", "b": 3}}}
    out = run(graph, Command(resume=edit), CONFIG)
    first = out["turns"][0]
    assert (first["action"], first["action_input"], first["observation"]) == (
        "add",
        '{"a": "2", "b": 3}',
        "5",
    )
    assert log.calls == [] and first["approval"]["proposed_action"] == "echo"
    assert out["messages"][1].tool_calls[0] == {
        "name": "add",
        "args": {"a": "2", "b": 3},
        "id": "call-rg-1-1",
        "type": "tool_call",
    }


RESPONSES = {
    "LangChain's respond": {"decisions": [{"type": "respond", "message": "it is 42"}]},
    "the agent inbox's response": [{"type": "response", "args": "it is 42"}],
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", sorted(RESPONSES))
def test_a_response_is_the_observation_and_nothing_runs(
    variant: str, shape: str, run: Runner
) -> None:
    out, first, graph = decided(run, variant, "the answer", RESPONSES[shape], "42", [])
    assert (first["kind"], first["observation"], first["tool_latency_s"]) == (
        "action",
        "it is 42",
        None,
    )
    assert first["approval"] == {"decision": "respond", "by": "unnamed", "message": "it is 42"}
    assert out["messages"][2].type == "tool" and out["messages"][2].content == "it is 42"
    assert "Observation: it is 42" in graph.model.prompts[-1]


REJECTIONS = {
    "LangChain's reject with a reason": (
        {"decisions": [{"type": "reject", "message": "not on production"}]},
        "A person refused this action, so it did not run. Their reason: not on production",
    ),
    "the agent inbox's ignore": (
        [{"type": "ignore", "args": None}],
        "A person refused this action, so it did not run.",
    ),
    "a word": ("no", "A person refused this action, so it did not run."),
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", sorted(REJECTIONS))
def test_a_rejection_tells_the_model_the_action_was_refused(
    variant: str, shape: str, run: Runner
) -> None:
    value, observation = REJECTIONS[shape]
    out, first, graph = decided(run, variant, "drop table", value, "I will not, then.", [])
    assert out["status"] == "answered"
    assert first["observation"] == observation and first["approval"]["decision"] == "reject"
    tool = out["messages"][2]
    assert (tool.type, tool.status, tool.content) == ("tool", "error", observation)
    assert f"Observation: {observation}" in graph.model.prompts[-1]


MALFORMED = [
    {"type": "launch"},
    {"decisions": []},
    {"decisions": [{"type": "approve"}, {"type": "approve"}]},
    {"type": "edit"},
    {"type": "edit", "edited_action": {"name": "nuke", "args": {"text": "x"}}},
    {"type": "respond", "message": "   "},
    {"type": "reject", "message": 7},
    "maybe",
    42,
    {"type": ["approve"]},
    {"decisions": [{"type": {"name": "approve"}}]},
    {"type": "edit", "edited_action": {"name": ["echo"], "args": {"text": "x"}}},
    [None],
]


@pytest.mark.parametrize("value", MALFORMED, ids=repr)
def test_a_value_that_is_no_decision_is_asked_about_again(value: Any, run: Runner) -> None:
    graph, log = built("transcript", action("echo", "hi"), answer("done"))
    run(graph, {"question": "q"}, CONFIG)
    out = run(graph, Command(resume=value), CONFIG)
    (pending,) = out["__interrupt__"]
    described = pending.value["action_requests"][0]["description"]
    assert described.startswith("That answer could not be used: ") and "decide again" in described
    assert log.calls == [] and status_of(graph.get_state(CONFIG)) == "awaiting_approval"
    out = run(graph, Command(resume={"type": "approve"}), CONFIG)
    assert log.calls == [("echo", "hi")] and out["answer"] == "done"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"type": "respond", "message": "x" * MAX_RESUME_CHARS}, "too large"),
        ({"type": "respond", "message": "a\x00b"}, "cannot be stored"),
    ],
)
def test_a_resume_value_too_large_or_unstorable_is_refused_before_it_is_stored(
    value: Any, why: str, run: Runner
) -> None:
    graph, log = built("transcript", action("echo", "hi"), answer("done"))
    run(graph, {"question": "q"}, CONFIG)
    before = list(graph.checkpointer.list(CONFIG))
    with pytest.raises(ValueError, match=why):
        run(graph, Command(resume=value), CONFIG)
    assert list(graph.checkpointer.list(CONFIG)) == before and log.calls == []


def test_who_decided_is_in_the_turn_and_its_log_line(
    run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    graph, _ = built("transcript", action("echo", "a"), action("echo", "b"), answer("done"))
    run(graph, {"question": "q"}, CONFIG)
    with caplog.at_level(logging.INFO, logger="reactgraph"):
        run(graph, Command(resume={"decisions": [{"type": "approve"}], "by": "ada"}), CONFIG)
        # The LangGraph server's authenticated user counts over what the value says.
        server = {"configurable": {**CONFIG["configurable"], "langgraph_auth_user_id": "grace"}}
        out = run(graph, Command(resume={"type": "reject", "by": "ada"}), server)
    assert [t["approval"]["by"] for t in out["turns"][:2]] == ["ada", "grace"]
    assert "turn 1: echo[a] approved by ada" in caplog.text
    assert "turn 2: echo[b] refused by grace" in caplog.text


def test_only_the_named_tools_wait_and_the_variants_own_actions_never_do(run: Runner) -> None:
    graph, log = built(
        "notes",
        action("other", "free"),
        action("update_notes", "a plan"),
        action("echo", "asked"),
        answer("done"),
        approve="echo",
    )
    out = run(graph, {"question": "q"}, CONFIG)
    assert log.calls == [("other", "free")] and out["notes"] == "a plan"
    assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "echo"
    # Per run: none, then all, over the built value.
    graph, log = built("transcript", action("echo", "x"), answer("done"))
    assert run(graph, {"question": "q"}, CONFIG, context={"approve": "none"})["answer"] == "done"
    graph, log = built("transcript", action("other", "x"), answer("done"), approve=())
    out = run(graph, {"question": "q"}, CONFIG, context={"approve": ["all"]})
    assert "__interrupt__" in out and log.calls == []


def test_the_setting_reads_every_form_and_refuses_a_tool_the_graph_lacks() -> None:
    setting = REGISTRY["transcript"].setting("approve")
    assert setting is not None and setting.knob.per_run and setting.knob.build
    forms = {
        "echo": ("echo",),
        " echo, other ,echo": ("echo", "other"),
        ("echo", "other"): ("echo", "other"),
        "all": ("all",),
        ("echo", "all"): ("all",),
        "none": (),
        "": (),
        (): (),
    }
    for given, normalised in forms.items():
        assert setting.check(given if not isinstance(given, tuple) else list(given)) == normalised
    bad_values = (
        (3, TypeError),
        (["echo", 3], TypeError),
        ("none, echo", ValueError),
        (["tool"] * 100_000, ValueError),  # bounded before it is read
        ("x" * 1_000_000, ValueError),
    )
    for bad, error in bad_values:
        with pytest.raises(error):
            setting.check(bad)
    with pytest.raises(ValueError, match="approve names 'ehco'"):
        built("transcript", approve="ehco")
    graph, _ = built("transcript", answer("x"))
    with pytest.raises(ValueError, match="approve names 'ehco'"):
        graph.invoke({"question": "q"}, CONFIG, context={"approve": ["ehco"]})
    assert graph.get_state(CONFIG).values == {}  # refused before anything was stored
    # Studio's form: a list of tool names, empty by default.
    schema = graph.get_context_jsonschema()["properties"]["approve"]
    assert schema["type"] == "array" and schema["items"] == {"type": "string"}
    assert schema["default"] == ["echo"] and "approve" in schema["description"]


def test_a_person_who_keeps_refusing_the_same_action_ends_the_run_as_stuck(run: Runner) -> None:
    graph, log = built("transcript", *[action("echo", "again")] * 4, stuck_repeats=3)
    run(graph, {"question": "q"}, CONFIG)
    for _ in range(2):
        out = run(graph, Command(resume={"type": "reject"}), CONFIG)
    assert out["status"] == "stuck" and log.calls == [] and len(out["turns"]) == 3


def test_the_served_graphs_take_approve_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Agent Chat UI has no context form: ``REACTGRAPH_APPROVE`` sets the served graphs'."""
    import importlib

    import reactgraph.studio as studio

    monkeypatch.setenv("REACTGRAPH_APPROVE", "calculator, search")
    try:
        for name in VARIANTS:
            graph = getattr(importlib.reload(studio), name)
            schema = graph.get_context_jsonschema()["properties"]["approve"]
            assert schema["default"] == ["calculator", "search"], name
        monkeypatch.setenv("REACTGRAPH_APPROVE", "serch")
        with pytest.raises(ValueError, match="approve names 'serch'"):
            importlib.reload(studio)
    finally:
        monkeypatch.delenv("REACTGRAPH_APPROVE")
        importlib.reload(studio)


def test_the_python_batch_api_never_waits_and_reports_the_waiting_runs() -> None:
    import asyncio

    from reactgraph.batch import run_batch, run_many

    def reply(messages: Any) -> str:
        seen = any(prompt_text([m]).startswith("Observation:") for m in messages)
        return answer("done") if seen else action("echo", "x")

    graph, log = built("transcript", *[reply] * 20, approve="echo")
    results = run_batch(graph, ["q1", "q2"])
    assert [r["status"] for r in results] == ["awaiting_approval"] * 2
    assert all(r["error"] is None for r in results) and log.calls == []

    async def again() -> list[Any]:
        return [r async for r in run_many(graph, ["q1"], thread_prefix="same")]

    assert [r["status"] for r in asyncio.run(again())] == ["awaiting_approval"]
    # Run again on that thread: it still waits, and the model is not called again.
    calls = len(graph.model.calls)
    assert [r["status"] for r in asyncio.run(again())] == ["awaiting_approval"]
    assert len(graph.model.calls) == calls and log.calls == []


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(
    ("value", "observation"),
    [
        ({"decisions": [{"type": "approve"}]}, "5"),
        ({"type": "edit", "edited_action": {"name": "add", "args": {"a": 40, "b": 8}}}, "48"),
        ({"type": "respond", "message": "It is 5."}, "It is 5."),
    ],
    ids=["approve", "edit", "respond"],
)
def test_a_native_tool_call_is_approved_with_its_arguments_as_the_model_sent_them(
    variant: str, value: Any, observation: str, run: Runner
) -> None:
    """The tool_calls format: the card shows the call's own arguments (numbers stay numbers,
    as in the chat view), and each decision gives its Observation as the text format does."""
    graph, _log = built(
        variant,
        call("add", {"a": 2, "b": 3}, "Add them.", "c1"),
        AIMessage("done"),
        approve=("add",),
        action_format="tool_calls",
    )
    out = run(graph, {"question": "q"}, CONFIG)
    (asked,) = out["__interrupt__"][0].value["action_requests"]
    assert (asked["name"], asked["args"]) == ("add", {"a": 2, "b": 3})
    out = run(graph, Command(resume=value), CONFIG)
    (turn,) = [t for t in out["turns"] if t["action"] == "add"]
    assert turn["observation"] == observation and out["answer"] == "done"


def test_a_native_call_of_a_one_argument_tool_is_shown_as_sent(run: Runner) -> None:
    @tool
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    model = fake_model(call("double", {"x": 21}, "", "c1"), AIMessage("done"))
    graph = build_graph(
        "transcript",
        model=model,
        tools=[double],
        checkpointer=InMemorySaver(),
        approve=["double"],
        action_format="tool_calls",
    )
    out = run(graph, {"question": "q"}, CONFIG)
    (asked,) = out["__interrupt__"][0].value["action_requests"]
    assert asked["args"] == {"x": 21}  # as the chat view's call shows it, not "21"
    out = run(graph, Command(resume={"type": "approve"}), CONFIG)
    assert out["turns"][0]["observation"] == "42"
