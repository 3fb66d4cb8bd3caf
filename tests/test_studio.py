"""LangGraph Studio's server (`langgraph dev`) serves every variant: the official SDK lists them,
reads their drawings and context schemas, runs a question on each against the local
OpenAI-compatible test server, and talks to them as a chat client does (messages in, the
Thought/Action/Observation loop out as messages). The server runs in a temporary folder, so it
writes nothing inside the checkout."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reactgraph import REGISTRY, VARIANTS
from tests.fakes import FakeOpenAIServer, seed_call_responder
from tests.langgraph_dev import LANGGRAPH, ROOT, langgraph_dev
from tests.test_graph_shapes import SHAPES

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out. One
# pytest-xdist worker runs them all, so the module's server starts once.
pytestmark = [pytest.mark.slow, pytest.mark.servers, pytest.mark.xdist_group("studio")]


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    # The checkout's langgraph.json, with absolute paths, so the server's own files
    # (.langgraph_api/) go to the temporary folder it runs in. Its tools are the seed's as
    # classic `Tool` objects, loaded as a person loads their own.
    env = {"REACTGRAPH_TOOLS": "tests.fakes:classic_seed_tools", "REACTGRAPH_DEFAULT_TOOLS": "0"}
    with langgraph_dev(tmp_path_factory.mktemp("studio"), env=env) as url:
        yield url


def test_studio_serves_every_variant_end_to_end(
    studio: str, openai_server: FakeOpenAIServer
) -> None:
    from langgraph_sdk import get_sync_client

    openai_server.responder = seed_call_responder  # tool calls when the tools are bound
    client = get_sync_client(url=studio)
    assistants = {a["graph_id"]: a for a in client.assistants.search(limit=20)}
    assert set(assistants) >= set(SHAPES)
    for variant, (nodes, _) in SHAPES.items():
        assistant = assistants[variant]["assistant_id"]
        drawing = client.assistants.get_graph(assistant)
        assert {n["id"] for n in drawing["nodes"]} - {"__start__", "__end__"} == nodes
        assert any(e["target"] == "__end__" and e.get("conditional") for e in drawing["edges"])
        schema = client.assistants.get_schemas(assistant)["context_schema"]
        properties = schema["properties"]
        assert {"max_turns", "tool_timeout", "model_name", "base_url"} <= set(properties)
        assert all(p.get("description") for p in properties.values())
        spec = REGISTRY[variant]
        for name in ("window_turns", "context_window", "keep_turns"):
            assert (name in properties) == (spec.setting(name) is not None), (variant, name)
        assert properties["action_format"]["enum"] == ["text", "tool_calls"]  # a choice
        thread = client.threads.create()
        values = client.runs.wait(
            thread["thread_id"],
            assistant,
            input={"question": "How many years apart?"},
            context={"model_name": "gpt-4o-mini", "base_url": openai_server.url, "max_turns": 6},
        )
        assert values["answer"] == "48" and values["status"] == "answered", values
        state = client.threads.get_state(thread["thread_id"])
        assert state["values"]["settings"]["max_turns"] == 6
        assert [t["action"] for t in state["values"]["turns"]][:3] == [
            "search",
            "search",
            "calculator",
        ]
        assert state["values"]["turns"][2]["observation"] == "48"
    # The tools were the classic ones REACTGRAPH_TOOLS named.
    assert "Evaluate arithmetic, e.g. 2*(3+4)." in str(openai_server.requests[0]["messages"])
    # A run of native tool calls, chosen in the run's context as Studio's form chooses it.
    thread = client.threads.create()
    context = {"model_name": "gpt-4o-mini", "base_url": openai_server.url}
    values = client.runs.wait(
        thread["thread_id"],
        assistants["notes"]["assistant_id"],
        input={"question": "How many years apart?"},
        context={**context, "action_format": "tool_calls"},
    )
    assert (values["answer"], values["status"]) == ("48", "answered"), values
    assert [t["tool_call_id"] for t in values["turns"][:3]] == ["call-a", "call-b", "call-c"]
    assert openai_server.requests[-1]["tools"][0]["function"]["name"] == "search"
    # The application's instructions and a typed answer, from the run's context (Studio's form).
    properties = client.assistants.get_schemas(assistants["transcript"]["assistant_id"])[
        "context_schema"
    ]["properties"]
    assert {"instructions", "answer_schema"} <= set(properties)
    rule = "Answer in French."
    openai_server.responder = lambda body: (
        'Final Answer: {"years": 48}' if rule in str(body["messages"]) else "Final Answer: 48"
    )
    values = client.runs.wait(
        client.threads.create()["thread_id"],
        assistants["transcript"]["assistant_id"],
        input={"question": "How many years apart?"},
        context={
            **context,
            "instructions": rule,
            "answer_schema": {"type": "object", "properties": {"years": {"type": "integer"}}},
        },
    )
    assert values["structured_answer"] == {"years": 48} and values["status"] == "answered"


def test_a_clients_answer_schema_can_neither_freeze_the_server_nor_fail_every_answer(
    studio: str, openai_server: FakeOpenAIServer
) -> None:
    """A run's context sends the answer schema: a backtracking pattern (hours on Python's re,
    the GIL held, every other client waiting) checks the answer at once; a schema no answer
    can pass fails the run before anything is stored, saying why."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=studio)
    word = {"type": "object", "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}}}
    openai_server.responder = lambda body: (
        'Final Answer: {"word": "aaaa"}'
        if "does not match the answer's JSON schema" in str(body["messages"])
        else 'Final Answer: {"word": "' + "a" * 40 + 'b"}'
    )
    context = {"model_name": "gpt-4o-mini", "base_url": openai_server.url}
    question = {"question": "Which word?"}
    values = client.runs.wait(
        client.threads.create()["thread_id"],
        "transcript",
        input=question,
        context={**context, "answer_schema": word},
    )
    assert values["structured_answer"] == {"word": "aaaa"} and values["status"] == "answered"
    for schema, says in (
        ({"$ref": "#"}, "loop back to the same value"),
        ({"$dynamicRef": "https://example.com/s#meta"}, "refer only to its own parts"),
        ({"pattern": "(a)\\1"}, "cannot run in linear time"),
    ):
        thread = client.threads.create()["thread_id"]
        run = client.runs.create(
            thread, "transcript", input=question, context={**context, "answer_schema": schema}
        )
        joined = client.runs.join(thread, run["run_id"])
        assert client.runs.get(thread, run["run_id"])["status"] == "error", schema
        assert says in json.dumps(joined), joined
        assert not client.threads.get_state(thread)["values"]


def test_langgraph_json_lists_every_variant() -> None:
    graphs = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    assert set(graphs) == set(VARIANTS)
    assert all(target == f"./graphs/studio.py:{name}" for name, target in graphs.items())


def chat_turns(messages: list[dict]) -> list[str]:
    """The shape of a chat: h (human), a+ (AI with a tool call), t (tool), a (AI)."""
    shapes = []
    for message in messages:
        if message["type"] == "ai":
            shapes.append("a+" if message.get("tool_calls") else "a")
        else:
            shapes.append({"human": "h", "tool": "t"}[message["type"]])
    return shapes


def test_a_chat_client_sends_messages_and_sees_the_loop_as_messages(
    studio: str, openai_server: FakeOpenAIServer
) -> None:
    """As Agent Chat UI does: a thread, a human message in, values and messages-tuple streamed
    out; then a second question on the same thread."""
    from langgraph_sdk import get_sync_client

    openai_server.responder = seed_call_responder  # tool calls when the tools are bound
    client = get_sync_client(url=studio)
    context = {"model_name": "gpt-4o-mini", "base_url": openai_server.url}
    for variant in VARIANTS:
        thread = client.threads.create()["thread_id"]
        modes: set[str] = set()
        for question in ("How many years apart?", "And once more?"):
            final: dict = {}
            for part in client.runs.stream(
                thread,
                variant,
                input={"messages": [{"type": "human", "content": question}]},
                stream_mode=["values", "messages-tuple"],
                context=context,
            ):
                modes.add(part.event)
                if part.event == "values":
                    final = part.data
            assert final.get("answer") == "48", (variant, final)
        assert {"values", "messages"} <= modes, modes
        messages = client.threads.get_state(thread)["values"]["messages"]
        one_run = ["h", "a+", "t", "a+", "t", "a+", "t", "a"]
        assert chat_turns(messages) == one_run * 2, (variant, chat_turns(messages))
        assert messages[0]["content"] == "How many years apart?"
        assert messages[8]["content"] == "And once more?"
        # The final answer's message keeps the reply as it streamed, line by line.
        assert messages[7]["content"].endswith("Final Answer: 48")
        assert messages[-1]["content"].endswith("Final Answer: 48")
        calls = [m["tool_calls"][0] for m in messages if m.get("tool_calls")]
        assert [c["name"] for c in calls[:3]] == ["search", "search", "calculator"]
        assert len({c["id"] for c in calls}) == len(calls)  # unique within the thread
        tools = [m for m in messages if m["type"] == "tool"]
        assert [t["tool_call_id"] for t in tools] == [c["id"] for c in calls]
        assert tools[2]["content"] == "48"
