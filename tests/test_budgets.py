"""Run budgets (``reactgraph.nodes.features.budgets``): tokens, cost, time and tool calls, in every
variant and both action formats, under ``invoke`` and ``ainvoke``; the spend in the checkpoint, so a
resume (after an approval, or a kill in another process) goes on counting."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.features.budgets import cost_of, warnings_due
from reactgraph.nodes.loop.run_settings import RunSettings
from reactgraph.nodes.loop.state import RunUsage
from tests.fakes import FakeChatModel, Runner, ToolLog, action, answer, call, fake_model

USAGE = (100, 20)  # every call: 100 prompt + 20 completion tokens, as the provider reports
PER_CALL = sum(USAGE)
REPO = Path(__file__).resolve().parents[1]


def step(name: str, text: str, fmt: str) -> str | AIMessage:
    """One Action in the run's format."""
    return call(name, {"text": text}) if fmt == "tool_calls" else action(name, text)


def graph_of(variant: str, model: FakeChatModel, tools: list[Any], **settings: Any) -> Any:
    extra: dict[str, Any] = {}
    if "compaction" in variant:
        settings.setdefault("context_window", 100_000)
    return build_graph(variant, model=model, tools=tools, **extra, **settings)


def observations(out: dict[str, Any]) -> list[str | None]:
    return [t["observation"] for t in out["turns"]]


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_token_budget_stops_the_run_at_the_exact_call(
    variant: str, fmt: str, run: Runner
) -> None:
    log = ToolLog()
    replies = [step("echo", f"step {i}", fmt) for i in range(8)] + [answer("done")]
    model = fake_model(*replies, fixed_usage=USAGE)
    graph = graph_of(variant, model, [log.echo()], action_format=fmt, max_run_tokens=3 * PER_CALL)
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "budget_exhausted" and out["answer"] is None
    assert len(model.calls) == 3  # the third call reached the budget: no fourth
    assert [text for _, text in log.calls] == ["step 0", "step 1"]  # its Action did not run
    assert out["budget"] == {
        "budget": "max_run_tokens",
        "limit": 3 * PER_CALL,
        "spent": 3 * PER_CALL,
        "turn": 2,
    }
    usage = out["usage"]
    assert usage["prompt_tokens"] == 300 and usage["completion_tokens"] == 60
    assert usage["total_tokens"] == 360 and usage["cost"] is None
    assert usage["tool_calls"] == {"echo": 2} and usage["seconds"] > 0
    assert set(usage) == {
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cost",
        "seconds",
        "tool_calls",
    }
    assert out["turns"][-1]["observation"] is None  # the last reply is kept, not acted on
    assert out["messages"][-1].content.startswith("Stopped: the run spent its budget")


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
def test_the_cost_budget_counts_at_the_prices_and_stops_at_the_exact_call(
    fmt: str, run: Runner
) -> None:
    log = ToolLog()
    model = fake_model(*[step("echo", f"s{i}", fmt) for i in range(6)], fixed_usage=USAGE)
    per_call = cost_of(*USAGE, (1.0, 2.0))
    assert per_call == pytest.approx(0.00014)
    graph = graph_of(
        "transcript",
        model,
        [log.echo()],
        action_format=fmt,
        token_prices=(1.0, 2.0),
        max_run_cost=cost_of(200, 40, (1.0, 2.0)),
    )
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "budget_exhausted" and len(model.calls) == 2
    assert out["budget"]["budget"] == "max_run_cost"
    assert out["usage"]["cost"] == pytest.approx(2 * per_call)
    assert len(log.calls) == 1


def test_an_answer_in_the_call_that_spends_the_budget_is_kept(run: Runner) -> None:
    model = fake_model(action("echo", "a"), answer("42"), fixed_usage=USAGE)
    graph = graph_of("transcript", model, [ToolLog().echo()], max_run_tokens=2 * PER_CALL)
    out = run(graph, {"question": "Q?"})
    assert (out["status"], out["answer"]) == ("budget_exhausted", "42")


def test_without_a_budget_nothing_changes_but_the_totals_are_kept(run: Runner) -> None:
    model = fake_model(action("echo", "a"), answer("42"), fixed_usage=USAGE)
    graph = graph_of("transcript", model, [ToolLog().echo()], token_prices=[2.5, 10])
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "answered" and out.get("budget") is None
    assert out["usage"]["total_tokens"] == 2 * PER_CALL
    assert out["usage"]["cost"] == pytest.approx((200 * 2.5 + 40 * 10) / 1e6)


def test_tokens_are_counted_as_turns_are_when_the_provider_reports_none(run: Runner) -> None:
    model = fake_model(action("echo", "a"), answer("42"))
    graph = graph_of("transcript", model, [ToolLog().echo()])
    out = run(graph, {"question": "Q?"})
    turns = out["turns"]
    assert turns[0]["token_source"] != "usage"
    assert out["usage"]["prompt_tokens"] == sum(t["prompt_tokens"] for t in turns)
    assert out["usage"]["completion_tokens"] == sum(t["completion_tokens"] for t in turns)


def test_the_forced_answer_counts_and_a_budget_reached_before_it_skips_it(run: Runner) -> None:
    model = fake_model(action("echo", "a"), action("echo", "b"), "forced", fixed_usage=USAGE)
    graph = graph_of("transcript", model, [ToolLog().echo()], max_turns=2)
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "turn_limit" and out["usage"]["total_tokens"] == 3 * PER_CALL
    model = fake_model(action("echo", "a"), action("echo", "b"), "forced", fixed_usage=USAGE)
    graph = graph_of(
        "transcript", model, [ToolLog().echo()], max_turns=2, max_run_tokens=2 * PER_CALL
    )
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "budget_exhausted" and len(model.calls) == 2


def test_summaries_count_toward_the_token_budget(run: Runner) -> None:
    def replies(messages: list[Any]) -> str | AIMessage:
        if str(messages[0].content).startswith("You are compacting"):
            return AIMessage("the summary", usage_metadata=_usage(1000, 50))
        return action("echo", f"step {len(messages)}")

    model = fake_model(*[replies] * 20, fixed_usage=USAGE)
    graph = build_graph(
        "compaction",
        model=model,
        tools=[ToolLog().echo()],
        token_counter=lambda messages: 100 * len(messages),
        context_window=1000,
        compaction_threshold=0.7,
        keep_turns=1,
        max_run_tokens=2000,
    )
    out = run(graph, {"question": "Q?"})
    summaries = sum(c["prompt_tokens"] + c["completion_tokens"] for c in out["compactions"])
    assert summaries >= 1050
    turns = sum(t["prompt_tokens"] + t["completion_tokens"] for t in out["turns"])
    assert out["usage"]["total_tokens"] == summaries + turns >= 2000
    assert out["status"] == "budget_exhausted"


def _usage(prompt: int, completion: int) -> Any:
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
    }


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_tool_past_its_limit_does_not_run_and_other_tools_do(
    variant: str, fmt: str, run: Runner
) -> None:
    log = ToolLog()
    replies = [
        step("search", "a", fmt),
        step("search", "b", fmt),
        step("search", "c", fmt),
        step("calculator", "1+1", fmt),
        answer("done"),
    ]
    model = fake_model(*replies)
    tools = [log.echo("search"), log.echo("calculator")]
    graph = graph_of(variant, model, tools, action_format=fmt, tool_call_limits={"search": 2})
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "answered"
    assert log.calls == [("search", "a"), ("search", "b"), ("calculator", "1+1")]
    refused = observations(out)[2]
    assert refused is not None and "search" in refused and "at most 2" in refused
    assert out["usage"]["tool_calls"] == {"search": 2, "calculator": 1}
    # The second search reached the limit: its Observation said so, once.
    assert "2 of the 2 calls" in (observations(out)[1] or "")
    assert sum("of the 2 calls" in (o or "") for o in observations(out)) == 1
    # What the model saw: the refusal, in its format.
    seen = model.calls[3]["messages"]
    if fmt == "tool_calls":
        assert any(isinstance(m, ToolMessage) and m.content == refused for m in seen)
    else:
        assert any(str(m.content) == f"Observation: {refused}" for m in seen)


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
def test_at_80_percent_the_next_observation_says_so_once(fmt: str, run: Runner) -> None:
    model = fake_model(*[step("echo", f"s{i}", fmt) for i in range(12)], fixed_usage=USAGE)
    graph = graph_of(
        "transcript",
        model,
        [ToolLog().echo()],
        action_format=fmt,
        max_turns=20,
        max_run_tokens=10 * PER_CALL,
    )
    out = run(graph, {"question": "Q?"})
    said = [i for i, o in enumerate(observations(out)) if "Budget:" in (o or "")]
    assert said == [7]  # after the eighth call: 960 of 1,200 tokens
    assert "960 of this run's 1,200 tokens" in (observations(out)[7] or "")
    assert out["budget_warned"] == ["max_run_tokens"]
    seen = model.calls[8]["messages"]
    assert sum("960 of this run's" in str(m.content) for m in seen) == 1


def test_the_time_budget_stops_a_slow_tool_and_makes_no_further_call(run: Runner) -> None:
    @tool
    def slow(text: str) -> str:
        """Takes its time."""
        time.sleep(2.0)
        return "late"

    model = fake_model(action("slow", "x"), answer("never"))
    graph = graph_of("transcript", model, [slow], max_run_seconds=0.3, tool_timeout=10.0)
    started = time.perf_counter()
    out = run(graph, {"question": "Q?"})
    assert time.perf_counter() - started < 2.0  # the tool's timeout is what was left
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_seconds"
    assert len(model.calls) == 1 and out["usage"]["seconds"] >= 0.3
    assert "timed out" in (out["turns"][0]["observation"] or "")


def test_waiting_for_a_person_is_not_counted_and_a_resume_keeps_counting() -> None:
    log = ToolLog()
    model = fake_model(
        action("echo", "a"), action("echo", "b"), action("echo", "c"), fixed_usage=USAGE
    )
    graph = graph_of(
        "transcript",
        model,
        [log.echo()],
        checkpointer=InMemorySaver(),
        approve=["echo"],
        max_run_seconds=2.0,
        max_run_tokens=3 * PER_CALL,
    )
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"question": "Q?"}, config)
    waiting = graph.get_state(config).values
    assert waiting["usage"]["total_tokens"] == PER_CALL
    time.sleep(2.1)  # a person taking longer than the time budget to decide
    graph.invoke(Command(resume={"type": "approve"}), config)
    out = graph.invoke(Command(resume={"type": "approve"}), config)
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_tokens"
    assert out["usage"]["seconds"] < 2.0 and out["usage"]["total_tokens"] == 3 * PER_CALL
    assert log.calls == [("echo", "a"), ("echo", "b")]


def test_a_new_run_on_the_thread_starts_from_nothing() -> None:
    model = fake_model(action("echo", "a"), answer("1"), answer("2"), fixed_usage=USAGE)
    graph = graph_of(
        "transcript", model, [ToolLog().echo()], checkpointer=InMemorySaver(), max_run_tokens=250
    )
    config = {"configurable": {"thread_id": "t"}}
    first = graph.invoke({"question": "Q?"}, config)
    assert first["usage"]["total_tokens"] == 240 and first["status"] == "answered"
    second = graph.invoke({"question": "Again?"}, config)
    assert second["usage"]["total_tokens"] == PER_CALL and second["status"] == "answered"


def test_a_budget_is_set_per_run_through_the_context(run: Runner) -> None:
    model = fake_model(action("echo", "a"), answer("1"), fixed_usage=USAGE)
    graph = graph_of("transcript", model, [ToolLog().echo()])
    out = run(graph, {"question": "Q?"}, context={"max_run_tokens": PER_CALL})
    assert out["status"] == "budget_exhausted" and len(model.calls) == 1
    assert out["settings"]["max_run_tokens"] == PER_CALL


def test_budgets_that_cannot_work_are_errors() -> None:
    tools = [ToolLog().echo()]
    with pytest.raises(ValueError, match="token_prices"):
        build_graph("transcript", model=fake_model(), tools=tools, max_run_cost=1.0)
    with pytest.raises(ValueError, match="'serach'"):
        build_graph("transcript", model=fake_model(), tools=tools, tool_call_limits={"serach": 1})
    for bad in ({"max_run_tokens": 0}, {"max_run_seconds": 0}, {"token_prices": (1.0,)}):
        with pytest.raises(ValueError):
            build_graph("transcript", model=fake_model(), tools=tools, **bad)
    with pytest.raises(ValueError):
        build_graph("transcript", model=fake_model(), tools=tools, tool_call_limits={"echo": -1})
    with pytest.raises(ValueError, match="2 numbers"):
        build_graph("transcript", model=fake_model(), tools=tools, token_prices="cheap")
    with pytest.raises(TypeError):
        build_graph("transcript", model=fake_model(), tools=tools, token_prices=5)
    with pytest.raises(TypeError):
        build_graph("transcript", model=fake_model(), tools=tools, tool_call_limits={"echo": True})
    graph = build_graph("transcript", model=fake_model(answer("x")), tools=tools)
    with pytest.raises(ValueError, match="token_prices"):
        graph.invoke({"question": "Q?"}, context={"max_run_cost": 0.5})


def test_a_pair_and_a_mapping_are_read_in_every_form() -> None:
    from reactgraph.settings import settings_of

    named = {s.name: s for s in settings_of(RunSettings)}
    prices, limits = named["token_prices"], named["tool_call_limits"]
    assert prices.check("2.5,10") == prices.check([2.5, 10]) == (2.5, 10.0)
    assert limits.check("search=5") == limits.check({"search": 5}) == {"search": 5}
    assert limits.check(["search=5", "calculator=1,search=2"]) == {"search": 2, "calculator": 1}
    assert limits.shown() == "none" and prices.shown() == "no prices"
    with pytest.raises(TypeError):
        prices.check([None, 1.0])
    with pytest.raises(TypeError):
        limits.check({"search": None})
    with pytest.raises(ValueError, match="NAME=N"):
        limits.check("search")
    with pytest.raises(ValueError, match="NAME=N"):
        limits.check("search=many")


def test_the_warnings_are_given_once_per_budget() -> None:
    settings = RunSettings(max_run_tokens=100, tool_call_limits={"search": 5})
    usage = RunUsage(
        prompt_tokens=70,
        completion_tokens=10,
        total_tokens=80,
        cost=None,
        seconds=1.0,
        tool_calls={"search": 4},
    )
    due = warnings_due(usage, settings, [])
    assert set(due) == {"max_run_tokens", "tool_call_limits.search"}
    assert warnings_due(usage, settings, list(due)) == {}
    assert warnings_due({**usage, "total_tokens": 79}, settings, []).keys() == {  # type: ignore[typeddict-item]
        "tool_call_limits.search"
    }


KILLED = """
import os, signal, sys, json
from langchain_core.tools import StructuredTool
from reactgraph import build_graph
from reactgraph.scripted import ScriptedChatModel
from reactgraph.storage.database import open_db

db, phase, marker = sys.argv[1], sys.argv[2], sys.argv[3]

def echo(text: str) -> str:
    if phase == "first" and text == "step 2":
        os.kill(os.getpid(), signal.SIGKILL)  # killed mid-run, mid-budget
    with open(marker, "a") as log:
        log.write(text + "\\n")
    return "echo: " + text

replies = [f"Thought: go.\\nAction: echo[step {i}]" for i in range(20)]
model = ScriptedChatModel(replies=replies[3 if phase == "resume" else 0 :], fixed_usage=(100, 20))
tools = [StructuredTool.from_function(echo, name="echo", description="echo")]
with open_db(db) as (saver, _):
    graph = build_graph(
        "transcript", model=model, tools=tools, checkpointer=saver, max_run_tokens=600
    )
    config = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"question": "Q?"} if phase == "first" else None, config)
print(json.dumps({"status": out["status"], "usage": out["usage"], "calls": len(model.calls)}))
"""


@pytest.mark.kills
def test_a_run_killed_mid_budget_and_resumed_in_a_new_process_still_stops(
    tmp_path: Path,
) -> None:
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(KILLED), "utf-8")
    db, marker = str(tmp_path / "runs.sqlite"), str(tmp_path / "tools.log")
    first = subprocess.run(
        [sys.executable, str(script), db, "first", marker], capture_output=True, cwd=REPO
    )
    assert first.returncode == -9, first.stderr.decode()[-2000:]
    second = subprocess.run(
        [sys.executable, str(script), db, "resume", marker], capture_output=True, cwd=REPO
    )
    assert second.returncode == 0, second.stderr.decode()[-2000:]
    out = json.loads(second.stdout.decode().strip().splitlines()[-1])
    # Three calls before the kill (360 tokens), so two more reach 600: not five.
    assert out["status"] == "budget_exhausted" and out["calls"] == 2
    assert out["usage"]["total_tokens"] == 600
    assert out["usage"]["tool_calls"] == {"echo": 4}
    ran = Path(marker).read_text("utf-8").split()
    assert ran == ["step", "0", "step", "1", "step", "2", "step", "3"]


def test_a_tool_with_its_own_limit_of_nothing_never_runs(run: Runner) -> None:
    ran: list[str] = []

    def search(query: str) -> str:
        ran.append(query)
        return "found"

    paid = StructuredTool.from_function(search, name="search", description="a paid search")
    model = fake_model(action("search", "a"), answer("without it"))
    graph = graph_of("transcript", model, [paid], tool_call_limits={"search": 0})
    out = run(graph, {"question": "Q?"})
    assert ran == [] and out["answer"] == "without it"
    assert out["usage"]["tool_calls"] == {}
    assert "Budget:" not in (observations(out)[0] or "")


def test_the_budgets_page_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    page = (REPO / "docs" / "budgets.md").read_text("utf-8")
    code = "\n".join(re.findall(r"```python\n(.*?)```", page, re.S))
    exec(compile(code, "docs/budgets.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "budget_exhausted" in printed and "'spent': 360" in printed
    assert "Not run: search may be called at most 2" in printed


def test_an_empty_summary_tried_again_counts_both_attempts(run: Runner) -> None:
    summaries = iter(["", "the summary"])

    def replies(messages: list[Any]) -> str | AIMessage:
        if str(messages[0].content).startswith("You are compacting"):
            return AIMessage(next(summaries), usage_metadata=_usage(1000, 50))
        return answer("done") if len(messages) > 6 else action("echo", f"s {len(messages)}")

    model = fake_model(*[replies] * 20, fixed_usage=USAGE)
    graph = build_graph(
        "compaction",
        model=model,
        tools=[ToolLog().echo()],
        token_counter=lambda messages: 100 * len(messages),
        context_window=1000,
        compaction_threshold=0.7,
        keep_turns=1,
    )
    out = run(graph, {"question": "Q?"})
    record = out["compactions"][0]
    assert record["summary"] == "the summary"
    assert (record["prompt_tokens"], record["completion_tokens"]) == (2000, 100)
    turns = sum(t["prompt_tokens"] + t["completion_tokens"] for t in out["turns"])
    assert out["usage"]["total_tokens"] == turns + sum(
        c["prompt_tokens"] + c["completion_tokens"] for c in out["compactions"]
    )


def test_time_spent_while_a_reply_is_read_keeps_the_reply_and_runs_nothing() -> None:
    from reactgraph.nodes.features.budgets import account, fresh_usage
    from reactgraph.nodes.reading.textparser import parse_react

    reply = {
        "raw": "Action: echo[x]",
        "text": "Action: echo[x]",
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "token_source": "usage",
        "model_latency_s": 0.1,
        "message_id": None,
    }
    settings = RunSettings(max_run_seconds=1.0)
    state = {"question": "Q?", "turns": [], "reply": reply, "usage": fresh_usage(settings)}
    parsed = parse_react(reply["text"], ["echo"])
    out = account(state, {"parsed": parsed}, 1.5, settings, ["echo"])
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_seconds"
    [turn] = out["turns"]
    assert (turn["kind"], turn["action"], turn["observation"]) == ("action", "echo", None)
    assert out["usage"]["tool_calls"] == {}
