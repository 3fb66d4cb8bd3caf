"""Run budgets (``reactgraph.nodes.loop.middleware.budgets``): tokens, cost, time and tool calls, in
every variant and both action formats, under ``invoke`` and ``ainvoke``; the spend in the
checkpoint, so a resume (after an approval, or a kill in another process) goes on counting."""

from __future__ import annotations

import itertools
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
from reactgraph.nodes.loop.middleware.budgets import cost_of, warnings_due
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.nodes.vocabulary.state import RunUsage
from tests.fakes import (
    FakeChatModel,
    Runner,
    ToolLog,
    action,
    answer,
    call,
    compacting_graph,
    fake_model,
    is_summary_request,
)

USAGE = (100, 20)  # every call: 100 prompt + 20 completion tokens, as the provider reports
PER_CALL = sum(USAGE)
FORMATS = ["text", "tool_calls"]
MATRIX = [(v, f) for v in VARIANTS for f in FORMATS]
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


@pytest.mark.parametrize(("variant", "fmt"), MATRIX)
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
        "cache_read_tokens",
        "cost",
        "seconds",
        "tool_calls",
    }
    assert usage["cache_read_tokens"] == 0  # the scripted model reports none cached
    assert out["turns"][-1]["observation"] is None  # the last reply is kept, not acted on
    assert out["messages"][-1].content.startswith(
        "Stopped at the run's token budget (max_run_tokens): 360 of 360 tokens spent"
    )


@pytest.mark.parametrize("fmt", FORMATS)
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
        if is_summary_request(messages):
            return AIMessage("the summary", usage_metadata=_usage(1000, 50))
        return action("echo", f"step {len(messages)}")

    model = fake_model(*[replies] * 20, fixed_usage=USAGE)
    graph = compacting_graph(model, max_run_tokens=2000)
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


@pytest.mark.parametrize(("variant", "fmt"), MATRIX)
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
    # The chat shows it on its own, right after that tool result.
    said = "Budget warning: search has made 2 of the 2 calls it may make in this run."
    view = chat_view(out)
    assert view.count(("ai", said)) == 1 and view[view.index(("ai", said)) - 1][0] == "tool"
    # What the model saw: the refusal, in its format.
    seen = model.calls[3]["messages"]
    if fmt == "tool_calls":
        assert any(isinstance(m, ToolMessage) and m.content == refused for m in seen)
    else:
        assert any(str(m.content) == f"Observation: {refused}" for m in seen)


@pytest.mark.parametrize("fmt", FORMATS)
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
    assert "Stopped at the run's token budget (max_run_tokens): 360 of 360 tokens spent" in printed
    assert "Not run: search may be called at most 2" in printed


def test_an_empty_summary_tried_again_counts_both_attempts(run: Runner) -> None:
    summaries = itertools.chain(["", "the summary"], itertools.repeat("a later summary"))
    steps = itertools.count()

    def replies(messages: list[Any]) -> str | AIMessage:
        if is_summary_request(messages):
            return AIMessage(next(summaries), usage_metadata=_usage(1000, 50))
        step = next(steps)
        return answer("done") if step >= 6 else action("echo", f"s {step}")

    model = fake_model(*[replies] * 20, fixed_usage=USAGE)
    graph = compacting_graph(model)
    out = run(graph, {"question": "Q?"})
    record = out["compactions"][0]
    assert record["summary"] == "the summary"
    assert (record["prompt_tokens"], record["completion_tokens"]) == (2000, 100)
    turns = sum(t["prompt_tokens"] + t["completion_tokens"] for t in out["turns"])
    assert out["usage"]["total_tokens"] == turns + sum(
        c["prompt_tokens"] + c["completion_tokens"] for c in out["compactions"]
    )


def test_time_spent_while_a_reply_is_read_keeps_the_reply_and_runs_nothing() -> None:
    from reactgraph.nodes.loop.middleware.budgets import account, fresh_usage
    from reactgraph.nodes.loop.middleware.scope import Ledger
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
    out = account(state, {"parsed": parsed}, 1.5, settings, Ledger())
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_seconds"
    [turn] = out["turns"]
    assert (turn["kind"], turn["action"], turn["observation"]) == ("action", "echo", None)
    assert out["usage"]["tool_calls"] == {}


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_time_budget_bounds_a_model_call(fmt: str, run: Runner) -> None:
    """A model call is cut at the time left (the scripted model would take 5 s), and the run
    ends budget_exhausted on max_run_seconds, the call's prompt counted (it was sent), with no
    turn (no reply came)."""
    model = fake_model(answer("too late"), latency_s=5.0)
    graph = graph_of("transcript", model, [ToolLog().echo()], action_format=fmt, max_run_seconds=1)
    out = run(graph, {"question": "Q?"})
    assert out["status"] == "budget_exhausted" and out["answer"] is None
    assert out["budget"]["budget"] == "max_run_seconds" and out["turns"] == []
    assert out["usage"]["prompt_tokens"] > 0 and out["usage"]["completion_tokens"] == 0
    assert out["usage"]["seconds"] < 5.0  # the call was cut, not waited for


def test_a_summary_the_time_budget_cuts_ends_the_run(run: Runner) -> None:
    """The summarizer's call is bounded too: cut, it ends the run (no fallback, no retry)."""

    def reply(messages: list[Any]) -> str:
        if is_summary_request(messages):
            time.sleep(1.5)
            return "a summary too late"
        return action("echo", f"s {len(model.calls)}")

    model = fake_model(*[reply] * 10, fixed_usage=USAGE)
    graph = compacting_graph(model, compaction_threshold=0.5, max_run_seconds=1.0)
    out = graph.invoke({"question": "Q?"})
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_seconds"
    summaries = [c for c in model.calls if "compacting" in str(c["messages"][0].content)]
    assert len(summaries) == 1 and not out.get("compactions")


class Killed(BaseException):
    """Stands for the process dying in the middle of a model call (a SIGKILL): nothing of the
    run's own code sees it end (the subprocess tests kill for real, `make test-kills`)."""


def chat_view(out: dict[str, Any]) -> list[tuple[str, str]]:
    """The run's chat view: each message's type, and its tool call's name or its text."""
    shown = []
    for m in out["messages"]:
        calls = getattr(m, "tool_calls", None)
        shown.append((m.type, calls[0]["name"] if calls else str(m.content)))
    return shown


@pytest.mark.parametrize(("variant", "fmt"), MATRIX)
def test_calls_a_dying_process_sent_are_counted_when_the_step_runs_again(
    variant: str, fmt: str
) -> None:
    """The second call is sent twice and the process "dies" in it both times: resumed, the
    step's reply counts its two lost sendings at its prompt's tokens (``lost_calls``), so the
    run's figures hold every call sent, each once."""
    deaths = [2]

    def second(messages: list[Any]) -> str | AIMessage:
        if deaths[0]:
            deaths[0] -= 1
            raise Killed
        return answer("done")

    def build(dying: bool) -> tuple[Any, Any]:
        model = fake_model(step("echo", "a", fmt), second if dying else answer("done"))
        model.replies = [*model.replies, second, second]  # the same step, sent again
        graph = graph_of(
            variant, model, [ToolLog().echo()], action_format=fmt, checkpointer=InMemorySaver()
        )
        return graph, model

    config = {"configurable": {"thread_id": "t"}}
    plain_graph, _ = build(dying=False)
    plain = plain_graph.invoke({"question": "Q?"}, config)
    graph, model = build(dying=True)
    for payload in ({"question": "Q?"}, None):
        with pytest.raises(Killed):
            graph.invoke(payload, config)
    out = graph.invoke(None, config)
    assert out["status"] == "answered" and len(model.calls) == 4
    assert [t.get("lost_calls") for t in out["turns"]] == [None, 2]
    first, last = plain["turns"][1]["prompt_tokens"], out["turns"][1]["prompt_tokens"]
    assert last == 3 * first  # its own prompt and the two lost ones
    assert out["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + 2 * first
    assert out["usage"]["total_tokens"] == sum(
        t["prompt_tokens"] + t["completion_tokens"] for t in out["turns"]
    )


def test_a_call_that_failed_is_not_counted_when_the_step_runs_again(run: Runner) -> None:
    """A call its server answered with an error was billed nothing: a resume does not count it
    (it was marked failed before the run stopped)."""
    failures = [1]

    def flaky(messages: list[Any]) -> str:
        if failures[0]:
            failures[0] -= 1
            raise ValueError("the server said no")  # not transient: the run stops
        return answer("done")

    model = fake_model(action("echo", "a"), flaky, flaky)
    graph = graph_of("transcript", model, [ToolLog().echo()], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ValueError, match="the server said no"):
        run(graph, {"question": "Q?"}, config)
    out = run(graph, None, config)
    assert out["status"] == "answered" and len(model.calls) == 3
    assert [t.get("lost_calls") for t in out["turns"]] == [None, None]


def test_a_run_without_a_checkpointer_writes_no_record_of_its_calls() -> None:
    """Nothing to resume, so nothing written: no ``model_call_sent`` task in the stream."""
    model = fake_model(action("echo", "a"), answer("done"))
    graph = graph_of("transcript", model, [ToolLog().echo()])
    chunks = list(graph.stream({"question": "Q?"}, stream_mode="updates"))
    assert not [c for c in chunks if "model_call_sent" in c]
    kept = graph_of("transcript", fake_model(action("echo", "a"), answer("done")),
                    [ToolLog().echo()], checkpointer=InMemorySaver())  # fmt: skip
    config = {"configurable": {"thread_id": "t"}}
    chunks = list(kept.stream({"question": "Q?"}, config, stream_mode="updates"))
    assert len([c for c in chunks if "model_call_sent" in c]) == 2  # one per call


CEILING = {
    "max_run_tokens": 3 * PER_CALL,
    "max_run_seconds": 600.0,
    "max_run_cost": 1.0,
    "tool_call_limits": {"echo": 1},
}


def ceiling_graph(model: FakeChatModel, **settings: Any) -> Any:
    return graph_of(
        "transcript",
        model,
        [ToolLog().echo(), ToolLog().echo("other")],
        budget_ceiling=CEILING,
        token_prices=(1.0, 2.0),
        **settings,
    )


@pytest.mark.parametrize(
    "context",
    [
        # Raising each budget, removing them (None keeps the deployment's), pricing at nothing.
        {"max_run_tokens": 10**9, "max_run_seconds": 10**6, "max_run_cost": 10**6.0},
        {"max_run_tokens": None, "max_run_seconds": None, "max_run_cost": None},
        {"token_prices": [0.0, 0.0], "tool_call_limits": {"echo": 50, "other": 3}},
        {},
    ],
    ids=["raised", "removed", "repriced", "none"],
)
def test_a_deployments_budget_is_a_ceiling_a_runs_context_cannot_lift(
    context: dict[str, Any], run: Runner
) -> None:
    model = fake_model(*[step("echo", f"s {i}", "text") for i in range(6)], fixed_usage=USAGE)
    graph = ceiling_graph(model, max_run_tokens=10**6)  # built above it: capped too
    out = run(graph, {"question": "Q?"}, context=context)
    assert out["status"] == "budget_exhausted" and out["budget"]["budget"] == "max_run_tokens"
    assert out["budget"]["limit"] == 3 * PER_CALL and len(model.calls) == 3
    kept = out["settings"]
    assert (kept["max_run_tokens"], kept["max_run_seconds"], kept["max_run_cost"]) == (
        3 * PER_CALL, 600.0, 1.0,
    )  # fmt: skip
    assert kept["token_prices"] == [1.0, 2.0] and out["usage"]["cost"] > 0
    assert kept["tool_call_limits"]["echo"] == 1
    assert "Not run: echo may be called at most 1" in (out["turns"][1]["observation"] or "")


def test_a_runs_context_can_lower_a_deployments_budget(run: Runner) -> None:
    model = fake_model(*[step("echo", f"s {i}", "text") for i in range(6)], fixed_usage=USAGE)
    graph = ceiling_graph(model)
    context = {"max_run_tokens": PER_CALL, "tool_call_limits": {"echo": 0, "other": 2}}
    out = run(graph, {"question": "Q?"}, context=context)
    assert out["budget"]["limit"] == PER_CALL and len(model.calls) == 1
    assert out["settings"]["tool_call_limits"] == {"echo": 0, "other": 2}


def test_the_ceiling_is_shown_in_the_context_schema_and_checked() -> None:
    graph = ceiling_graph(fake_model())
    fields = graph.get_context_jsonschema()["properties"]
    assert fields["max_run_tokens"]["default"] == 3 * PER_CALL
    assert "At most: 360 (this server's budget" in fields["max_run_tokens"]["description"]
    assert "At most: echo=1" in fields["tool_call_limits"]["description"]
    assert "Fixed by this server: 1,2" in fields["token_prices"]["description"]
    tools = [ToolLog().echo()]
    for bad, error in [
        ({"max_turns": 3}, ValueError),  # not a budget
        ({"max_run_tokens": 0}, ValueError),
        ({"max_run_tokens": "many"}, TypeError),
        ({"tool_call_limits": {"serach": 1}}, ValueError),  # a tool the graph lacks
        ({"max_run_cost": 1.0}, ValueError),  # without token_prices
        (["max_run_tokens"], TypeError),
    ]:
        with pytest.raises(error):
            build_graph("transcript", model=fake_model(), tools=tools, budget_ceiling=bad)


def test_the_served_graphs_take_their_ceiling_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``REACTGRAPH_MAX_RUN_TOKENS`` and its kin (or ``langgraph.json``'s ``env``) set the
    served graphs' ceiling; a value that is no number fails the server's start, naming it."""
    import importlib

    import reactgraph.studio as studio

    monkeypatch.setenv("REACTGRAPH_MAX_RUN_TOKENS", "5000")
    monkeypatch.setenv("REACTGRAPH_MAX_RUN_COST", "0.5")
    monkeypatch.setenv("REACTGRAPH_TOKEN_PRICES", "0.15,0.60")
    monkeypatch.setenv("REACTGRAPH_TOOL_CALL_LIMITS", "search=2, calculator=none")
    try:
        with pytest.raises(ValueError, match="tool_call_limits"):
            importlib.reload(studio)
        monkeypatch.setenv("REACTGRAPH_TOOL_CALL_LIMITS", "search=2, calculator=1")
        for name in VARIANTS:
            graph = getattr(importlib.reload(studio), name)
            context = graph.context_schema(max_run_tokens=10**9, max_run_cost=99.0)
            assert (context.max_run_tokens, context.max_run_cost) == (5000, 0.5)
            assert context.token_prices == (0.15, 0.6)
            assert context.tool_call_limits == {"search": 2, "calculator": 1}
        monkeypatch.setenv("REACTGRAPH_MAX_RUN_SECONDS", "soon")
        with pytest.raises(ValueError, match="REACTGRAPH_MAX_RUN_SECONDS must be a number"):
            importlib.reload(studio)
    finally:
        for variable in (
            "REACTGRAPH_MAX_RUN_TOKENS",
            "REACTGRAPH_MAX_RUN_COST",
            "REACTGRAPH_MAX_RUN_SECONDS",
            "REACTGRAPH_TOKEN_PRICES",
            "REACTGRAPH_TOOL_CALL_LIMITS",
        ):
            monkeypatch.delenv(variable, raising=False)
        importlib.reload(studio)


def test_at_most_keeps_the_smaller_budget() -> None:
    from reactgraph.context import at_most

    assert at_most(10, None) == 10 and at_most(10, 50) == 10 and at_most(10, 3) == 3
    assert at_most(None, 7) == 7 and at_most(2.5, 1.0) == 1.0
    assert at_most({"a": 2}, {}) == {"a": 2}
    assert at_most({"a": 2}, {"a": 9, "b": 1}) == {"a": 2, "b": 1}
    assert at_most({"a": 2}, {"a": 0}) == {"a": 0}


@pytest.mark.parametrize(("variant", "fmt"), MATRIX)
def test_the_chat_shows_the_warning_the_last_action_and_which_budget_stopped_the_run(
    variant: str, fmt: str, run: Runner
) -> None:
    """Issue 58, 4: the 80% warning as a message of its own (not only at the end of a folded
    tool result), the Action the run never ran as a tool call answered "not run", and the
    stop naming the budget, its limit and what was spent; stored as the run showed it."""
    replies = [step("echo", f"step {i}", fmt) for i in range(8)]
    model = fake_model(*replies, fixed_usage=USAGE)
    graph = graph_of(
        variant,
        model,
        [ToolLog().echo()],
        action_format=fmt,
        max_run_tokens=300,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    out = run(graph, {"messages": [{"role": "user", "content": "Q?"}]}, config)
    assert out["status"] == "budget_exhausted" and len(model.calls) == 3
    warning = (
        "Budget warning: 240 of 300 tokens of the run's token budget (max_run_tokens) are "
        "spent. The run stops once all of it is, answered or not."
    )
    stop = (
        "Stopped at the run's token budget (max_run_tokens): 360 of 300 tokens spent, so no "
        "further model call or tool ran."
    )
    not_run = "Not run: the run spent its budget before this action could run."
    assert chat_view(out)[-6:] == [
        ("ai", "echo"),
        ("tool", out["turns"][1]["observation"]),  # the Observation as the model saw it
        ("ai", warning),
        ("ai", "echo"),  # the last Action: a tool call, though it never ran
        ("tool", not_run),
        ("ai", stop),
    ]
    assert "(Budget: 240 of this run's 300 tokens" in out["turns"][1]["observation"]
    call, result = out["messages"][-3:-1]
    assert result.tool_call_id == call.tool_calls[0]["id"] and result.status == "error"
    assert call.tool_calls[0]["args"] == {"text": "step 2"}
    stored = graph.get_state(config).values["messages"]
    assert [(m.id, m.content) for m in stored] == [(m.id, m.content) for m in out["messages"]]


@pytest.mark.parametrize(
    ("record", "said"),
    [
        (
            {"budget": "max_run_cost", "limit": 0.01, "spent": 0.012345, "turn": 4},
            "cost budget (max_run_cost): 0.01235 of 0.01 spent",
        ),
        (
            {"budget": "max_run_seconds", "limit": 30, "spent": 31.26, "turn": 2},
            "time budget (max_run_seconds): 31.3 of 30 seconds spent",
        ),
        (
            {"budget": "max_run_tokens", "limit": 1000, "spent": 1472, "turn": 3},
            "token budget (max_run_tokens): 1,472 of 1,000 tokens spent",
        ),
    ],
)
def test_every_budget_stop_names_its_budget_limit_and_spend(
    record: dict[str, Any], said: str
) -> None:
    from reactgraph.app.console import budget_text
    from reactgraph.nodes.vocabulary.endings import chat_ending

    name, rest = said.split(": ", 1)
    assert chat_ending("budget_exhausted", record) == (
        f"Stopped at the run's {name}: {rest}, so no further model call or tool ran."
    )
    assert budget_text(record) == f"{said}, after {record['turn']} turn(s)"
