"""Each node body and decision alone, on hand-built states; the routers of the assembly."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from reactgraph.assembly import loop_middleware
from reactgraph.nodes.loop.acting import run_tool
from reactgraph.nodes.loop.control import parse_reply, repeats, start_run, turn_cap_reached
from reactgraph.nodes.loop.deps import make_deps
from reactgraph.nodes.loop.model import call_model
from reactgraph.nodes.loop.routing import (
    route_after_approve_action,
    route_after_parse_reply,
    route_after_step,
    route_after_turn,
)
from reactgraph.nodes.loop.transcript import View, render_prompt
from reactgraph.nodes.running.tool_runs import truncate
from reactgraph.nodes.vocabulary.effects import adrive, drive
from reactgraph.nodes.vocabulary.reducers import after
from reactgraph.nodes.vocabulary.run_settings import NotesSettings
from reactgraph.nodes.vocabulary.state import ModelReply, State, Turn
from reactgraph.settings import check_all
from reactgraph.variants import REGISTRY
from tests.fakes import ToolLog, action, answer, fake_model

SETTINGS = check_all("notes", REGISTRY["notes"].settings, {}, where="build")


def reply(text: str) -> ModelReply:
    return ModelReply(
        raw=text,
        text=text,
        prompt_tokens=10,
        completion_tokens=5,
        token_source="tiktoken",
        model_latency_s=0.01,
        message_id=None,
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


def state(**fields: Any) -> State:
    base: dict[str, Any] = {"question": "Q?", "settings": dict(SETTINGS), "turns": []}
    return State(**{**base, **fields})  # type: ignore[typeddict-item]


def parsed_action(name: str, tool_input: str) -> dict[str, Any]:
    return {
        "kind": "action",
        "thought": "t",
        "action": name,
        "action_input": tool_input,
        "answer": None,
        "error": None,
    }


@pytest.fixture
def deps():
    made = make_deps(fake_model(answer("ok")), [ToolLog().echo()], NotesSettings.of(SETTINGS))
    return replace(made, chain=loop_middleware("notes", made.model, ["echo", "other"]))


def test_render_prompt_starts_with_the_filled_prompt_then_the_turns(deps) -> None:
    messages = render_prompt(
        state(turns=[turn(1), turn(2)]), View(), deps.tool_descriptions, NotesSettings.of(SETTINGS)
    )
    assert isinstance(messages[0], HumanMessage)
    assert "echo[input]: echo the input" in messages[0].content
    assert messages[0].content.endswith("Question: Q?")
    assert [type(m) for m in messages[1:]] == [AIMessage, HumanMessage] * 2
    assert messages[2].content == "Observation: obs 1"


def test_render_prompt_windows_the_turns_only_when_the_view_says_so(deps) -> None:
    turns = [turn(i) for i in range(1, 6)]
    settings = NotesSettings.of({**SETTINGS, "window_turns": 2})
    windowed = render_prompt(
        state(turns=turns), View(window=True), deps.tool_descriptions, settings
    )
    text = "\n".join(str(m.content) for m in windowed)
    assert "obs 1" not in text and "obs 3" not in text and "obs 4" in text and "obs 5" in text
    whole = render_prompt(state(turns=turns), View(), deps.tool_descriptions, settings)
    assert "obs 1" in "\n".join(str(m.content) for m in whole)


def test_render_prompt_reuses_a_rendering_only_for_the_same_turns(deps) -> None:
    """The turns' messages of a run's last prompt are reused for the turns that are the same
    stored values; a turn replaced, removed or new is rendered anew."""
    settings = NotesSettings.of(SETTINGS)

    def texts(turns: list[Turn]) -> list[str]:
        messages = render_prompt(state(turns=turns), View(), deps.tool_descriptions, settings)
        return [str(m.content) for m in messages[1:]]

    turns = [turn(i) for i in range(1, 5)]
    assert texts(turns[:2])[-1] == "Observation: obs 2"
    assert texts(turns)[-1] == "Observation: obs 4"  # grown: the two new ones rendered
    replaced = [*turns[:2], {**turns[2], "observation": "changed"}, turns[3]]
    assert texts(replaced)[4:] == [
        turns[2]["text"],
        "Observation: changed",
        turns[3]["text"],
        "Observation: obs 4",
    ]
    assert texts(turns[:3]) == texts([turn(i) for i in range(1, 4)])  # shorter: cut, not kept
    assert len(texts(turns)) == 8 and texts([]) == []


def test_start_run_fixes_the_settings_and_resets(deps) -> None:
    settings = NotesSettings.of({**SETTINGS, "max_turns": 4})
    update = start_run(
        state(turns=[turn(1)], status="answered", run=2),
        {"configurable": {"thread_id": "abc"}},
        deps,
        settings,
    )
    assert update["settings"]["max_turns"] == 4
    assert update["thread_id"] == "abc" and update["run"] == 3
    assert update["status"] is None and update["turns"].value == []
    assert len(start_run(state(), {}, deps, NotesSettings.of(SETTINGS))["thread_id"]) == 32


def test_call_model_is_one_body_for_both_shells(deps) -> None:
    sync = drive(call_model(state(), {}, deps))
    model = fake_model(answer("ok"))
    async_deps = make_deps(model, [ToolLog().echo()], NotesSettings.of(SETTINGS))
    asynchronous = asyncio.run(adrive(call_model(state(), {}, async_deps)))
    for update in (sync, asynchronous):
        assert update["reply"]["text"] == answer("ok")
        assert update["reply"]["prompt_tokens"] > 100
    assert deps.model.stops == [["Observation:"]] and model.stops == [["Observation:"]]


def test_parse_reply_ends_on_an_answer(deps) -> None:
    update = parse_reply(state(reply=reply(answer("42"))), {}, deps)
    assert update["status"] == "answered" and update["answer"] == "42"
    assert update["turns"][0]["kind"] == "answer"


def test_parse_reply_detects_stuck(deps) -> None:
    previous = [turn(1, tool_input="same"), turn(2, tool_input="same")]
    update = parse_reply(state(turns=previous, reply=reply(action("echo", "same"))), {}, deps)
    assert update["status"] == "stuck"
    update = parse_reply(state(turns=previous[:1], reply=reply(action("echo", "same"))), {}, deps)
    assert "status" not in update


def test_the_same_unreadable_reply_again_and_again_is_stuck(deps) -> None:
    bad = {**turn(1), "kind": "invalid", "text": "Final Answer:", "action": None}
    twice = [bad, {**bad, "turn": 2}]
    assert "status" not in parse_reply(
        state(turns=twice[:1], reply=reply("Final Answer:")), {}, deps
    )
    assert (
        parse_reply(state(turns=twice, reply=reply("Final Answer:")), {}, deps)["status"] == "stuck"
    )


def test_two_empty_replies_in_a_row_are_stuck(deps) -> None:
    empty = {**turn(1), "kind": "invalid", "text": "", "action": None, "action_input": None}
    assert "status" not in parse_reply(state(reply=reply("")), {}, deps)
    assert parse_reply(state(turns=[empty], reply=reply("")), {}, deps)["status"] == "stuck"


def test_repeats_counts_only_the_trailing_identical_actions_up_to_the_limit() -> None:
    parsed = {"kind": "action", "action": "echo", "action_input": "a"}
    turns = [turn(1, tool_input="a"), turn(2, tool_input="b"), turn(3, tool_input="a")]
    assert repeats(turns, parsed, "", 3) == 2  # type: ignore[arg-type]
    same = [turn(i, tool_input="a") for i in range(1, 1000)]
    assert repeats(same, parsed, "", 3) == 3  # type: ignore[arg-type]


def test_run_tool_runs_the_action_and_records_the_turn(deps) -> None:
    body = run_tool(
        state(reply=reply("Action: echo[hi]"), parsed=parsed_action("echo", "hi")), {}, deps
    )
    (record,) = drive(body)["turns"]
    assert record["observation"] == "echo: hi" and record["turn"] == 1
    assert record["tool_latency_s"] is not None


def test_run_tool_turns_an_invalid_reply_into_its_correction(deps) -> None:
    parsed = {**parsed_action("x", "y"), "kind": "invalid", "error": "Unknown action 'x'."}
    update = drive(run_tool(state(reply=reply("Action: x[y]"), parsed=parsed), {}, deps))
    assert update["turns"][0]["observation"] == "Unknown action 'x'."
    assert update["turns"][0]["tool_latency_s"] is None


def test_routers_read_the_state_after_the_node(deps) -> None:
    actions = frozenset({"update_notes"})
    assert route_after_parse_reply(state(status="answered"), actions, deps) == "__end__"
    parsed = parsed_action("echo", "x")
    assert route_after_parse_reply(state(status=None, parsed=parsed), actions, deps) == "run_tool"
    notes = parsed_action("update_notes", "x")
    assert route_after_parse_reply(state(parsed=notes), actions, deps) == "update_notes"
    # A tool the run's approve setting names waits for a person; the others, and the
    # variant's own actions, do not.
    for names, to in ((("echo",), "approve_action"), (("all",), "approve_action")):
        approving = state(parsed=parsed, settings={**SETTINGS, "approve": names})
        assert route_after_parse_reply(approving, actions, deps) == to
    for names in ((), ("other",)):
        approving = state(parsed=parsed, settings={**SETTINGS, "approve": names})
        assert route_after_parse_reply(approving, actions, deps) == "run_tool"
    everything = state(parsed=notes, settings={**SETTINGS, "approve": ("all",)})
    assert route_after_parse_reply(everything, actions, deps) == "update_notes"
    for decision, to in (("approve", "run_tool"), ("edit", "run_tool"), ("reject", "call_model")):
        decided = {**parsed, "approval": {"decision": decision, "by": "p"}}
        assert (
            route_after_approve_action(state(parsed=decided), "stop_run", "call_model", deps) == to
        )
    nine = state(turns=[turn(i) for i in range(1, 10)], settings={**SETTINGS, "max_turns": 10})
    assert route_after_turn(nine, "force_answer", "call_model", deps) == "call_model"
    ten = after(nine, {"turns": [turn(10)]})
    assert turn_cap_reached(ten, deps.run_settings(ten)) and len(ten["turns"]) == 10
    assert ten["turns"][-1]["turn"] == 10
    assert route_after_turn(ten, "stop_run", "compact_history", deps) == "stop_run"
    assert route_after_step(state(status="context_exhausted"), "call_model") == "__end__"
    assert route_after_step(state(), "call_model") == "call_model"


def test_truncate() -> None:
    assert truncate("abc", 3) == "abc"
    assert truncate("abcdef", 2) == "ab\n[... 4 of 6 characters cut ...]"
