"""The compaction variant end to end: when it compacts, what the fresh window holds, summarizer
failures, the exhausted exit and the cap."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
from langchain_core.messages import BaseMessage

from reactgraph import build_graph
from reactgraph.nodes.calling.tokens import TokenCounter
from reactgraph.nodes.loop.compaction import context_window_for
from tests.fakes import Runner, ToolLog, action, answer, fake_model, prompt_text

QUESTION = "Which page mentions the bridge?"
SUMMARY = "## Goal\nFind the bridge.\n## Facts found\n- page 1 says nothing (echo[1])"


def failing(messages: list[BaseMessage]) -> str:
    raise RuntimeError("summarizer is down")


def counter_over_at(turn: int, tokens: int = 160_000):
    """A stub counter: ``tokens`` once turn ``turn``'s Observation is in an uncompacted prompt."""
    calls: list[list[BaseMessage]] = []

    def count(messages: Sequence[BaseMessage]) -> int:
        calls.append(list(messages))
        text = prompt_text(messages)
        if f"echo: {turn}" in text and "Progress so far" not in text:
            return tokens
        return 1_000

    count.calls = calls  # type: ignore[attr-defined]
    return count


def run_compaction(run: Runner, model, summarizer, counter, **kwargs):
    graph = build_graph(
        "compaction",
        model=model,
        tools=[ToolLog().echo()],
        context_window=200_000,
        token_counter=counter,
        summarizer=summarizer,
        **kwargs,
    )
    return run(graph, {"question": QUESTION})


def test_seed_compacts_once_at_160k_of_200k(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 8)], answer("done"))
    summarizer = fake_model(SUMMARY)
    out = run_compaction(run, model, summarizer, counter_over_at(5))
    assert len(summarizer.calls) == 1
    turn_six = model.prompts[5]
    assert SUMMARY in turn_six and "## Progress so far" in turn_six
    assert "echo: 1" not in turn_six
    assert out["status"] == "answered" and out["summary"] == SUMMARY
    (record,) = out["compactions"]
    assert record["turn"] == 5 and record["tokens_before"] == 160_000
    assert record["tokens_after"] == 1_000 and record["first_kept_turn"] == 3
    assert len(out["turns"]) == 8  # the full transcript stays in the state


def test_kept_turns_stay_verbatim_and_the_question_is_in_every_window(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 8)], answer("done"))
    run_compaction(run, model, fake_model(SUMMARY), counter_over_at(5))
    turn_six = model.prompts[5]
    for kept in (3, 4, 5):
        assert action("echo", str(kept)) in turn_six and f"Observation: echo: {kept}" in turn_six
    assert "echo: 2" not in turn_six
    assert all(f"Question: {QUESTION}" in p for p in model.prompts)


def test_the_summarizer_sees_the_dropped_part_and_the_kept_turns_as_context(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 8)], answer("done"))
    summarizer = fake_model(SUMMARY)
    run_compaction(run, model, summarizer, counter_over_at(5))
    request = summarizer.prompts[0]
    for section in (
        "## Goal",
        "## Facts found",
        "## Decisions made",
        "## Dead ends and errors",
        "## Next step",
        '"None"',
    ):
        assert section in request
    dropped, context = request.split("for context only", 1)
    assert "echo: 1" in dropped and "echo: 2" in dropped and "echo: 3" not in dropped
    assert "echo: 3" in context and "echo: 5" in context
    assert QUESTION in request
    assert summarizer.stops == [None]


def test_summarizer_failing_once_is_retried(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 8)], answer("done"))
    summarizer = fake_model(failing, SUMMARY)
    out = run_compaction(run, model, summarizer, counter_over_at(5))
    assert len(summarizer.calls) == 2
    assert out["summary"] == SUMMARY and SUMMARY in model.prompts[5]


def test_summarizer_failing_twice_drops_the_oldest_half(
    caplog: pytest.LogCaptureFixture, run: Runner
) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 8)], answer("done"))
    summarizer = fake_model(failing, failing)

    def count(messages: Sequence[BaseMessage]) -> int:
        text = prompt_text(messages)
        return 160_000 if "echo: 1" in text and "echo: 5" in text else 1_000

    with caplog.at_level(logging.WARNING):
        out = run_compaction(run, model, summarizer, count)
    assert "no summary was made" in caplog.text
    assert out["status"] == "answered" and out["summary"] is None
    (record,) = out["compactions"]
    assert record["summary"] is None and record["first_kept_turn"] == 3
    turn_six = model.prompts[5]
    assert "summarizer is down" not in turn_six and "Progress so far" not in turn_six
    assert "echo: 2" not in turn_six and "echo: 3" in turn_six


def test_a_fresh_window_still_over_the_threshold_is_context_exhausted(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 8)], answer("done"))
    summarizer = fake_model(SUMMARY)
    out = run_compaction(
        run,
        model,
        summarizer,
        lambda messages: 190_000 if "echo: 5" in prompt_text(messages) else 1_000,
    )
    assert out["status"] == "context_exhausted"
    assert out["summary"] == SUMMARY and out["answer"] is None
    assert len(summarizer.calls) == 1  # never loops on re-summarizing
    assert out["compactions"][0]["tokens_after"] == 190_000


def test_the_cap_of_60_turns_forces_a_last_answer(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(60)], answer("forced"))
    out = run(
        build_graph("compaction", model=model, tools=[ToolLog().echo()], context_window=10_000_000),
        {"question": QUESTION},
    )
    assert len(model.calls) == 61 and "You must answer now." in model.prompts[-1]
    assert (out["status"], out["answer"]) == ("turn_limit", "forced")
    assert out["summary"] is None and out["compactions"] == []


def test_repeated_compactions_keep_the_latest_summary(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 12)], answer("done"))
    summarizer = fake_model("first summary", "second summary")

    def count(messages: Sequence[BaseMessage]) -> int:
        text = prompt_text(messages)
        if ("echo: 4" in text and "first summary" not in text) or (
            "echo: 9" in text and "second summary" not in text
        ):
            return 160_000
        return 1_000

    out = run_compaction(run, model, summarizer, count)
    assert [c["turn"] for c in out["compactions"]] == [4, 9]
    assert "first summary" in summarizer.prompts[1]  # the earlier summary is carried forward
    assert out["summary"] == "second summary"
    assert "second summary" in model.prompts[-1] and "first summary" not in model.prompts[-1]


def test_the_default_counter_sees_the_exact_prompt_and_agrees_with_tiktoken(run: Runner) -> None:
    from reactgraph.nodes.calling import bundled

    model = fake_model(action("echo", "1"), answer("done"))
    counter = TokenCounter("gpt-4")
    seen: list[list[BaseMessage]] = []

    def spy(messages: Sequence[BaseMessage]) -> int:
        seen.append(list(messages))
        return counter(messages)

    run_compaction(run, model, model, spy)
    assert [prompt_text(m) for m in seen] == model.prompts
    encoding = bundled.cl100k_base()  # tiktoken's own cl100k_base, from the package's copy
    expected = 3 + sum(3 + len(encoding.encode(str(m.content))) for m in seen[-1])
    assert counter(seen[-1]) == expected


def test_context_window_lookup(caplog: pytest.LogCaptureFixture) -> None:
    assert context_window_for("gpt-4o-mini") == 128_000
    assert context_window_for("claude-3-5-sonnet-latest") == 200_000
    assert context_window_for("openai/gpt-4.1") == 1_047_576
    with caplog.at_level(logging.WARNING):
        assert context_window_for("my-local-model") == 128_000
    assert "unknown" in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"compaction_threshold": 1.5}, ValueError),
        ({"compaction_threshold": 0}, ValueError),
        ({"keep_turns": -1}, ValueError),
        ({"context_window": 0}, ValueError),
        ({"summarizer": "gpt-4o"}, TypeError),
        ({"token_counter": 42}, TypeError),
    ],
)
def test_compaction_misuse_raises(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        build_graph("compaction", model=fake_model(), tools=[], **kwargs)


def test_compaction_settings_are_rejected_by_other_variants() -> None:
    with pytest.raises(ValueError, match="not apply to the"):
        build_graph("transcript", model=fake_model(), tools=[], keep_turns=2)


def test_a_window_of_only_kept_turns_over_the_threshold_is_context_exhausted(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 8)], answer("done"))
    summarizer = fake_model(SUMMARY)
    out = run_compaction(
        run, model, summarizer, lambda messages: 190_000 if len(messages) > 3 else 1_000
    )
    assert out["status"] == "context_exhausted"
    assert summarizer.calls == [] and len(model.calls) == 2
