"""Bounded replies and the model's own limits: ``max_completion_tokens`` on every model call (the
forced answer and the summarizer included) unless the user asked for none; a reply cut at the
cap gets a corrective Observation; the context window from the model's profile."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from reactgraph import build_graph
from reactgraph.app.cli import main
from reactgraph.models import chat_model
from reactgraph.nodes.calling.tokens import message_text
from reactgraph.nodes.loop.compaction import FALLBACK_WINDOW
from reactgraph.nodes.vocabulary import prompts
from reactgraph.variants import REGISTRY
from tests.fakes import FakeChatModel, FakeOpenAIServer, Runner, ToolLog, action, answer

LONG = "Thought: " + "very " * 400 + "long.\nAction: echo[never run]"


def busy(messages: list[BaseMessage]) -> str:
    """Act every turn (distinct inputs), summarize when asked to."""
    if message_text(messages[0]).startswith("You are compacting"):
        return "## Goal\nG"
    done = sum(message_text(m).startswith("Observation:") for m in messages)
    return action("echo", f"step {done}")


def every_call(run: Runner, variant: str, **settings: Any) -> list[FakeChatModel]:
    """A run of the variant that reaches its cap (a forced answer where it has one) and
    compacts where it can; the models that were called."""
    model = FakeChatModel(replies=[busy] * 100)
    summarizer = FakeChatModel(replies=["## Goal\nG"] * 100)
    spec = REGISTRY[variant]
    objects: dict[str, Any] = {}
    if "summarizer" in spec.objects:
        objects = {"summarizer": summarizer, "token_counter": lambda m: 100 * len(m)}
        settings.update(context_window=1000, keep_turns=1)
    graph = build_graph(
        variant, model=model, tools=[ToolLog().echo()], max_turns=6, **objects, **settings
    )
    run(graph, {"question": "Q?"})
    return [model, summarizer] if "summarizer" in spec.objects else [model]


@pytest.mark.parametrize("variant", list(REGISTRY))
def test_no_model_call_goes_out_without_the_cap(run: Runner, variant: str) -> None:
    models = every_call(run, variant)
    caps = [cap for model in models for cap in model.caps]
    assert len(caps) >= 4
    assert set(caps) == {4096}
    if len(models) == 2:
        assert models[1].calls, "the summarizer was called, capped"
    assert [m for m in models[0].prompts if prompts.FORCE_ANSWER in m] or (
        REGISTRY[variant].at_cap == "stop_run"
    )


@pytest.mark.parametrize("variant", list(REGISTRY))
def test_the_cap_is_per_run_and_none_means_none(run: Runner, variant: str) -> None:
    models = every_call(run, variant, max_completion_tokens=None)
    assert {cap for model in models for cap in model.caps} == {None}


def test_a_reply_cut_at_the_cap_gets_a_correction_and_the_turn_says_so(run: Runner) -> None:
    log = ToolLog()
    model = FakeChatModel(replies=[LONG, answer("42")])
    graph = build_graph("transcript", model=model, tools=[log.echo()], max_completion_tokens=50)
    result = run(graph, {"question": "Q?"})
    cut, done = result["turns"]
    assert cut["cut"] is True
    assert cut["kind"] == "invalid"
    assert len(cut["reply"]) == 200  # 50 tokens at the fake's four characters a token
    assert cut["observation"] == prompts.REPLY_CUT.format(
        limit=prompts.REPLY_CUT_LIMIT.format(tokens=50), valid="echo"
    )
    assert log.calls == []  # a cut reply is never acted on
    assert "cut" not in done
    assert result["answer"] == "42"


def test_a_forced_answer_cut_at_the_cap_is_recorded_as_cut(run: Runner) -> None:
    model = FakeChatModel(replies=[action("echo", "1"), "Final Answer: " + "no " * 100])
    graph = build_graph(
        "transcript", model=model, tools=[ToolLog().echo()], max_turns=1, max_completion_tokens=10
    )
    result = run(graph, {"question": "Q?"})
    forced = result["turns"][-1]
    assert forced["kind"] == "forced"
    assert forced["cut"] is True
    assert result["status"] == "turn_limit"


@pytest.mark.parametrize("cap", [64, None])
def test_an_openai_compatible_server_gets_the_cap_by_both_names(
    openai_server: FakeOpenAIServer, run: Runner, cap: int | None
) -> None:
    openai_server.responder = lambda body: answer("ok")
    model = chat_model("local-model", base_url=openai_server.url)
    graph = build_graph("transcript", model=model, tools=[], max_completion_tokens=cap)
    assert run(graph, {"question": "Q?"})["answer"] == "ok"
    (body,) = openai_server.requests
    assert body.get("max_completion_tokens") == cap
    assert body.get("max_tokens") == cap
    assert body["stream"] is True  # streamed, so an abandoned call can be closed


def test_a_server_cutting_a_reply_says_length_and_the_loop_corrects(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.script.extend([LONG, answer("42")])
    model = chat_model("local-model", base_url=openai_server.url)
    graph = build_graph("transcript", model=model, tools=[], max_completion_tokens=20)
    result = run(graph, {"question": "Q?"})
    assert result["turns"][0]["cut"] is True
    assert result["answer"] == "42"


def test_the_cli_sets_the_cap(openai_server: FakeOpenAIServer, tmp_path: Any) -> None:
    openai_server.responder = lambda body: answer("ok")
    db = str(tmp_path / "runs.db")
    base = ["ask", "q", "--base-url", openai_server.url, "--db", db]
    assert main([*base, "--max-completion-tokens", "64"]) == 0
    assert main([*base, "--max-completion-tokens", "none"]) == 0
    first, second = openai_server.requests
    assert first["max_completion_tokens"] == 64
    assert "max_completion_tokens" not in second
    with pytest.raises(SystemExit):
        main([*base, "--max-completion-tokens", "0"])


def test_the_context_window_comes_from_the_profile_then_the_table(
    run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    def window(model: FakeChatModel) -> int:
        graph = build_graph("compaction", model=model, tools=[])
        return run(graph, {"question": "Q?"})["settings"]["context_window"]

    profiled = FakeChatModel(replies=[answer("a")], model_name="gpt-4")
    profiled.profile = {"max_input_tokens": 5000}
    assert window(profiled) == 5000
    assert window(FakeChatModel(replies=[answer("a")], model_name="gpt-4")) == 8192
    with caplog.at_level(logging.WARNING):
        assert window(FakeChatModel(replies=[answer("a")], model_name="mystery")) == (
            FALLBACK_WINDOW
        )
    assert "context window of model 'mystery' unknown" in caplog.text


def test_langchain_openai_models_carry_their_profile() -> None:
    model = chat_model("gpt-4o-mini", api_key="not-used")
    assert model.profile is not None
    assert model.profile["max_input_tokens"] == 128000
