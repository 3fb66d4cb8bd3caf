"""Approvals as chat clients make them, through the official ``langgraph_sdk`` client against
`langgraph dev` (what Agent Chat UI and Studio do, without a browser): a run with the ``approve``
setting in its context stops before the Action with the request Agent Chat UI renders; each
decision, in LangChain's and the agent inbox's shapes, gives its Observation; a value that is no
decision is asked about again; and the waiting thread outlives a restart of the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactgraph import VARIANTS
from tests.fakes import FakeOpenAIServer
from tests.langgraph_dev import CHAT_GRAPHS, LANGGRAPH, langgraph_dev

pytestmark = [pytest.mark.slow, pytest.mark.servers]

QUESTION = {"type": "human", "content": "How many years apart?"}
REFUSED = "A person refused this action, so it did not run. Their reason: no sums today"
# Each decision, as Agent Chat UI sends it, and the Observation the model then reads.
DECISIONS: dict[str, tuple[Any, str]] = {
    "approve": ({"decisions": [{"type": "approve"}]}, "48"),
    "edit": (
        {
            "decisions": [
                {
                    "type": "edit",
                    "edited_action": {"name": "calculator", "args": {"expression": "2000-1889"}},
                }
            ]
        },
        "111",
    ),
    "respond": ({"decisions": [{"type": "respond", "message": "forty-eight"}]}, "forty-eight"),
    "reject": ({"decisions": [{"type": "reject", "message": "no sums today"}]}, REFUSED),
    # The agent inbox's HumanResponse (earlier Agent Chat UI versions).
    "accept": ([{"type": "accept", "args": None}], "48"),
    "inbox edit": (
        [{"type": "edit", "args": {"action": "calculator", "args": {"expression": "1+1"}}}],
        "2",
    ),
    "response": ([{"type": "response", "args": "it is 48"}], "it is 48"),
    "ignore": ([{"type": "ignore", "args": None}], REFUSED.split(" Their")[0]),
}


@pytest.fixture(scope="module")
def model(seed_model_server: FakeOpenAIServer) -> FakeOpenAIServer:
    return seed_model_server


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    from langgraph_sdk import get_sync_client

    with langgraph_dev(tmp_path_factory.mktemp("approvals"), CHAT_GRAPHS) as url:
        yield get_sync_client(url=url)


def context(model: FakeOpenAIServer) -> dict[str, Any]:
    return {"model_name": "gpt-4o-mini", "base_url": model.url, "approve": ["calculator"]}


def waiting_thread(client: Any, variant: str, model: FakeOpenAIServer) -> str:
    """A thread of ``variant`` stopped before its calculator, checked as a client sees it."""
    thread = client.threads.create()["thread_id"]
    values = client.runs.wait(
        thread, variant, input={"messages": [QUESTION]}, context=context(model)
    )
    (pending,) = values["__interrupt__"]
    (asked,) = pending["value"]["action_requests"]
    assert (asked["name"], asked["args"]) == ("calculator", {"expression": "1937-1889"})
    review = pending["value"]["review_configs"][0]
    assert review["action_name"] == "calculator"
    assert {"approve", "edit", "reject"} <= set(review["allowed_decisions"])
    state = client.threads.get(thread)
    assert state["status"] == "interrupted" and state["interrupts"]
    # The chat view while it waits: two searches with their results, then the calculator's call.
    messages = values["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert messages[-1]["tool_calls"][0]["args"] == {"expression": "1937-1889"}
    assert [t["action"] for t in values["turns"]] == ["search", "search"]
    return thread


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_decision_gives_its_observation(
    client: Any, model: FakeOpenAIServer, variant: str
) -> None:
    for name in ("approve", "edit", "respond", "reject"):
        value, observation = DECISIONS[name]
        thread = waiting_thread(client, variant, model)
        out = client.runs.wait(thread, variant, command={"resume": value})
        assert "__interrupt__" not in out and out["answer"] == "48", (name, out.get("status"))
        third = out["turns"][2]
        assert third["observation"] == observation, name
        assert third["approval"]["decision"] == name and third["approval"]["by"] == "unnamed"
        tool = out["messages"][6]
        assert (tool["type"], tool["content"]) == ("tool", observation), name
        assert client.threads.get(thread)["status"] == "idle"


def test_the_agent_inbox_shapes_and_a_value_that_is_no_decision(
    client: Any, model: FakeOpenAIServer
) -> None:
    for name in ("accept", "inbox edit", "response", "ignore"):
        value, observation = DECISIONS[name]
        thread = waiting_thread(client, "transcript", model)
        out = client.runs.wait(thread, "transcript", command={"resume": value})
        assert out["turns"][2]["observation"] == observation, name
    thread = waiting_thread(client, "transcript", model)
    again = client.runs.wait(thread, "transcript", command={"resume": {"type": "launch"}})
    (pending,) = again["__interrupt__"]
    described = pending["value"]["action_requests"][0]["description"]
    assert described.startswith("That answer could not be used")
    assert client.threads.get(thread)["status"] == "interrupted"
    # Too large for the server to store: the run fails, and the thread still waits.
    huge = {"type": "respond", "message": "x" * 200_000}
    run = client.runs.create(thread, "transcript", command={"resume": huge})
    client.runs.join(thread, run["run_id"])
    assert client.runs.get(thread, run["run_id"])["status"] == "error"
    assert client.threads.get_state(thread)["next"] == ["approve_action"]
    out = client.runs.wait(thread, "transcript", command={"resume": {"type": "approve"}})
    assert out["turns"][2]["observation"] == "48" and out["answer"] == "48"


def test_a_waiting_thread_outlives_a_restart_of_the_server(
    model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Stopped as a person stops it (SIGTERM, Ctrl-C) and started again: the thread still
    waits, and the decision goes on from there. (A SIGKILL of `langgraph dev` loses the steps
    since its last write to disk: ``tests/test_langgraph_dev_known.py``.)"""
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    from langgraph_sdk import get_sync_client

    with langgraph_dev(tmp_path, CHAT_GRAPHS) as url:
        thread = waiting_thread(get_sync_client(url=url), "transcript", model)
    calls = len(model.requests)
    with langgraph_dev(tmp_path, CHAT_GRAPHS) as url:
        client = get_sync_client(url=url)
        assert client.threads.get(thread)["status"] == "interrupted"
        (task,) = client.threads.get_state(thread)["tasks"]
        assert task["name"] == "approve_action" and task["interrupts"]
        value, _ = DECISIONS["edit"]
        out = client.runs.wait(thread, "transcript", command={"resume": value})
    assert out["turns"][2]["observation"] == "111" and out["answer"] == "48"
    assert len(model.requests) == calls + 1  # only the answer's call: nothing ran twice


def refused(client: Any, thread: str, variant: str, **run: Any) -> None:
    """A run that fails before anything runs: the thread still waits at its Action."""
    started = client.runs.create(thread, variant, **run)
    client.runs.join(thread, started["run_id"])
    assert client.runs.get(thread, started["run_id"])["status"] == "error", run
    assert client.threads.get_state(thread)["next"] == ["approve_action"], run


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_command_but_a_decision_runs_the_waiting_action(
    client: Any, model: FakeOpenAIServer, variant: str
) -> None:
    from tests.test_approval import built
    from tests.test_approval_guard import node_names

    thread = waiting_thread(client, variant, model)
    calls = len(model.requests)
    gotos: list[Any] = [n for n in node_names(built(variant)[0]) if n != "__end__"]
    gotos += [["run_tool"], {"node": "run_tool", "input": {}}]
    for goto in gotos:
        refused(client, thread, variant, command={"goto": goto})
    refused(client, thread, variant, command={"update": {"question": "x"}, "goto": "__end__"})
    # "Mark as Resolved" changes nothing; nothing ran and the model was not asked.
    client.runs.wait(thread, variant, command={"goto": "__end__"})
    assert client.threads.get_state(thread)["next"] == ["approve_action"]
    assert len(model.requests) == calls
    value, observation = DECISIONS["reject"]
    out = client.runs.wait(thread, variant, command={"resume": value})
    sums = [t for t in out["turns"] if t.get("action") == "calculator"]
    assert [t["observation"] for t in sums] == [observation]
    assert [m["content"] for m in out["messages"] if m["type"] == "tool"][2:] == [observation]


def test_the_servers_policy_holds_and_a_chat_message_decides(
    model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """``REACTGRAPH_APPROVE`` is a floor: a run whose context says ``approve: none`` still
    waits. A message on the waiting thread is the decision when it is yes or no, its words kept
    in the chat after the result; another message asks again, the request quoting it, and a
    ``question`` is refused; an unknown thread is not resumed."""
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    from langgraph_sdk import get_sync_client

    env = {"REACTGRAPH_APPROVE": "calculator"}
    with langgraph_dev(tmp_path, None, env=env) as url:  # the served graphs: graphs/studio.py
        client = get_sync_client(url=url)
        for variant in VARIANTS:
            thread = client.threads.create()["thread_id"]
            values = client.runs.wait(
                thread,
                variant,
                input={"messages": [QUESTION]},
                context={**context(model), "approve": "none"},
            )
            assert values["__interrupt__"], variant
            refused(client, thread, variant, input={"question": "2+2?"})
            other = {"type": "human", "content": "2+2?"}
            again = client.runs.wait(thread, variant, input={"messages": [other]})
            (pending,) = again["__interrupt__"]
            described = pending["value"]["action_requests"][0]["description"]
            assert described.startswith("That answer could not be used: '2+2?' is not a decision")
            assert [m["id"] for m in again["messages"]] == [m["id"] for m in values["messages"]]
            said = {"type": "human", "content": "yes"}
            out = client.runs.wait(thread, variant, input={"messages": [said]})
            assert out["turns"][2]["observation"] == "48" and out["answer"] == "48", variant
            assert out["turns"][2]["approval"]["decision"] == "approve"
            assert out["turns"][2]["approval"]["said"] == "yes"
            shown = [m["content"] for m in out["messages"][5:9]]
            assert shown[1:3] == [
                "48",
                'Decided in the chat: "yes" approved calculator[1937-1889].',
            ]
        schema = client.assistants.get_schemas(
            client.assistants.search(graph_id="transcript")[0]["assistant_id"]
        )["context_schema"]["properties"]["approve"]
        assert schema["default"] == ["calculator"]
        ghost = client.threads.create()["thread_id"]
        run = client.runs.create(ghost, "transcript", command={"resume": "yes"})
        client.runs.join(ghost, run["run_id"])
        assert client.runs.get(ghost, run["run_id"])["status"] == "error"
        assert client.threads.get_state(ghost)["values"] in ({}, None, [])


def edit_refused(client: Any, thread: str, values: Any, **where: Any) -> str:
    """A state edit through the server that fails: what the server answered."""
    import httpx

    with pytest.raises(httpx.HTTPStatusError) as refused:
        client.threads.update_state(thread, values, **where)
    return refused.value.response.text


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_state_edit_never_stands_in_for_a_decision(
    client: Any, model: FakeOpenAIServer, variant: str
) -> None:
    """Issue 57, 1: on a waiting thread every edit is refused (Studio's state editor, as any
    node), and a run with no input after it still waits; a new thread made with a faked pending
    Action and a route to its tool is refused too."""
    import httpx

    from tests.test_approval import built
    from tests.test_approval_guard import node_names

    thread = waiting_thread(client, variant, model)
    calls = len(model.requests)
    nodes = [n for n in node_names(built(variant)[0]) if n != "__end__"]
    for as_node in [None, *nodes]:
        said = edit_refused(client, thread, {"question": "x"}, as_node=as_node)
        assert "waits for a person's decision on calculator[1937-1889]" in said, said
        assert "command={'resume': DECISION}" in said
    edit_refused(client, thread, {"settings": {"approve": []}}, as_node="call_model")
    again = client.runs.wait(thread, variant, input=None)
    assert again["__interrupt__"] and client.threads.get_state(thread)["next"] == ["approve_action"]
    assert [t["action"] for t in again["turns"]] == ["search", "search"]
    assert len(model.requests) == calls
    faked = {
        "kind": "action",
        "action": "calculator",
        "action_input": "1+1",
        "thought": None,
        "answer": None,
        "error": None,
        "approval": {"decision": "approve", "by": "x"},
    }
    with pytest.raises(httpx.HTTPStatusError):
        client.threads.create(
            graph_id=variant,
            supersteps=[
                {
                    "updates": [
                        {
                            "values": {"question": "q", "parsed": faked},
                            "as_node": "parse_reply",
                            "command": {"goto": "run_tool"},
                        }
                    ]
                }
            ],
        )


def test_a_state_edit_cannot_change_the_loops_fields(client: Any, model: FakeOpenAIServer) -> None:
    """Issue 57, 1: on a finished thread the run's settings and spend cannot be edited; the
    whole state sent back with one field changed (Studio's state editor) is taken."""
    thread = waiting_thread(client, "transcript", model)
    client.runs.wait(thread, "transcript", command={"resume": DECISIONS["approve"][0]})
    values = client.threads.get_state(thread)["values"]
    lowered = {**values["settings"], "approve": []}
    assert "only the loop changes" in edit_refused(client, thread, {"settings": lowered})
    spent = {**values["usage"], "total_tokens": 0}
    assert "only the loop changes" in edit_refused(client, thread, {"usage": spent})
    client.threads.update_state(thread, {**values, "question": "edited"})
    after = client.threads.get_state(thread)["values"]
    assert after["question"] == "edited" and after["settings"] == values["settings"]
    assert after["turns"] == values["turns"] and after["usage"] == values["usage"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_fork_of_an_approved_action_asks_again(
    client: Any, model: FakeOpenAIServer, variant: str
) -> None:
    """Issue 57, 2: ``runs.wait(..., checkpoint_id=...)`` from the checkpoint before an
    approved calculator asks again each time; only a new decision runs it."""
    thread = waiting_thread(client, variant, model)
    out = client.runs.wait(thread, variant, command={"resume": DECISIONS["approve"][0]})
    assert out["answer"] == "48"
    history = client.threads.get_history(thread, limit=200)
    (before_tool,) = [
        h for h in history if h["next"] == ["run_tool"] and h["values"]["parsed"].get("approval")
    ]
    checkpoint_id = before_tool["checkpoint"]["checkpoint_id"]
    for _ in range(2):
        forked = client.runs.wait(thread, variant, input=None, checkpoint_id=checkpoint_id)
        (pending,) = forked["__interrupt__"]
        assert pending["value"]["action_requests"][0]["args"] == {"expression": "1937-1889"}
        assert [t["action"] for t in forked["turns"]] == ["search", "search"]
        state = client.threads.get_state(thread)
        assert state["next"] == ["approve_action"] and "approval" not in state["values"]["parsed"]
    value, observation = DECISIONS["reject"]
    out = client.runs.wait(thread, variant, command={"resume": value})
    assert out["turns"][2]["observation"] == observation
