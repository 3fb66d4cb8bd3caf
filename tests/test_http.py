"""The real ChatOpenAI client over HTTP against the local OpenAI-compatible test server:
stop, usage, provider quirks, transient faults, resuming, async and streaming."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling.providers import ModelCallError
from reactgraph.nodes.calling.tokens import TOKENS_PER_MESSAGE, TOKENS_PER_REPLY, TokenCounter
from reactgraph.tools import calculator, search_tools
from tests.fakes import (
    SEED,
    SEED_TOOL_CALLS,
    FakeOpenAIServer,
    Fault,
    Hang,
    Runner,
    ToolLog,
    seed_call_responder,
    seed_responder,
    sleepy,
)


@pytest.fixture(autouse=True, params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on both of chat_model's async transports."""
    monkeypatch.setattr(
        "reactgraph.nodes.calling.transport.default_transport", lambda: request.param
    )
    return request.param


def seed_graph(server: FakeOpenAIServer, log: ToolLog, model: str = "gpt-4o-mini", **kwargs):
    search, _ = search_tools()
    llm = chat_model(model, base_url=server.url, timeout=kwargs.pop("timeout", 5.0))
    return build_graph(
        "transcript", model=llm, tools=[log.wrap(search), log.wrap(calculator)], **kwargs
    )


def scripted_run(
    server: FakeOpenAIServer, run: Runner, replies: list[Any], question: str = "q", **graph: Any
) -> Any:
    """The run of ``question`` on the seed graph (``graph``: its settings; its tool calls go
    unrecorded), with the server scripted to give ``replies``: its output."""
    server.script.extend(replies)
    return run(seed_graph(server, ToolLog(), **graph), {"question": question})


def test_seed_scenario_over_http(openai_server: FakeOpenAIServer, run: Runner) -> None:
    openai_server.script.extend(SEED)
    log = ToolLog()
    out = run(seed_graph(openai_server, log), {"question": "How many years?"})
    assert out["answer"] == "48" and out["status"] == "answered"
    assert log.calls == SEED_TOOL_CALLS
    assert len(openai_server.requests) == 4
    assert all(r["stream"] for r in openai_server.requests)
    assert openai_server.connections == 1  # each stream read to its end: its connection reused
    assert all(r["stop"] == ["Observation:"] for r in openai_server.requests)
    first = openai_server.requests[0]
    expected = sum(len(m["content"]) for m in first["messages"]) // 4 + 1
    assert out["turns"][0]["prompt_tokens"] == expected
    assert all(t["token_source"] == "usage" for t in out["turns"])


def test_a_stream_left_open_after_its_done_delays_no_call(
    openai_server: FakeOpenAIServer, run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that sends [DONE] but does not end the body: the end is awaited for a moment
    (the sync client's ``EndedStream``, the SDK's own in async), then the connection is closed;
    no call waits for its deadline (it would be asked again)."""
    openai_server.stream_end = threading.Event()
    openai_server.script.extend(SEED)
    try:
        out = run(seed_graph(openai_server, ToolLog(), timeout=30.0), {"question": "q"})
    finally:
        openai_server.stream_end.set()
    assert out["answer"] == "48" and out["status"] == "answered"
    assert len(openai_server.requests) == 4  # none was asked again
    assert openai_server.connections == 4  # each held open by the server, so closed by us
    if run.mode == "invoke":  # noted once; later streams there are closed at [DONE]
        warned = [r for r in caplog.records if "did not end a streamed reply" in r.message]
        assert len(warned) == 1
        assert openai_server.url.startswith(warned[0].getMessage().split(" ")[0])


def test_a_provider_that_ignores_stop_is_cut_on_our_side(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.honour_stop = False
    replies = ["Action: calculator[2+2]\nObservation: 5\nFinal Answer: 5", "Final Answer: 4"]
    out = scripted_run(openai_server, run, replies, "2+2?")
    assert out["turns"][0]["observation"] == "4" and out["answer"] == "4"
    assert "Observation: 5" in out["turns"][0]["reply"]
    assert "Observation: 5" not in str(openai_server.requests[1]["messages"])


def test_reasoning_models_are_called_without_stop(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.honour_stop = False
    replies = ["Action: calculator[1+1]\nObservation: 3", "Final Answer: 2"]
    out = scripted_run(openai_server, run, replies, "1+1?", model="o3-mini")
    assert all("stop" not in r for r in openai_server.requests)
    assert out["answer"] == "2" and out["turns"][0]["observation"] == "2"


def test_an_unknown_model_rejecting_stop_is_retried_without_it_and_remembered(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.reject_stop = True
    replies = ["Action: calculator[1+1]", "Final Answer: 2"]
    out = scripted_run(openai_server, run, replies, model="my-local-model")
    assert out["answer"] == "2"
    assert ["stop" in r for r in openai_server.requests] == [True, False, False]


def test_think_blocks_are_removed_before_parsing(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.honour_stop = False
    replies = [
        "<think>The Observation: inside reasoning must not cut.</think>\n"
        "Thought: add.\nAction: calculator[40+8]",
        "<think>done</think>Final Answer: 48",
    ]
    out = scripted_run(openai_server, run, replies)
    assert out["turns"][0]["observation"] == "48" and out["answer"] == "48"


def test_429_and_5xx_are_retried_honouring_retry_after(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    replies = [
        Fault(429, "slow down", {"Retry-After": "0.3"}),
        Fault(503, "overloaded", {"Retry-After": "0"}),
        "Final Answer: ok",
    ]
    started = time.perf_counter()
    out = scripted_run(openai_server, run, replies)
    assert out["answer"] == "ok" and len(openai_server.requests) == 3
    assert time.perf_counter() - started >= 0.3


def test_a_request_timeout_is_retried(openai_server: FakeOpenAIServer, run: Runner) -> None:
    out = scripted_run(openai_server, run, [Hang(3.0), "Final Answer: ok"], timeout=0.5)
    assert out["answer"] == "ok" and len(openai_server.requests) == 2


def test_spent_retries_stop_the_run_and_a_checkpointed_run_resumes(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    down = Fault(500, "down", {"Retry-After": "0"})
    openai_server.script.extend(["Action: calculator[1+1]", down, down])
    log = ToolLog()
    graph = seed_graph(openai_server, log, checkpointer=InMemorySaver(), model_retries=1)
    config = {"configurable": {"thread_id": "flaky"}}
    with pytest.raises(ModelCallError, match="failed after 2 attempts"):
        run(graph, {"question": "q"}, config)
    assert log.calls == [("calculator", "1+1")]
    assert graph.get_state(config).next == ("call_model",)
    openai_server.script.extend(["Final Answer: 2"])
    out = run(graph, None, config)
    assert out["answer"] == "2"
    assert log.calls == [("calculator", "1+1")]  # the completed tool call is not repeated
    assert [t["turn"] for t in out["turns"]] == [1, 2]


@tool
async def slow_lookup(text: str) -> str:
    """An async tool that takes far too long."""
    await asyncio.sleep(30)
    return "too late"


@tool
async def async_echo(text: str) -> str:
    """An async tool."""
    await asyncio.sleep(0)
    return f"async {text}"


def test_ainvoke_end_to_end_with_async_tools(openai_server: FakeOpenAIServer) -> None:
    openai_server.script.extend(
        ["Action: async_echo[hi]", "Action: slow_lookup[x]", "Final Answer: done"]
    )
    llm = chat_model("gpt-4o-mini", base_url=openai_server.url, timeout=5)
    graph = build_graph("transcript", model=llm, tools=[async_echo, slow_lookup], tool_timeout=0.3)
    started = time.perf_counter()
    out = asyncio.run(graph.ainvoke({"question": "q"}))
    assert time.perf_counter() - started < 10
    assert out["turns"][0]["observation"] == "async hi"
    assert "timed out after 0.3 s" in out["turns"][1]["observation"]
    assert out["answer"] == "done"


def test_sync_tools_never_block_the_event_loop(openai_server: FakeOpenAIServer) -> None:
    openai_server.script.extend(["Action: sleepy[x]", "Final Answer: done"])
    llm = chat_model("gpt-4o-mini", base_url=openai_server.url, timeout=5)
    graph = build_graph("transcript", model=llm, tools=[sleepy], tool_timeout=3.0)

    async def main() -> tuple[dict, float]:
        gaps: list[float] = []

        async def ticker() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        task = asyncio.create_task(ticker())
        out = await graph.ainvoke({"question": "q"})
        task.cancel()
        return out, max(gaps)

    out, worst_gap = asyncio.run(main())
    assert "timed out" in out["turns"][0]["observation"]
    # A loop stalled by the tool's wait would miss its ticks for the whole 3 s; a loaded machine
    # (two test workers on 2 busy cores) may delay a tick by a fraction of that, never all of it.
    assert worst_gap < 2.0


def test_astream_messages_streams_with_usage(openai_server: FakeOpenAIServer) -> None:
    openai_server.script.extend(SEED)
    log = ToolLog()
    graph = seed_graph(openai_server, log)

    async def main() -> tuple[list, dict]:
        chunks, final = [], {}
        async for mode, item in graph.astream(
            {"question": "q"}, stream_mode=["messages", "values"]
        ):
            if mode == "messages":
                chunks.append(item[0])
            else:
                final = item
        return chunks, final

    chunks, final = asyncio.run(main())
    assert final["answer"] == "48"
    assert len(chunks) > 4  # token pieces arrived as they were generated
    assert all(r.get("stream") for r in openai_server.requests)
    assert all(r["stream_options"]["include_usage"] for r in openai_server.requests)
    assert all(t["token_source"] == "usage" for t in final["turns"])


def answer_after_two_tools(request: dict) -> str:
    """A responder for concurrent runs: each conversation does two actions, then answers."""
    observations = sum(str(m["content"]).startswith("Observation:") for m in request["messages"])
    return "Final Answer: ok" if observations >= 2 else f"Action: calculator[{observations}+1]"


def test_run_batch_bounds_concurrency_and_reports_each_run(
    openai_server: FakeOpenAIServer,
) -> None:
    from reactgraph.batch import run_batch

    openai_server.responder = answer_after_two_tools
    openai_server.latency_s = 0.05
    llm = chat_model("gpt-4o-mini", base_url=openai_server.url, timeout=5)
    graph = build_graph("transcript", model=llm, tools=[calculator])
    results = run_batch(graph, [f"question {i}" for i in range(8)], concurrency=3)
    assert [r["index"] for r in results] == list(range(8))
    assert all(r["status"] == "answered" and r["turns"] == 3 for r in results)
    assert all(r["prompt_tokens"] > 0 and r["error"] is None for r in results)
    assert 1 < openai_server.max_active <= 3
    assert len({r["thread_id"] for r in results}) == 8


def test_a_failing_run_does_not_stop_the_batch(openai_server: FakeOpenAIServer) -> None:
    from reactgraph.batch import run_batch

    openai_server.script.append(Fault(400, "bad request"))
    openai_server.responder = lambda request: "Final Answer: ok"
    llm = chat_model("gpt-4o-mini", base_url=openai_server.url, timeout=5)
    graph = build_graph("transcript", model=llm, tools=[calculator])
    results = run_batch(graph, ["a", "b", "c"], concurrency=1)
    assert [r["status"] for r in results] == [None, "answered", "answered"]
    assert "bad request" in results[0]["error"]
    with pytest.raises(ValueError):
        run_batch(graph, ["a"], concurrency=0)


def test_a_runs_context_can_switch_to_another_openai_compatible_model(
    openai_server: FakeOpenAIServer,
) -> None:
    from reactgraph import RunContext
    from reactgraph.scripted import ScriptedChatModel

    openai_server.script.extend(["Final Answer: from the server"])
    built = ScriptedChatModel(replies=[])
    graph = build_graph("transcript", model=built, tools=[calculator])
    context = RunContext(model_name="served-model", base_url=openai_server.url)
    out = graph.invoke({"question": "q"}, context=context)
    assert out["answer"] == "from the server" and built.calls == []
    assert openai_server.requests[0]["model"] == "served-model"


def test_a_graph_keeps_only_the_newest_per_run_models() -> None:
    """A run's context is anyone's on a server: each model named there is made once and kept,
    the most recently used ``MOST_REMEMBERED`` of them (each holds its connections)."""
    from reactgraph.nodes.loop.deps import make_deps
    from reactgraph.nodes.vocabulary.bounded import MOST_REMEMBERED
    from reactgraph.nodes.vocabulary.run_settings import RunSettings
    from reactgraph.scripted import ScriptedChatModel

    made: list[str] = []

    def factory(name: str, url: str | None) -> ScriptedChatModel:
        made.append(name)
        return ScriptedChatModel(replies=[], model_name=name)

    deps = make_deps(
        ScriptedChatModel(replies=[]), [calculator], RunSettings(), model_factory=factory
    )
    first = deps.caller_for(RunSettings(model_name="m0"))
    for n in range(1, 3 * MOST_REMEMBERED):
        if n % 2:  # m0 used again now and then: kept, the same caller, made once
            assert deps.caller_for(RunSettings(model_name="m0")) is first
        deps.caller_for(RunSettings(model_name=f"m{n}"))
    assert len(deps._callers) == MOST_REMEMBERED and made.count("m0") == 1
    assert len(made) == 3 * MOST_REMEMBERED


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("stream_usage", [True, False], ids=["stream-usage", "no-stream-usage"])
def test_the_seed_scenario_is_four_requests_and_counts_its_tokens(
    openai_server: FakeOpenAIServer, run: Runner, stream_usage: bool, action_format: str
) -> None:
    """No request the user did not ask for: four model calls, four requests, whether or not the
    server counts a streamed reply. One that does not is learnt from its first reply (counted
    with tiktoken) and called plain after, its own counts then."""
    openai_server.stream_usage = stream_usage
    openai_server.responder = (
        seed_call_responder if action_format == "tool_calls" else seed_responder
    )
    log = ToolLog()
    graph = seed_graph(openai_server, log, action_format=action_format)
    out = run(graph, {"question": "How many years?"})
    assert out["answer"] == "48" and out["status"] == "answered"
    assert [name for name, _ in log.calls] == ["search", "search", "calculator"]
    assert len(openai_server.requests) == 4
    streamed = [bool(r.get("stream")) for r in openai_server.requests]
    assert streamed == ([True] * 4 if stream_usage else [True, False, False, False])
    counted = [(t["prompt_tokens"], t["completion_tokens"]) for t in out["turns"]]
    sent = [(u["prompt_tokens"], u["completion_tokens"]) for u in openai_server.usages]
    counter = TokenCounter("gpt-4o-mini")
    if stream_usage:
        assert [t["token_source"] for t in out["turns"]] == ["usage"] * 4
        assert counted == sent
        return
    assert [t["token_source"] for t in out["turns"]] == [counter.source] + ["usage"] * 3
    assert counted[1:] == sent[1:]
    first = openai_server.requests[0]["messages"]
    prompt = TOKENS_PER_REPLY + sum(
        TOKENS_PER_MESSAGE + counter.count_text(m["content"]) for m in first
    )
    if action_format == "tool_calls":
        written = counter.count_text('search{"query": "Eiffel Tower"}')
    else:
        written = counter.count_text(SEED[0])
    assert counted[0] == (prompt, TOKENS_PER_MESSAGE + written)
    assert counted[0] != sent[0]  # the server's estimate was never sent: not what was counted
