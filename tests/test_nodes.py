"""Each node and router alone, on hand-built states."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.runtime import Runtime

from reactgraph.nodes.control import (
    parse_reply,
    repeats,
    route_after_parse_reply,
    route_after_run_tool,
    start_run,
)
from reactgraph.nodes.deps import make_deps
from reactgraph.nodes.model import call_model
from reactgraph.nodes.settings import DEFAULTS, RunContext, make_settings
from reactgraph.nodes.state import ModelReply, State, Turn
from reactgraph.nodes.tooling import run_tool, truncate
from reactgraph.nodes.transcript import render_prompt
from tests.fakes import ToolLog, action, answer, fake_model


def reply(text: str) -> ModelReply:
    return ModelReply(
        raw=text,
        text=text,
        prompt_tokens=10,
        completion_tokens=5,
        token_source="tiktoken",
        model_latency_s=0.01,
    )


def turn(n: int, name: str = "echo", tool_input: str = "x") -> Turn:
    return Turn(
        turn=n,
        kind="action",
        reply=action(name, tool_input),
        text=action(name, tool_input),
        thought=None,
        action=name,
        action_input=tool_input,
        observation=f"obs {n}",
        tool_latency_s=0.0,
        model_latency_s=0.0,
        prompt_tokens=1,
        completion_tokens=1,
        token_source="tiktoken",
    )


def state(**fields: object) -> State:
    base: dict[str, object] = {"question": "Q?", "settings": make_settings(), "turns": []}
    return State(**{**base, **fields})  # type: ignore[typeddict-item]


@pytest.fixture
def deps():
    return make_deps(fake_model(answer("ok")), [ToolLog().echo()], DEFAULTS)


def test_render_prompt_starts_with_the_filled_prompt_then_the_turns(deps) -> None:
    messages = render_prompt(state(turns=[turn(1), turn(2)]), deps.tool_descriptions)
    assert isinstance(messages[0], HumanMessage)
    assert "echo[input]: echo the input" in messages[0].content
    assert messages[0].content.endswith("Question: Q?")
    assert [type(m) for m in messages[1:]] == [AIMessage, HumanMessage] * 2
    assert messages[2].content == "Observation: obs 1"


def test_render_prompt_windows_the_turns(deps) -> None:
    settings = make_settings(window_turns=2)
    view = render_prompt(
        state(turns=[turn(i) for i in range(1, 6)], settings=settings), deps.tool_descriptions
    )
    text = "\n".join(str(m.content) for m in view)
    assert "obs 1" not in text and "obs 3" not in text and "obs 4" in text and "obs 5" in text


def test_start_run_resolves_settings_and_resets(deps) -> None:
    runtime = Runtime(context=RunContext(max_turns=4))
    update = start_run(
        state(turns=[turn(1)], status="answered"),
        {"configurable": {"thread_id": "abc"}},
        runtime,
        deps=deps,
    )
    assert update["settings"]["max_turns"] == 4
    assert update["thread_id"] == "abc"
    assert update["status"] is None and update["turns"].value == []
    assert len(start_run(state(), {}, None, deps=deps)["thread_id"]) == 32


def test_start_run_rejects_a_bad_context(deps) -> None:
    with pytest.raises(ValueError):
        start_run(state(), {}, Runtime(context=RunContext(max_turns=-1)), deps=deps)
    with pytest.raises(TypeError):
        start_run(state(), {}, Runtime(context={"max_turns": 3}), deps=deps)


def test_call_model_records_the_reply_and_tokens(deps) -> None:
    update = call_model(state(), {}, deps=deps)
    assert update["reply"]["text"] == answer("ok")
    assert update["reply"]["prompt_tokens"] > 100
    assert deps.model.stops == [["Observation:"]]


def test_parse_reply_ends_on_an_answer(deps) -> None:
    update = parse_reply(state(reply=reply(answer("42"))), deps=deps)
    assert update["status"] == "answered" and update["answer"] == "42"
    assert update["turns"][0]["kind"] == "answer"


def test_parse_reply_detects_stuck(deps) -> None:
    previous = [turn(1, tool_input="same"), turn(2, tool_input="same")]
    update = parse_reply(state(turns=previous, reply=reply(action("echo", "same"))), deps=deps)
    assert update["status"] == "stuck"
    update = parse_reply(state(turns=previous[:1], reply=reply(action("echo", "same"))), deps=deps)
    assert "status" not in update


def test_repeats_counts_only_the_trailing_identical_actions() -> None:
    parsed = {"kind": "action", "action": "echo", "action_input": "a"}
    turns = [turn(1, tool_input="a"), turn(2, tool_input="b"), turn(3, tool_input="a")]
    assert repeats(turns, parsed) == 2  # type: ignore[arg-type]


def test_run_tool_runs_the_action_and_records_the_turn(deps) -> None:
    parsed = {
        "kind": "action",
        "thought": "t",
        "action": "echo",
        "action_input": "hi",
        "answer": None,
        "error": None,
    }
    update = run_tool(state(reply=reply("Action: echo[hi]"), parsed=parsed), {}, deps=deps)
    (record,) = update["turns"]
    assert record["observation"] == "echo: hi" and record["turn"] == 1
    assert record["tool_latency_s"] is not None


def test_run_tool_turns_an_invalid_reply_into_its_correction(deps) -> None:
    parsed = {
        "kind": "invalid",
        "thought": None,
        "action": None,
        "action_input": None,
        "answer": None,
        "error": "Unknown action 'x'.",
    }
    update = run_tool(state(reply=reply("Action: x[y]"), parsed=parsed), {}, deps=deps)
    assert update["turns"][0]["observation"] == "Unknown action 'x'."
    assert update["turns"][0]["tool_latency_s"] is None


def test_routers() -> None:
    assert route_after_parse_reply(state(status="answered")) == "__end__"
    assert route_after_parse_reply(state(status=None)) == "run_tool"
    assert route_after_run_tool(state(turns=[turn(i) for i in range(9)])) == "call_model"
    assert route_after_run_tool(state(turns=[turn(i) for i in range(10)])) == "force_answer"


def test_truncate() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("abcdef", 2) == "ab\n[... 4 of 6 characters cut ...]"
