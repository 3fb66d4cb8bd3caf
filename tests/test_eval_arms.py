"""An eval's arms: both action formats side by side and LangGraph's prebuilt agent as a
contender, on the same model and server; a result is never reused for another format."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph.app.eval import read_hotpotqa
from reactgraph.app.eval.arms import Arm, arm, arms_of, variants_of
from reactgraph.app.eval.prebuilt import Contender, recursion_limit
from reactgraph.app.eval.run import read_results, run_eval, thread_of
from reactgraph.app.flags import UsageError
from tests.fakes import (
    FakeOpenAIServer,
    ToolLog,
    call,
    colour_call_model,
    colour_call_responder,
    fake_model,
    scripted_recipe,
)
from tests.test_cli import cli
from tests.test_eval_run import HOTPOT, hotpot_eval

ARMS = ["transcript", "transcript:tool_calls", "prebuilt"]


def test_the_names_of_the_arms() -> None:
    assert arm("transcript") == Arm("transcript", "transcript", "text")
    assert arm("transcript:text") == arm("transcript")
    assert arm("notes:tool_calls") == Arm("notes:tool_calls", "notes", "tool_calls")
    assert arm("notes", "tool_calls").label == "notes:tool_calls"  # --action-format tool_calls
    assert arm("prebuilt").prebuilt and not arm("notes").prebuilt
    labels = [a.label for a in arms_of("transcript, transcript:text,prebuilt,notes:tool_calls")]
    assert labels == ["transcript", "prebuilt", "notes:tool_calls"]
    assert variants_of(arms_of("prebuilt")) == ["transcript"]
    for bad in ("nope", "transcript:json", "prebuilt:text", ""):
        with pytest.raises(UsageError, match="in --variants"):
            arms_of(bad)


def test_both_formats_and_the_prebuilt_agent_side_by_side(tmp_path: Path) -> None:
    items, _ = read_hotpotqa(HOTPOT)
    recipe = scripted_recipe(tmp_path / "runs.sqlite", colour_call_model)
    lines = list(run_eval(recipe, items, ARMS, tmp_path / "out", workers=1))
    assert sorted(line["variant"] for line in lines) == sorted(ARMS * 3)
    by = {(line["id"], line["variant"]): line for line in lines}
    for label in ARMS:
        assert by["5a8b57f25542995d1e6f1371", label]["answer"] == "blue"
        assert by["5a85ea095542994775f606a8", label]["answer"] == "unknown"
        assert all(by[i.id, label]["status"] == "answered" for i in items)
        assert all(by[i.id, label]["turns"] == 2 for i in items)  # a search, then the answer
        assert all(by[i.id, label]["prompt_tokens"] > 0 for i in items)
    assert {line["action_format"] for line in lines if line["variant"] != "transcript"} == {
        "tool_calls"
    }
    assert len({line["thread_id"] for line in lines}) == 9


def test_a_result_is_never_reused_for_another_format(tmp_path: Path) -> None:
    items, _ = read_hotpotqa(HOTPOT)
    recipe = scripted_recipe(tmp_path / "runs.sqlite", colour_call_model)
    starts: list[tuple[int, int]] = []

    def run(arms: list[str]) -> list[dict]:
        return list(
            run_eval(
                recipe,
                items,
                arms,
                tmp_path / "out",
                workers=1,
                on_start=lambda *c: starts.append(c),
            )
        )

    run(["transcript"])
    assert run(["transcript"]) == []  # the same arm: reused
    again = run(["transcript:tool_calls"])  # the same variant in the other format: run anew
    assert starts == [(3, 0, 0), (0, 3, 0), (3, 0, 0)] and len(again) == 3
    assert thread_of("transcript", items[0]) != thread_of("transcript:tool_calls", items[0])
    assert len(read_results(tmp_path / "out")) == 6


def test_the_prebuilt_contender_reads_as_a_variant_does() -> None:
    log = ToolLog()
    model = fake_model(*[call("echo", {"text": str(i)}, call_id=f"c{i}") for i in range(10)])
    contender = Contender(model, [log.echo()], InMemorySaver(), max_turns=2)
    config = {"configurable": {"thread_id": "p1"}}
    out = asyncio.run(contender.ainvoke({"question": "q"}, config))
    assert (out["status"], out["answer"]) == ("turn_limit", None)  # its own "need more steps"
    assert len(log.calls) == 2 and len(out["turns"]) == 3 == recursion_limit(2) // 2
    assert all(t["prompt_tokens"] > 0 for t in out["turns"])  # counted: the fake sends no usage
    snapshot = asyncio.run(contender.aget_state(config))
    assert snapshot.values == out and not snapshot.next


@pytest.mark.slow
def test_eval_runs_both_formats_and_the_prebuilt_agent_on_the_same_server(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = colour_call_responder
    out = tmp_path / "eval"
    run = cli(*hotpot_eval(openai_server, ",".join(ARMS), out, "--workers", "1"))
    assert run.returncode == 0, run.stderr
    lines = read_results(out)
    assert sorted((line["variant"], line["em"]) for line in lines) == sorted(
        [(label, 1.0) for label in ARMS] * 3
    )
    summary = (out / "summary.md").read_text()
    assert all(f"| {label} |" in summary for label in ARMS)
    with_tools = [r for r in openai_server.requests if r.get("tools")]
    assert {r.get("tool_choice") for r in with_tools} == {"auto"}  # both tool-calling arms
    assert len(with_tools) == 2 * 2 * 3  # two calls a question, two arms
