"""Prompts a server's prefix cache can reuse (issue 56): between compactions, window steps and
note updates, each call's prompt is the previous call's with messages added at its end, in every
variant and both action formats; the notes' window moves ``window_step`` turns at once."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from reactgraph import REGISTRY, VARIANTS, RunContext, build_graph
from reactgraph.nodes.calling.tokens import estimate_tokens, message_text
from reactgraph.nodes.loop.transcript import window_start
from tests.fakes import Runner, ToolLog, action, answer, call, fake_model

TURNS = 14
SUMMARY = "## Goal\nEcho every number.\n## Facts found\n- echoes\n## Next step\nGo on."
FORMATS = ("text", "tool_calls")


def said(message: BaseMessage) -> str:
    """A message as the server sees it: its role, text and tool calls."""
    calls = [(c["name"], c["args"], c["id"]) for c in getattr(message, "tool_calls", None) or []]
    return json.dumps([message.type, message_text(message), calls])


def breaks(prompts: list[list[BaseMessage]]) -> list[int]:
    """The calls (0-based) whose prompt does not extend the previous call's."""
    found = []
    for index in range(1, len(prompts)):
        before, after = [said(m) for m in prompts[index - 1]], [said(m) for m in prompts[index]]
        if after[: len(before)] != before:
            found.append(index)
    return found


def step(i: int, action_format: str, text: str = "") -> Any:
    """Turn ``i``'s reply: an echo of ``i`` (padded by ``text``) in the format's words."""
    if action_format == "tool_calls":
        return call("echo", {"text": f"{i}{text}"}, f"step {i}", f"call-{i}")
    return action("echo", f"{i}{text}", thought=f"step {i}")


def notes_reply(action_format: str, text: str) -> Any:
    if action_format == "tool_calls":
        return call("update_notes", {"text": text}, "record", "call-notes")
    return f"Thought: record.\nAction: update_notes[{text}]"


def counted(messages: list[BaseMessage]) -> int:
    return sum(estimate_tokens(said(m)) for m in messages)


def built(variant: str, action_format: str, model: Any, tmp_path: Path, **settings: Any) -> Any:
    extra: dict[str, Any] = dict(settings)
    spec = REGISTRY[variant]
    if spec.setting("notes_dir"):
        extra["notes_dir"] = str(tmp_path / "notes")
    if spec.setting("context_window"):
        # The opening and a few turns of 300-character Observations fill it: a compaction every few
        # turns.
        extra.update(context_window=1000, token_counter=counted, keep_turns=1)
        extra["summarizer"] = fake_model(*[SUMMARY] * TURNS)
    return build_graph(
        variant,
        model=model,
        tools=[ToolLog().echo()],
        action_format=action_format,
        max_turns=TURNS + 2,
        **extra,
    )


def moves(turns: int, window_turns: int, window_step: int) -> list[int]:
    """The calls at which the window's start moves (call ``n`` sees ``n`` turns)."""
    starts = [window_start(n, window_turns, window_step) for n in range(turns + 1)]
    return [n for n in range(1, turns + 1) if starts[n] != starts[n - 1]]


@pytest.mark.parametrize("action_format", FORMATS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_prompts_only_grow_between_compactions_window_steps_and_note_updates(
    variant: str, action_format: str, tmp_path: Path, run: Runner
) -> None:
    notes = REGISTRY[variant].setting("window_step") is not None
    replies = [step(i, action_format, "-" * 300) for i in range(TURNS)]
    settings: dict[str, Any] = {}
    if notes:
        settings = {"window_turns": 3, "window_step": 3}
        replies[5] = notes_reply(action_format, "- [x] five steps done")
    model = fake_model(*replies, answer("done"))
    out = run(built(variant, action_format, model, tmp_path, **settings), {"question": "q"})
    assert out["status"] == "answered", out["status"]
    prompts = [c["messages"] for c in model.calls]
    assert len(prompts) == TURNS + 1
    expected: set[int] = set()
    compactions = out.get("compactions") or []
    if REGISTRY[variant].setting("context_window") is not None:
        assert compactions, "the test's context window is small enough to compact"
        expected |= {c["turn"] for c in compactions}  # the call after it sees the summary
    if notes:
        expected |= set(moves(TURNS, 3, 3))
        expected.add(6)  # the call after the note update
    assert set(breaks(prompts)) <= expected, (breaks(prompts), sorted(expected))
    if not compactions:
        assert breaks(prompts) == sorted(expected)


@pytest.mark.parametrize("action_format", FORMATS)
@pytest.mark.parametrize("variant", ["notes", "notes_compaction"])
@pytest.mark.parametrize("window_step", [1, 2, 4])
def test_the_window_keeps_between_window_turns_and_one_step_more(
    variant: str, action_format: str, window_step: int, tmp_path: Path, run: Runner
) -> None:
    model = fake_model(*[step(i, action_format) for i in range(TURNS)], answer("done"))
    graph = built(variant, action_format, model, tmp_path, window_turns=4, window_step=window_step)
    if variant == "notes_compaction":  # no compaction here: the window alone
        graph = build_graph(
            variant,
            model=model,
            tools=[ToolLog().echo()],
            action_format=action_format,
            max_turns=TURNS + 2,
            notes_dir=str(tmp_path / "notes"),
            context_window=1_000_000,
            window_turns=4,
            window_step=window_step,
        )
    out = run(graph, {"question": "q"})
    assert out["status"] == "answered"
    for n, messages in enumerate(c["messages"] for c in model.calls):
        text = "\n".join(map(message_text, messages))
        seen = sorted({int(i) for i in re.findall(r"step (\d+)\b", text)})
        shown = len(seen)
        if n < 4:
            assert shown == n
        else:
            assert 4 <= shown <= 4 + window_step - 1, (n, shown)
            assert seen == list(range(n - shown, n))  # the latest, in order
    assert breaks([c["messages"] for c in model.calls]) == moves(TURNS, 4, window_step)


def test_window_step_one_is_the_seed_window(tmp_path: Path, run: Runner) -> None:
    model = fake_model(*[step(i, "text") for i in range(12)], answer("done"))
    out = run(built("notes", "text", model, tmp_path), {"question": "q"})
    assert out["settings"]["window_step"] == 1
    last = "\n".join(map(message_text, model.calls[-1]["messages"]))
    assert sorted({int(i) for i in re.findall(r"step (\d+)\b", last)}) == list(range(4, 12))


def test_window_step_per_run_and_its_bounds(tmp_path: Path, run: Runner) -> None:
    model = fake_model(*[step(i, "text") for i in range(12)], answer("done"))
    graph = built("notes", "text", model, tmp_path, window_turns=4)
    out = run(graph, {"question": "q"}, context=RunContext(window_step=4))
    assert out["settings"]["window_step"] == 4
    assert breaks([c["messages"] for c in model.calls]) == moves(12, 4, 4)
    with pytest.raises(ValueError, match="window_step must be <= window_turns"):
        run(graph, {"question": "q"}, context={"window_step": 5})
    with pytest.raises(ValueError, match="window_step must be >= 1"):
        run(graph, {"question": "q"}, context={"window_step": 0})
    with pytest.raises(ValueError, match="window_step must be <= window_turns"):
        build_graph("notes", model=fake_model(), tools=[], window_step=9)
    with pytest.raises(ValueError, match="window_step do\\(es\\) not apply"):
        build_graph("transcript", model=fake_model(), tools=[], window_step=2)
    # A run that lowers window_turns below the built step is refused too.
    wide = built("notes", "text", fake_model(), tmp_path, window_turns=8, window_step=8)
    with pytest.raises(ValueError, match="window_step must be <= window_turns"):
        run(wide, {"question": "q"}, context={"window_turns": 4})


def test_the_command_line_takes_window_step_and_refuses_one_over_window_turns(
    tmp_path: Path,
) -> None:
    from tests.inprocess import run_main

    db = str(tmp_path / "runs.sqlite")
    refused = run_main("ask", "q", "--variant", "notes", "--window-step", "9", "--db", db)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "reactgraph: error: window_step must be <= window_turns (8), got 9"
    ]
    assert "--window-step" in run_main("ask", "--help").stdout
