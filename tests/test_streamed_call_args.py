"""A tool call's arguments are read from their complete text, streamed or not (issue 45, 3):
arguments that are not a JSON object get the corrective Observation, and never run repaired
(LangChain's partial-JSON reading of a stream would run ``{"expression": "1937-18`` as
``1937-18``). Over the real ChatOpenAI client and the local test server, streamed, plain, and
plain under a messages stream (which LangChain streams itself), sync and async; and under
``approve``, nobody is asked about a call that cannot be read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.tools import calculator
from tests.fakes import Call, FakeOpenAIServer, Runner, answer

BROKEN = {
    "cut": '{"expression": "1937-18',
    "trailing": '{"expression": "2*3"} trailing',
    "not-json": "{not json",
}
# Arguments that are JSON but no object: a plain reply of them fails in langchain-openai's own
# reading (its AIMessage refuses them), so only the streamed reading is asked here.
NO_OBJECT = '["1937-1889"]'


def call_graph(server: FakeOpenAIServer, stream: bool | None, **settings: Any) -> Any:
    llm = chat_model("gpt-4o-mini", base_url=server.url, timeout=10.0, stream=stream)
    return build_graph(
        "transcript",
        model=llm,
        tools=[calculator],
        action_format="tool_calls",
        retry_backoff_s=0,
        **settings,
    )


def _messages_stream(graph: Any, input: Any, config: Any, mode: str) -> dict[str, Any]:
    """The final state of a run under a messages stream (LangChain streams a plain call)."""
    final: dict[str, Any] = {}

    async def gather() -> None:
        async for kind, item in graph.astream(input, config, stream_mode=["messages", "values"]):
            if kind == "values":
                final.update(item)

    if mode == "invoke":
        for kind, item in graph.stream(input, config, stream_mode=["messages", "values"]):
            if kind == "values":
                final.update(item)
    else:
        asyncio.run(gather())
    return final


CASES = [
    *[
        pytest.param(text, how, id=f"{case}-{how}")
        for case, text in BROKEN.items()
        for how in ("streamed", "plain", "plain-under-messages")
    ],
    pytest.param(NO_OBJECT, "streamed", id="no-object-streamed"),
]


@pytest.mark.parametrize(("arguments", "how"), CASES)
def test_arguments_that_are_not_json_get_the_corrective_observation(
    openai_server: FakeOpenAIServer, run: Runner, arguments: str, how: str
) -> None:
    openai_server.script.extend([Call("calculator", arguments), answer("done")])
    if how == "plain-under-messages":
        # Left to choose, a server without streamed usage is called plain, and LangChain
        # streams that call itself to a messages stream.
        openai_server.stream_usage = False
        graph = call_graph(openai_server, None)
        out = _messages_stream(graph, {"question": "q"}, None, run.mode)
    else:
        out = run(call_graph(openai_server, how == "streamed"), {"question": "q"})
    assert out["answer"] == "done"
    turn = out["turns"][0]
    assert turn["kind"] == "invalid", turn
    assert "could not be read" in turn["observation"]
    assert "1919" not in turn["observation"] and turn["observation"] != "6"
    # The request asked as the case says (a stream, or a plain request LangChain streams).
    assert openai_server.requests[-2].get("stream", False) is (how != "plain")


@pytest.mark.parametrize("stream", [True, False])
def test_a_whole_call_still_runs_streamed_and_plain(
    openai_server: FakeOpenAIServer, run: Runner, stream: bool
) -> None:
    openai_server.script.extend([Call("calculator", {"expression": "1937-1889"}), answer("48")])
    out = run(call_graph(openai_server, stream), {"question": "q"})
    assert out["turns"][0]["observation"] == "48" and out["answer"] == "48"


def test_a_person_is_never_asked_about_a_repaired_call(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.script.extend([Call("calculator", BROKEN["cut"]), answer("done")])
    graph = call_graph(openai_server, True, approve=["calculator"])
    graph.checkpointer = InMemorySaver()
    config = {"configurable": {"thread_id": "t"}}
    out = run(graph, {"question": "q"}, config)
    assert "__interrupt__" not in out and out["answer"] == "done"
    assert out["turns"][0]["kind"] == "invalid"


def test_strict_calls_reads_each_call_whole() -> None:
    from reactgraph.nodes.reading.toolcalls import strict_calls

    chunks = [
        {"name": "calculator", "args": '{"expression": "2*3"}', "id": "a", "index": 0},
        {"name": "calculator", "args": '{"expression": "2*3"} x', "id": "b", "index": 1},
        {"name": "calculator", "args": "", "id": "c", "index": 2},
        {"name": "calculator", "args": "[" * 100_000, "id": "d", "index": 3},
    ]
    valid, invalid = strict_calls(chunks)
    assert [(c["id"], c["args"]) for c in valid] == [("a", {"expression": "2*3"}), ("c", {})]
    assert [c["id"] for c in invalid] == ["b", "d"]
    assert invalid[0]["args"] == '{"expression": "2*3"} x'
