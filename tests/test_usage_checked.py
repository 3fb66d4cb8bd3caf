"""A server's usage is checked before it is taken (``tokens.read_usage``): a count that is
negative, not finite, not a whole number or absurd never lowers, breaks or poisons a run's
spend. That call is counted by the token counter, the run goes on (its budgets hold, its
checkpoints store), and the refusal is said once per server. Through a scripted model (every
variant, both action formats, ``invoke`` and ``ainvoke``) and the local OpenAI-compatible
server, plain and streamed, the summarizer's calls included."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import VARIANTS, build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling import tokens as calling
from reactgraph.nodes.calling.tokens import MAX_CALL_TOKENS, read_usage
from reactgraph.scripted import DEMO_QUESTION
from tests.fakes import (
    FakeOpenAIServer,
    Runner,
    ToolLog,
    action,
    answer,
    compacting_graph,
    fake_model,
    is_summary_request,
    seed_responder,
)

HOSTILE: dict[str, Any] = {
    "negative": -300_000,
    "nan": math.nan,
    "infinite": math.inf,
    "fraction": 2.5,
    "text": "many",
    "2^64": 2**64,
    "absurd": MAX_CALL_TOKENS + 1,
    "bool": True,
}


@pytest.fixture(autouse=True)
def no_server_told_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test is a fresh process as far as the once-per-server warning goes."""
    monkeypatch.setattr(calling, "_refused", {})


def with_usage(text: str | AIMessage, prompt: Any, completion: Any) -> AIMessage:
    """A scripted reply whose usage is what a server said, unchecked (as a client may hand it
    on: an assignment is not validated)."""
    message = text if isinstance(text, AIMessage) else AIMessage(text)
    message.usage_metadata = {  # type: ignore[typeddict-item]
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": 0,
    }
    return message


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == calling.__name__ and "cannot be right" in r.getMessage()
    ]


@pytest.mark.parametrize(
    ("usage", "read"),
    [
        ({"input_tokens": 100, "output_tokens": 20}, (100, 20)),
        ({"input_tokens": 100, "output_tokens": 0}, (100, 0)),
        (
            {"input_tokens": MAX_CALL_TOKENS, "output_tokens": MAX_CALL_TOKENS},
            (MAX_CALL_TOKENS,) * 2,
        ),
        (None, None),
        ({}, None),
        ({"input_tokens": 0, "output_tokens": 0}, None),  # zeros on a stream: none reported
        ({"total_tokens": 7}, None),
        ({"input_tokens": 100, "output_tokens": -5}, "completion_tokens=-5: negative"),
        ({"input_tokens": 0, "output_tokens": -5}, "completion_tokens=-5: negative"),
        ({"input_tokens": -1, "output_tokens": 5}, "prompt_tokens=-1: negative"),
        ({"input_tokens": math.nan, "output_tokens": 5}, "not a finite number"),
        ({"input_tokens": 5, "output_tokens": -math.inf}, "not a finite number"),
        ({"input_tokens": "12", "output_tokens": 5}, "not a whole number"),
        ({"input_tokens": 12.0, "output_tokens": 5}, "not a whole number"),
        ({"input_tokens": True, "output_tokens": 5}, "not a whole number"),
        ({"input_tokens": [1], "output_tokens": 5}, "not a whole number"),
        ({"input_tokens": 2**64, "output_tokens": 5}, "more than one call can have"),
        ({"input_tokens": 5, "output_tokens": 10**400}, "more than one call can have"),
    ],
)
def test_what_a_reported_usage_is_read_as(usage: Any, read: Any) -> None:
    message = AIMessage("x")
    message.usage_metadata = usage
    found = read_usage(message)
    if isinstance(read, str):
        assert isinstance(found, str) and read in found, found
        assert len(found) < 120  # a count of 400 digits is not repeated whole
    else:
        assert found == read


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
@pytest.mark.parametrize("hostile", list(HOSTILE), ids=list(HOSTILE))
def test_a_hostile_usage_is_counted_by_the_token_counter_and_said_once(
    hostile: str, fmt: str, run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    value = HOSTILE[hostile]
    step = (
        AIMessage("", tool_calls=[{"name": "echo", "args": {"text": "a"}, "id": "c1"}])
        if fmt == "tool_calls"
        else action("echo", "a")
    )
    model = fake_model(with_usage(step, 100, value), with_usage(answer("done"), value, 7))
    graph = build_graph(
        "transcript", model=model, tools=[ToolLog().echo()], action_format=fmt,
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    with caplog.at_level(logging.WARNING):
        out = run(graph, {"question": "Q?"}, {"configurable": {"thread_id": "t"}})
    assert (out["status"], out["answer"]) == ("answered", "done")
    assert [t["token_source"] for t in out["turns"]] == ["tiktoken"] * 2
    counted = sum(t["prompt_tokens"] + t["completion_tokens"] for t in out["turns"])
    assert out["usage"]["total_tokens"] == counted > 0
    assert all(0 <= t["completion_tokens"] < 100 for t in out["turns"])
    (said,) = refusals(caplog)  # once for the server, though both calls were refused
    assert "scripted" in said and "token counter" in said


@pytest.mark.parametrize("variant", VARIANTS)
def test_negative_usage_never_lowers_the_spend_and_the_budget_still_stops_the_run(
    variant: str, run: Runner
) -> None:
    replies = [with_usage(action("echo", f"step {i}"), 50, -300_000) for i in range(6)]
    model = fake_model(*replies, answer("done"))
    extra = {"context_window": 100_000} if "compaction" in variant else {}
    graph = build_graph(variant, model=model, tools=[ToolLog().echo()], max_run_tokens=300, **extra)
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_tokens"
    assert out["usage"]["total_tokens"] >= 300
    assert out["usage"]["completion_tokens"] > 0
    assert len(model.calls) < 6


def test_the_summarizers_hostile_usage_is_counted_too(
    run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    turns = iter(range(100))

    def reply(messages: list[Any]) -> AIMessage:
        if is_summary_request(messages):
            return with_usage("the summary", -1_000_000, math.nan)
        turn = next(turns)
        return with_usage(answer("done") if turn == 5 else action("echo", f"s {turn}"), 100, 20)

    model = fake_model(*[reply] * 20)
    graph = compacting_graph(model)
    with caplog.at_level(logging.WARNING):
        out = run(graph, {"question": "Q?"})
    (record, *_) = out["compactions"]
    assert record["summary"] == "the summary" and record["token_source"] != "usage"
    assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0
    spent = sum(t["prompt_tokens"] + t["completion_tokens"] for t in out["turns"])
    spent += sum(c["prompt_tokens"] + c["completion_tokens"] for c in out["compactions"])
    assert out["usage"]["total_tokens"] == spent
    assert len(refusals(caplog)) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize(
    "sent",
    [
        {"completion_tokens": -300_000, "total_tokens": -299_000},
        {"prompt_tokens": math.nan},
        {"prompt_tokens": "abc", "completion_tokens": "5"},
        {"prompt_tokens": 2**64, "total_tokens": 2**64 + 5},
        {"completion_tokens": 10**30},
    ],
    ids=["negative", "nan", "text", "2^64", "absurd"],
)
def test_a_server_that_reports_hostile_usage(
    sent: dict[str, Any], stream: bool, run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    """The local OpenAI-compatible server's replies carry the hostile usage as JSON (NaN as
    ``NaN``), read by ChatOpenAI; the run answers as the seed does, every call counted by the
    token counter, stored in a checkpoint (2^64 would not fit one) and said once."""
    server = FakeOpenAIServer()
    server.responder = seed_responder
    server.usage_sent = sent
    try:
        model = chat_model("gpt-4o-mini", base_url=server.url, api_key="x", stream=stream)
        graph = build_graph(
            "transcript", model=model, tools=seed_tools(), checkpointer=InMemorySaver()
        )
        with caplog.at_level(logging.WARNING):
            out = run(graph, {"question": DEMO_QUESTION}, {"configurable": {"thread_id": "t"}})
    finally:
        server.close()
    assert (out["status"], out["answer"]) == ("answered", "48")
    assert len(server.requests) == 4  # nothing asked again
    assert {t["token_source"] for t in out["turns"]} == {"tiktoken"}
    assert 0 < out["usage"]["completion_tokens"] < out["usage"]["prompt_tokens"] < 10_000
    (said,) = refusals(caplog)
    assert server.url in said


def seed_tools() -> list[Any]:
    from reactgraph.tools import default_tools

    return default_tools()
