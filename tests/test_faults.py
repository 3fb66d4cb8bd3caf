"""Faults of models and tools: each becomes an Observation or a retry, never a hang, a lost run
or a dead process. Anything that must die or hang runs in a subprocess."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langchain_core.tools import tool

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling.providers import ModelCallError
from tests.fakes import (
    FakeOpenAIServer,
    Fault,
    Hang,
    Raw,
    Runner,
    Trickle,
    action,
    answer,
    fake_model,
)

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The HTTP fault tests run on both of chat_model's async transports."""
    monkeypatch.setattr(
        "reactgraph.nodes.calling.transport.default_transport", lambda: request.param
    )
    return request.param


def http_graph(server: FakeOpenAIServer, **settings: object):
    timeout = settings.pop("timeout", 5.0)
    llm = chat_model("gpt-4o-mini", base_url=server.url, timeout=timeout)  # type: ignore[arg-type]
    return build_graph("transcript", model=llm, tools=[], retry_backoff_s=0, **settings)


def test_a_server_trickling_bytes_is_cut_at_a_deadline_per_call(
    openai_server: FakeOpenAIServer, run: Runner, transport: str
) -> None:
    # Each 8-byte piece comes within the 1 s read timeout; the whole body would take ~40 s.
    openai_server.script.extend([Trickle(0.15), Trickle(0.15)])
    started = time.perf_counter()
    with pytest.raises(ModelCallError, match="failed after 2 attempts"):
        run(http_graph(openai_server, timeout=1.0, model_retries=1), {"question": "q"})
    assert time.perf_counter() - started < 20  # two deadlines, not two whole trickles


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        '{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []}',
    ],
    ids=["malformed-json", "no-choices"],
)
def test_malformed_responses_are_retried_like_a_5xx(
    openai_server: FakeOpenAIServer, run: Runner, body: str, transport: str
) -> None:
    openai_server.script.extend([Raw(body), "Final Answer: ok"])
    out = run(http_graph(openai_server), {"question": "q"})
    assert out["answer"] == "ok" and len(openai_server.requests) == 2
    openai_server.script.extend([Raw(body)] * 3)
    with pytest.raises(ModelCallError, match=r"at http://127\.0\.0\.1"):
        run(http_graph(openai_server, model_retries=2), {"question": "q"})


def test_a_null_reply_gets_one_correction_and_a_second_ends_the_run(
    openai_server: FakeOpenAIServer, run: Runner, transport: str
) -> None:
    null = Raw(
        '{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": '
        '[{"index": 0, "message": {"role": "assistant", "content": null}, '
        '"finish_reason": "stop"}]}'
    )
    openai_server.script.extend([null, "Final Answer: ok"])
    out = run(http_graph(openai_server), {"question": "q"})
    assert out["answer"] == "ok" and "empty" in out["turns"][0]["observation"]
    openai_server.script.extend([null] * 20)
    out = run(http_graph(openai_server), {"question": "q"})
    assert out["status"] == "stuck" and len(out["turns"]) == 2  # not 11 calls


FINISHED: list[str] = []


@tool
async def swallows_cancel(text: str) -> str:
    """Ignores cancellation and finishes late."""
    for _ in range(6):
        try:
            await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            continue
    FINISHED.append("swallows_cancel")
    return "late result"


@tool
async def blocks_the_loop(text: str) -> str:
    """An async tool that blocks the event loop."""
    time.sleep(2.0)
    return "blocked result"


def test_an_async_tool_that_swallows_cancellation_still_times_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = fake_model(action("swallows_cancel", "x"), action("blocks_the_loop", "y"), answer("ok"))
    graph = build_graph(
        "transcript", model=model, tools=[swallows_cancel, blocks_the_loop], tool_timeout=0.5
    )

    async def main() -> tuple[dict, list[str]]:
        out = await graph.ainvoke({"question": "q"})
        return out, list(FINISHED)  # what had finished when the run returned

    with caplog.at_level(logging.WARNING):
        out, finished = asyncio.run(main())
    first, second = out["turns"][0]["observation"], out["turns"][1]["observation"]
    assert "timed out" in first and "late result" not in first
    assert finished == []  # the run went on without waiting for it
    assert "timed out" in second and "blocked result" not in second
    assert "blocked the event loop" in caplog.text
    assert out["answer"] == "ok"


@tool
def exits(text: str) -> str:
    """Raises SystemExit."""
    raise SystemExit(3)


@tool
def interrupts(text: str) -> str:
    """Raises KeyboardInterrupt."""
    raise KeyboardInterrupt


@tool
async def async_exits(text: str) -> str:
    """Raises SystemExit from a coroutine."""
    raise SystemExit(4)


@tool
def enormous(text: str) -> int:
    """Returns an int too long to print."""
    return 10**5000


def test_a_tool_that_exits_interrupts_or_returns_a_huge_int_is_an_observation(
    run: Runner,
) -> None:
    replies = [
        action("exits", "x"),
        action("interrupts", "x"),
        action("async_exits", "x"),
        action("enormous", "x"),
        answer("still here"),
    ]
    tools = [exits, interrupts, async_exits, enormous]
    out = run(build_graph("transcript", model=fake_model(*replies), tools=tools), {"question": "q"})
    observations = [t["observation"] for t in out["turns"][:4]]
    assert observations[0] == "Error: exits failed: 3"
    assert observations[1] == "Error: interrupts failed: KeyboardInterrupt"
    assert observations[2] == "Error: async_exits failed: 4"
    assert "too large to show" in observations[3]
    assert out["answer"] == "still here"


HUNG_TOOLS = textwrap.dedent(
    """
    import threading, time
    from langchain_core.tools import tool
    from reactgraph import build_graph
    from reactgraph.nodes.running.deadlines import MAX_ABANDONED
    from tests.fakes import fake_model, action, answer

    @tool
    def hang(text: str) -> str:
        '''Never returns in time.'''
        time.sleep(120)
        return "late"

    calls = 3 * MAX_ABANDONED
    model = fake_model(*[action("hang", str(i)) for i in range(calls)], answer("ok"))
    graph = build_graph("transcript", model=model, tools=[hang], tool_timeout=0.05,
                        max_turns=calls + 1)
    out = graph.invoke({"question": "q"})
    observations = [t["observation"] for t in out["turns"][:-1]]
    timed_out = sum("timed out" in o for o in observations)
    unavailable = sum("unavailable" in o for o in observations)
    print(timed_out, unavailable, threading.active_count(), MAX_ABANDONED)
    """
)


def test_hung_tool_calls_are_capped_instead_of_piling_up_threads() -> None:
    result = subprocess.run(
        [sys.executable, "-c", HUNG_TOOLS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    timed_out, unavailable, threads, cap = map(int, result.stdout.split())
    assert timed_out == cap and unavailable == 2 * cap
    assert threads <= cap + 4  # the abandoned calls, the main thread, and a few helpers


REFUSALS = [400, 401, 403, 404, 413, 422]


@pytest.mark.parametrize("status", REFUSALS)
def test_a_call_the_server_refuses_stops_the_run_resumably_naming_the_status(
    openai_server: FakeOpenAIServer, run: Runner, status: int
) -> None:
    """A 4xx that another try cannot change is not retried: the run stops at its step with a
    ``ModelRefused`` naming the status and the server (its cause the client's error), and goes
    on from there once the server answers."""
    from langgraph.checkpoint.memory import InMemorySaver

    from reactgraph.nodes.calling.providers import ModelRefused

    openai_server.script.append(Fault(status, "no such model: gpt-4o-mini"))
    llm = chat_model("gpt-4o-mini", base_url=openai_server.url, timeout=5)
    graph = build_graph("transcript", model=llm, tools=[], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t{status}"}}
    with pytest.raises(ModelRefused) as refused:
        run(graph, {"question": "q"}, config)
    said = str(refused.value)
    assert f"the model at {openai_server.url} refused the call: HTTP {status} " in said
    assert "(no such model: gpt-4o-mini)" in said and len(openai_server.requests) == 1
    assert getattr(refused.value.__cause__, "status_code", None) == status
    assert graph.get_state(config).next == ("call_model",)  # resumable at that step
    openai_server.script.append("Final Answer: ok")
    assert run(graph, None, config)["answer"] == "ok"


def test_the_summarizers_refused_call_falls_back_to_dropping_turns(
    openai_server: FakeOpenAIServer,
) -> None:
    """A summary the server refuses (its prompt too large for it) is no summary: the oldest
    turns are dropped instead, and the run goes on."""
    turns = iter(range(100))

    def responder(body: dict) -> object:
        if "compacting" in str(body["messages"][0].get("content")):
            return Fault(413, "prompt too large")
        return "Final Answer: done" if next(turns) == 5 else "Action: echo[x]"

    openai_server.responder = responder
    llm = chat_model("gpt-4o-mini", base_url=openai_server.url, timeout=5)

    @tool
    def echo(text: str) -> str:
        """Echoes its input."""
        return f"echo {text}"

    graph = build_graph(
        "compaction", model=llm, tools=[echo], context_window=1000, compaction_threshold=0.5,
        keep_turns=1, stuck_repeats=100, token_counter=lambda messages: 100 * len(messages),
    )  # fmt: skip
    out = graph.invoke({"question": "q"})
    assert out["status"] == "answered"
    assert out["compactions"] and out["compactions"][0]["summary"] is None


def test_no_retry_starts_that_would_end_past_the_time_budget(
    openai_server: FakeOpenAIServer, run: Runner, transport: str
) -> None:
    """A server asking to be called again in 30 s, on a run with 2 s: no wait and no retry are
    started; the run ends budget_exhausted on max_run_seconds, the refused try not counted (its
    server answered it: nothing was billed)."""
    busy = Fault(503, "busy", {"Retry-After": "30"})
    openai_server.responder = lambda body: busy
    graph = http_graph(openai_server, timeout=60, model_retries=5, max_run_seconds=2)
    out = run(graph, {"question": "q"})
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_seconds"
    assert len(openai_server.requests) == 1
    assert out["budget"]["spent"] < 30  # the wait was not started
    assert out["usage"]["prompt_tokens"] == 0


def test_a_model_call_is_cut_at_the_time_left_not_at_its_timeout(
    openai_server: FakeOpenAIServer, run: Runner, transport: str
) -> None:
    """A server that takes 30 s, with a client timeout of 60 s, on a run with 1 s: the call is
    given up at the time left, not retried, and its prompt counted (it was sent)."""
    openai_server.responder = lambda body: Hang(30, "Final Answer: too late")
    graph = http_graph(openai_server, timeout=60, model_retries=5, max_run_seconds=1)
    out = run(graph, {"question": "q"})
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_seconds"
    assert len(openai_server.requests) == 1 and out["turns"] == []
    assert out["usage"]["prompt_tokens"] > 0 and out["usage"]["seconds"] < 30
