"""Cached prompt tokens, counted and priced as they are billed (issue 56): ``token_prices``'
third number, ``out["usage"]["cache_read_tokens"]`` read from every place a provider reports
them, the cost and ``max_run_cost`` at the cached price, in every variant and both formats."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.calling.tokens import read_cached
from reactgraph.nodes.loop.middleware.scope import cost_of
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.settings import settings_of
from tests.fakes import FakeOpenAIServer, Runner, ToolLog, action, answer, call, fake_model

USAGE = (1000, 100, 800)  # every call: 1,000 prompt tokens, 800 of them cached; 100 completion
PRICES = (2.0, 8.0, 0.5)  # per million input, output and cached input tokens


def step(text: str, fmt: str) -> Any:
    return call("echo", {"text": text}) if fmt == "tool_calls" else action("echo", text)


def graph_of(variant: str, model: Any, **settings: Any) -> Any:
    if "compaction" in variant:
        settings.setdefault("context_window", 100_000)
    return build_graph(variant, model=model, tools=[ToolLog().echo()], **settings)


def test_800_cached_of_1000_are_priced_at_the_cached_rate() -> None:
    assert cost_of(1000, 0, PRICES, 800) == pytest.approx((200 * 2.0 + 800 * 0.5) / 1e6)
    assert cost_of(1000, 100, PRICES[:2], 800) == cost_of(1000, 100, PRICES[:2])
    assert cost_of(1000, 100, None, 800) is None
    assert cost_of(1000, 0, PRICES, 5000) == cost_of(1000, 0, (0.5, 8.0))  # at most the prompt


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_run_sums_cached_tokens_and_prices_them(variant: str, fmt: str, run: Runner) -> None:
    model = fake_model(step("a", fmt), step("b", fmt), answer("42"), fixed_usage=USAGE)
    graph = graph_of(variant, model, action_format=fmt, token_prices=PRICES)
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "answered"
    usage = out["usage"]
    assert (usage["prompt_tokens"], usage["cache_read_tokens"]) == (3000, 2400)
    assert usage["cost"] == pytest.approx(3 * (200 * 2.0 + 800 * 0.5 + 100 * 8.0) / 1e6)


def test_two_prices_price_cached_tokens_as_input_and_none_are_zero(run: Runner) -> None:
    model = fake_model(action("echo", "a"), answer("42"), fixed_usage=USAGE)
    out = run(graph_of("transcript", model, token_prices=PRICES[:2]), {"question": "Q?"})
    assert out["usage"]["cache_read_tokens"] == 1600
    assert out["usage"]["cost"] == pytest.approx(2 * (1000 * 2.0 + 100 * 8.0) / 1e6)
    plain = fake_model(answer("42"), fixed_usage=USAGE[:2])
    out = run(graph_of("transcript", plain), {"question": "Q?"})
    assert out["usage"]["cache_read_tokens"] == 0 and out["usage"]["cost"] is None


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
def test_the_cost_budget_counts_at_the_cached_price(fmt: str, run: Runner) -> None:
    per_call = cost_of(1000, 100, PRICES, 800)
    assert per_call is not None
    model = fake_model(*[step(f"s{i}", fmt) for i in range(6)], fixed_usage=USAGE)
    log = ToolLog()
    graph = build_graph(
        "transcript",
        model=model,
        tools=[log.echo()],
        action_format=fmt,
        token_prices=PRICES,
        max_run_cost=cost_of(3000, 300, PRICES, 2400),
    )
    out = run(graph, {"question": "Q?"})
    # Priced as if nothing were cached, two calls would have spent the budget.
    assert 2 * cost_of(1000, 100, PRICES[:2]) > 3 * per_call  # type: ignore[operator]
    assert out["status"] == "budget_exhausted" and len(model.calls) == 3
    assert out["usage"]["cost"] == pytest.approx(3 * per_call)
    assert out["usage"]["cache_read_tokens"] == 2400


def test_a_run_context_gives_the_cached_price(run: Runner) -> None:
    model = fake_model(answer("42"), fixed_usage=USAGE)
    graph = graph_of("transcript", model, token_prices=PRICES[:2])
    out = run(graph, {"question": "Q?"}, context={"token_prices": "2,8,0.5"})
    assert out["settings"]["token_prices"] == [2.0, 8.0, 0.5]
    assert out["usage"]["cost"] == pytest.approx((200 * 2.0 + 800 * 0.5 + 100 * 8.0) / 1e6)


def test_token_prices_take_two_or_three_numbers() -> None:
    prices = {s.name: s for s in settings_of(RunSettings)}["token_prices"]
    assert prices.check("2,8,0.5") == prices.check([2, 8, 0.5]) == (2.0, 8.0, 0.5)
    assert prices.check("2,8") == (2.0, 8.0)
    for bad in ("1", "1,2,3,4", (1.0,)):
        with pytest.raises(ValueError, match="2 numbers \\(or 3\\)"):
            prices.check(bad)
    with pytest.raises(ValueError, match=">= 0"):
        prices.check((1.0, 2.0, -0.5))


def reply_with(usage: dict[str, Any] | None = None, **metadata: Any) -> AIMessage:
    message = AIMessage("x", response_metadata=metadata)
    if usage is not None:
        message.usage_metadata = usage  # type: ignore[assignment]
    return message


def test_cached_tokens_are_read_where_providers_report_them() -> None:
    langchain = {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11}
    langchain["input_token_details"] = {"cache_read": 8}  # type: ignore[assignment]
    assert read_cached(reply_with(langchain), 10) == 8
    raw = {"token_usage": {"prompt_tokens_details": {"cached_tokens": 6}}}
    assert read_cached(reply_with(**raw), 10) == 6
    assert read_cached(reply_with(timings={"cache_n": 4, "prompt_n": 6}), 10) == 4  # llama.cpp
    assert read_cached(reply_with(), 10) == 0
    for wrong in (-1, 11, 2.5, "8", True, float("nan"), 10**30):
        assert read_cached(reply_with(timings={"cache_n": wrong}), 10) == 0, wrong
    assert read_cached(None, 10) == 0


def test_an_openai_compatible_servers_cached_tokens_are_counted(run: Runner) -> None:
    from reactgraph.models import chat_model

    server = FakeOpenAIServer()
    try:
        server.responder = lambda body: answer("42")
        server.usage_sent = {"prompt_tokens": 1000, "prompt_tokens_details": {"cached_tokens": 800}}
        model = chat_model("test-model", base_url=server.url, api_key="x", stream=False)
        graph = build_graph("transcript", model=model, tools=[], token_prices=PRICES)
        out = run(graph, {"question": "Q?"})
    finally:
        server.close()
    assert out["usage"]["prompt_tokens"] == 1000 and out["usage"]["cache_read_tokens"] == 800
    completion = out["usage"]["completion_tokens"]
    assert out["usage"]["cost"] == pytest.approx((200 * 2.0 + 800 * 0.5 + completion * 8.0) / 1e6)


def test_show_and_a_batch_result_say_the_cached_share(run: Runner) -> None:
    from reactgraph.app.console import usage_text
    from reactgraph.batch import result_of

    model = fake_model(action("echo", "a"), answer("42"), fixed_usage=USAGE)
    out = run(graph_of("transcript", model, token_prices=PRICES), {"question": "Q?"})
    text = usage_text(out)
    assert text is not None and text.startswith("2,000 prompt (1,600 cached, 80%) + 200 ")
    assert result_of(0, "Q?", "t", out, 1.0, None)["cache_read_tokens"] == 1600
    plain = run(graph_of("transcript", fake_model(answer("x"))), {"question": "Q?"})
    assert "cached" not in (usage_text(plain) or "")
