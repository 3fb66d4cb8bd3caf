"""The model ladder through the graph (issue 54): every variant, both action formats, ``invoke``
and ``ainvoke``. A small model that raises, one that writes ``escalate_after`` unusable replies,
one that repeats an Action until the stuck rule: the next rung answers 48, and the small model
is not called again; a typed answer that fails its schema twice moves up; on the last rung the
run ends as it would without a ladder; an approval wait on the rung reached resumes on it; a
run's context names a shorter ladder, never a longer one; without ``escalate_to`` nothing
changes."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel

from reactgraph import VARIANTS, Rung, build_graph
from tests.fakes import FakeChatModel, Runner, ToolLog, action, answer, bad_call, call, echo_graph

FORMATS = ["text", "tool_calls"]
MATRIX = [(v, f) for v in VARIANTS for f in FORMATS]


def make(
    variant: str,
    action_format: str,
    small: list[Any],
    *rungs: list[Any],
    ladder: Any = None,
    **settings: Any,
) -> tuple[Any, FakeChatModel, list[FakeChatModel], ToolLog]:
    """A graph of ``variant`` on a small scripted model with the rungs' scripts above it."""
    model = FakeChatModel(replies=small, model_name="small")
    above = [FakeChatModel(replies=r, model_name=f"big{i}") for i, r in enumerate(rungs, 1)]
    escalate_to = ladder if ladder is not None else (above or None)
    graph, log = echo_graph(
        variant, action_format, model, escalate_to=escalate_to, model_retries=0, **settings
    )
    return graph, model, above, log


def step(action_format: str, text: str) -> Any:
    return (
        call("echo", {"text": text}, "I should look.")
        if action_format == "tool_calls"
        else (action("echo", text))
    )


def final(action_format: str, text: str) -> Any:
    return AIMessage(text) if action_format == "tool_calls" else answer(text)


def unusable(action_format: str) -> Any:
    """A reply the loop cannot use: no Action and no answer; arguments that cannot be read."""
    if action_format == "tool_calls":
        return bad_call("echo", "{not json")
    return "I am not sure what to do here."


def down(messages: Any) -> str:
    raise ValueError("the small model is down")


SMALL = {
    "fault": lambda f: [down],
    "unusable": lambda f: [unusable(f), unusable(f)],
    "stuck": lambda f: [step(f, "same")] * 3,
}


def year_then_48(action_format: str) -> list[Any]:
    """The next rung's replies: it looks the year up (``echo[year]``), then answers 48."""
    return [step(action_format, "year"), final(action_format, "48")]


@pytest.mark.parametrize("why", sorted(SMALL))
@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_the_next_rung_answers_and_the_small_model_is_not_called_again(
    variant: str, action_format: str, why: str, run: Runner
) -> None:
    big = year_then_48(action_format)
    graph, small, (rung,), _ = make(variant, action_format, SMALL[why](action_format), big)
    out = run(graph, {"question": "How many years?"})
    assert out["status"] == "answered" and out["answer"] == "48"
    assert len(small.calls) == len(SMALL[why](action_format))  # never called again
    assert len(rung.calls) == 2
    assert out["rung"] == 1
    (move,) = out["escalations"]
    assert move["reason"] == why and (move["from_model"], move["to_model"]) == ("small", "big1")
    assert move["rung"] == 1 and move["turn"] == len(small.calls) - (why == "fault")
    # Each turn names its model; the new model's turns follow the small one's.
    models = [t["model"] for t in out["turns"]]
    assert models == sorted(models, key=lambda m: m != "small") and models[-1] == "big1"
    assert models.count("big1") == 2
    assert all(t["kind"] != "stuck" for t in out["turns"])
    # The usage is split by model, and the split adds up to the whole.
    split = out["usage"]["by_model"]
    assert split["big1"]["calls"] == 2
    assert sum(e["prompt_tokens"] for e in split.values()) == out["usage"]["prompt_tokens"]
    assert sum(e["completion_tokens"] for e in split.values()) == out["usage"]["completion_tokens"]
    if why == "fault":
        assert "small" not in split  # its server answered nothing: billed nothing
        assert "ValueError: the small model is down" in move["detail"]
    else:
        assert split["small"]["calls"] == len(small.calls)
    # The new model saw the run's prompt, not a restart: the small model's turns are in it,
    # with their Observations (the corrections, or the repeated Action's result).
    if why != "fault":
        assert out["turns"][0]["observation"] in rung.prompts[0]
        assert len(rung.prompts[0]) > len(small.prompts[0])


@pytest.mark.parametrize("action_format", FORMATS)
def test_the_corrective_observations_go_up_with_the_run(action_format: str, run: Runner) -> None:
    small = SMALL["unusable"](action_format)
    graph, _, (rung,), _ = make("transcript", action_format, small, [final(action_format, "48")])
    out = run(graph, {"question": "How many years?"})
    assert out["answer"] == "48"
    corrections = [t["observation"] for t in out["turns"][:2]]
    assert all(corrections) and all(c in rung.prompts[0] for c in corrections)


class Years(BaseModel):
    years: int


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_a_typed_answer_that_fails_its_schema_twice_moves_up(
    variant: str, action_format: str, run: Runner
) -> None:
    wrong = [final(action_format, '{"years": "many"}'), final(action_format, '{"years": "lots"}')]
    graph, small, (rung,), _ = make(
        variant,
        action_format,
        wrong,
        [final(action_format, '{"years": 48}')],
        response_format=Years,
    )
    out = run(graph, {"question": "How many years?"})
    assert out["status"] == "answered" and out["structured_answer"] == {"years": 48}
    assert len(small.calls) == 2 and len(rung.calls) == 1
    assert [e["reason"] for e in out["escalations"]] == ["unusable"]


@pytest.mark.parametrize("action_format", FORMATS)
def test_escalate_after_is_how_many_in_a_row(action_format: str, run: Runner) -> None:
    def unusable_n(n: int) -> Any:  # different each time: no stuck rule
        return bad_call("echo", "{" * n) if action_format == "tool_calls" else f"Hmm {n}."

    small = [unusable_n(1), step(action_format, "a"), unusable_n(2), unusable_n(3), unusable_n(4)]
    graph, model, (rung,), _ = make(
        "transcript", action_format, small, [final(action_format, "48")], escalate_after=3
    )
    out = run(graph, {"question": "q"})
    assert out["answer"] == "48" and len(model.calls) == 5 and len(rung.calls) == 1
    assert out["escalations"][0]["turn"] == 5


@pytest.mark.parametrize("action_format", FORMATS)
def test_two_rungs_and_the_last_rung_behaves_as_without_a_ladder(
    action_format: str, run: Runner
) -> None:
    repeat = [step(action_format, "same")] * 3
    graph, small, (first, last), _ = make(
        "transcript", action_format, [down], [unusable(action_format)] * 2, repeat
    )
    out = run(graph, {"question": "q"})
    # fault -> big1; two unusable -> big2; big2 repeats itself: on the last rung, stuck.
    assert out["status"] == "stuck"
    assert [e["reason"] for e in out["escalations"]] == ["fault", "unusable"]
    assert out["rung"] == 2 and len(small.calls) == 1
    assert len(first.calls) == 2 and len(last.calls) == 3
    assert out["turns"][-1]["kind"] == "stuck" and out["turns"][-1]["model"] == "big2"


@pytest.mark.parametrize("action_format", FORMATS)
def test_a_fault_on_the_last_rung_stops_the_run_as_today(action_format: str, run: Runner) -> None:
    graph, small, (rung,), _ = make("transcript", action_format, [down], [down])
    with pytest.raises(ValueError, match="the small model is down"):
        run(graph, {"question": "q"})
    assert len(small.calls) == 1 and len(rung.calls) == 1


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_without_escalate_to_nothing_changes(variant: str, action_format: str, run: Runner) -> None:
    graph, small, _, _ = make(variant, action_format, [unusable(action_format)] * 3)
    out = run(graph, {"question": "q"})
    assert out["status"] == "stuck" and len(small.calls) == 3
    assert out.get("rung", 0) == 0 and not out.get("escalations")
    assert "by_model" not in out["usage"]
    assert all("model" not in t for t in out["turns"])
    graph, small, _, _ = make(variant, action_format, [down])
    with pytest.raises(ValueError, match="the small model is down"):
        run(graph, {"question": "q"})


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_an_approval_wait_after_moving_up_resumes_on_the_rung_reached(
    variant: str, action_format: str, run: Runner
) -> None:
    graph, small, (rung,), log = make(
        variant,
        action_format,
        SMALL["unusable"](action_format),
        year_then_48(action_format),
        approve=["echo"],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t1"}}
    waiting = run(graph, {"question": "q"}, config)
    assert waiting.get("__interrupt__") and log.calls == []
    assert graph.get_state(config).values["rung"] == 1  # the rung is in the checkpoint
    out = run(graph, Command(resume={"type": "approve"}), config)
    assert out["status"] == "answered" and out["answer"] == "48"
    assert log.calls == [("echo", "year")]
    assert len(small.calls) == 2 and len(rung.calls) == 2


def test_a_resume_after_a_stop_goes_on_with_the_rung_reached(run: Runner) -> None:
    """A run stopped by a fault on its last rung (resumable), resumed: the reached rung is
    called again, not the small model."""
    late = [final("text", "48")]
    attempts: list[int] = []

    def flaky(messages: Any) -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("down for now")
        return late.pop()

    graph, small, _, _ = make(
        "transcript",
        "text",
        [unusable("text")] * 2,
        [flaky, flaky],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t2"}}
    with pytest.raises(ValueError, match="down for now"):
        run(graph, {"question": "q"}, config)
    assert graph.get_state(config).values["rung"] == 1
    out = run(graph, None, config)
    assert out["answer"] == "48" and len(small.calls) == 2 and len(attempts) == 2


def test_a_runs_context_names_a_shorter_ladder_never_a_longer_one(run: Runner) -> None:
    small = [unusable("text")] * 5
    graph, _, (first, _), _ = make(
        "transcript", "text", small, [final("text", "1")], [final("text", "2")]
    )
    out = run(graph, {"question": "q"}, context={"escalate_to": ["big2"]})
    assert out["answer"] == "2" and len(first.calls) == 0
    assert out["escalations"][0]["to_model"] == "big2"
    out = run(graph, {"question": "q"}, context={"escalate_to": "none"})
    assert out["status"] == "stuck" and not out.get("escalations")
    with pytest.raises(ValueError, match="never others"):
        run(graph, {"question": "q"}, context={"escalate_to": ["gpt-5"]})
    bare, _, _, _ = make("transcript", "text", [answer("x")])
    with pytest.raises(ValueError, match="built without escalate_to"):
        run(bare, {"question": "q"}, context={"escalate_to": ["big1"]})


def test_each_rung_is_priced_at_its_own_prices_and_budgets_count_every_rung(
    run: Runner,
) -> None:
    small = FakeChatModel(replies=[unusable("text")] * 2, model_name="small")
    big = FakeChatModel(replies=[final("text", "48")], model_name="big")
    graph = build_graph(
        "transcript",
        model=small,
        tools=[ToolLog().echo()],
        token_prices=(0.0, 0.0),
        escalate_to=[Rung(big, token_prices=(1_000_000.0, 2_000_000.0))],
    )
    out = run(graph, {"question": "q"})
    usage = out["usage"]
    split = usage["by_model"]
    assert split["small"]["cost"] == 0.0
    spent = split["big"]["prompt_tokens"] + 2 * split["big"]["completion_tokens"]
    assert split["big"]["cost"] == pytest.approx(spent)
    assert usage["cost"] == pytest.approx(spent)
    # A token budget counts every rung's calls: the big model's call spends it.
    small = FakeChatModel(replies=[unusable("text")] * 2, model_name="small")
    big = FakeChatModel(replies=[action("echo", "x"), final("text", "48")], model_name="big")
    graph = build_graph("transcript", model=small, tools=[ToolLog().echo()], escalate_to=[big])
    small_spent = split["small"]["prompt_tokens"] + split["small"]["completion_tokens"]
    out = run(graph, {"question": "q"}, context={"max_run_tokens": small_spent + 1})
    assert out["status"] == "budget_exhausted" and len(big.calls) == 1


def grammar_rung_graph(model: FakeChatModel) -> Any:
    """A text-format graph of ``model`` whose one rung is the same model with a grammar."""
    return build_graph(
        "transcript",
        model=model,
        tools=[ToolLog().echo()],
        escalate_to=[Rung(model, constrained_decoding="gbnf")],
    )


def test_a_rung_may_differ_in_settings_alone(run: Runner) -> None:
    """The same model, asked with a grammar on the second rung."""
    model = FakeChatModel(replies=[unusable("text")] * 2 + [final("text", "48")])
    out = run(grammar_rung_graph(model), {"question": "q"})
    assert out["answer"] == "48"
    assert [t["model"] for t in out["turns"]] == [
        "scripted",
        "scripted",
        "scripted (constrained_decoding=gbnf)",
    ]
    grammars = ["grammar" in str(c["options"].get("extra_body")) for c in model.calls]
    assert grammars == [False, False, True]


def test_a_fault_moves_up_to_a_rung_with_a_grammar_within_the_same_call(run: Runner) -> None:
    """The rung reached after a fault, in the same model call, is asked with its own grammar
    (the grammar's wrapper asks at each actual call, not once per call of the node)."""
    model = FakeChatModel(replies=[down, final("text", "48")])
    out = run(grammar_rung_graph(model), {"question": "q"})
    assert out["answer"] == "48"
    assert [e["reason"] for e in out["escalations"]] == ["fault"]
    grammars = ["grammar" in str(c["options"].get("extra_body")) for c in model.calls]
    assert grammars == [False, True]


@pytest.mark.parametrize("action_format", FORMATS)
def test_a_new_run_on_the_thread_starts_on_its_own_model(action_format: str, run: Runner) -> None:
    small = [unusable(action_format)] * 2 + [final(action_format, "small's")]
    graph, model, (rung,), _ = make(
        "transcript",
        action_format,
        small,
        [final(action_format, "48")],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t3"}}
    assert run(graph, {"question": "q1"}, config)["rung"] == 1
    out = run(graph, {"question": "q2"}, config)
    assert out["answer"] == "small's" and out["rung"] == 0 and out["escalations"] == []
    assert len(model.calls) == 3 and len(rung.calls) == 1
    assert [t["model"] for t in out["turns"]] == ["small"]
