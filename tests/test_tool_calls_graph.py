"""``action_format="tool_calls"``: the same loop with the Action read from the model's native
tool call, in every variant and through every exit, under ``invoke`` and ``ainvoke``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from reactgraph import RunContext, build_graph
from reactgraph.nodes.vocabulary import prompts
from reactgraph.tools import calculator, search_tools
from reactgraph.variants import REGISTRY, VARIANTS
from tests.fakes import (
    CONFIG,
    SEED_CALLS,
    SEED_TOOL_CALLS,
    FakeChatModel,
    Runner,
    StreamingFakeChatModel,
    TextOnlyModel,
    ToolLog,
    answer,
    big,
    call,
    fake_model,
    sleepy,
)

NATIVE = {"action_format": "tool_calls"}


def seed_tools(log: ToolLog) -> list[Any]:
    search, _lookup = search_tools()
    return [log.wrap(search), log.wrap(calculator)]


def answered(messages: Sequence[BaseMessage]) -> None:
    """Every tool call of every AI message is answered by a tool message with its id, before
    the next AI or human message (what providers insist on)."""
    waiting: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in waiting, (message.tool_call_id, waiting)
            waiting.remove(message.tool_call_id)
            continue
        assert not waiting, f"unanswered tool calls {waiting} before {message.type}"
        if isinstance(message, AIMessage):
            waiting = [c["id"] for c in message.tool_calls]
    assert not waiting


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_seed_as_tool_calls_in_every_variant(variant: str, run: Runner) -> None:
    log = ToolLog()
    model = fake_model(*SEED_CALLS)
    graph = build_graph(variant, model=model, tools=seed_tools(log), **NATIVE)
    out = run(graph, {"question": "How many years apart?"}, CONFIG)
    assert len(model.calls) == 4
    assert log.calls == SEED_TOOL_CALLS
    assert (out["answer"], out["status"]) == ("48", "answered")
    extra = [a.name for a in REGISTRY[variant].actions]
    assert model.bound == [["search", "calculator", *extra]] * 4  # every call, with its tools
    assert model.stops == [None] * 4  # no Observation: stop sequence for native calls
    first, second, third, last = out["turns"]
    assert (first["action"], first["action_input"]) == ("search", "Eiffel Tower")
    assert first["args"] == {"query": "Eiffel Tower"} and first["tool_call_id"] == "call-a"
    assert first["thought"] == "I need the Eiffel Tower's completion."
    assert "1889" in first["observation"] and "1937" in second["observation"]
    assert third["observation"] == "48" and third["kind"] == "action"
    assert last["kind"] == "answer" and last["observation"] is None
    for prompt in (c["messages"] for c in model.calls):
        assert isinstance(prompt[0], SystemMessage) and "tool_name[input]" not in prompt[0].content
        answered(prompt)
    assert "How many years apart?" in model.prompts[0]


def test_the_chat_view_is_the_same_loop(run: Runner) -> None:
    out = run(
        build_graph(
            "transcript", model=fake_model(*SEED_CALLS), tools=seed_tools(ToolLog()), **NATIVE
        ),
        {"question": "q"},
        CONFIG,
    )
    kinds = [(m.type, len(getattr(m, "tool_calls", []) or [])) for m in out["messages"]]
    assert kinds == [("human", 0), *[("ai", 1), ("tool", 0)] * 3, ("ai", 0)]
    answered(out["messages"])
    ai = out["messages"][1]
    assert ai.tool_calls[0]["name"] == "search" and ai.tool_calls[0]["args"] == {
        "query": "Eiffel Tower"
    }
    assert ai.content == "I need the Eiffel Tower's completion."
    ids = [m.id for m in out["messages"]]
    assert len(set(ids)) == len(ids)


def test_a_streaming_model_s_tool_call_chunks_are_gathered(run: Runner) -> None:
    log = ToolLog()
    model = StreamingFakeChatModel(replies=SEED_CALLS, report_usage=True, piece=3)
    graph = build_graph("notes", model=model, tools=seed_tools(log), **NATIVE)
    out = run(graph, {"question": "q"}, CONFIG)
    assert out["answer"] == "48" and len(log.calls) == 3
    assert [t["token_source"] for t in out["turns"]] == ["usage"] * 4


def test_a_model_that_cannot_bind_tools_is_refused_when_built_and_when_run() -> None:
    with pytest.raises(ValueError, match=r"needs a chat model that can bind tools.*TextOnlyModel"):
        build_graph("transcript", model=TextOnlyModel(), tools=[calculator], **NATIVE)
    graph = build_graph(
        "transcript", model=TextOnlyModel(replies=[answer("x")]), tools=[calculator]
    )
    with pytest.raises(ValueError, match="can bind tools"):
        graph.invoke({"question": "q"}, CONFIG, context=RunContext(action_format="tool_calls"))
    with pytest.raises(ValueError, match="action_format must be one of text, tool_calls"):
        build_graph("transcript", model=fake_model(), tools=[], action_format="json")


@pytest.mark.parametrize("variant", ["transcript", "compaction"])
def test_at_the_cap_the_forced_answer_is_asked_with_the_tools_bound(
    variant: str, run: Runner
) -> None:
    """Providers want the tools of a transcript that holds tool calls (Anthropic's and
    Bedrock's refuse one without): they stay bound, and only the answer is taken."""
    model = fake_model(
        call("echo", {"text": "1"}), call("echo", {"text": "2"}), AIMessage("It is 48.")
    )
    graph = build_graph(variant, model=model, tools=[ToolLog().echo()], max_turns=2, **NATIVE)
    out = run(graph, {"question": "q"}, CONFIG)
    assert (out["status"], out["answer"]) == ("turn_limit", "It is 48.")
    assert model.bound == [["echo"], ["echo"], ["echo"]]
    assert prompts.FORCE_ANSWER in model.prompts[-1]
    answered(model.calls[-1]["messages"])
    assert out["turns"][-1]["kind"] == "forced"


@pytest.mark.parametrize("variant", ["transcript", "compaction"])
def test_a_forced_reply_that_calls_a_tool_is_no_answer(variant: str, run: Runner) -> None:
    log = ToolLog()
    model = fake_model(
        call("echo", {"text": "1"}), call("echo", {"text": "2"}), call("echo", {"text": "3"}, "t3")
    )
    graph = build_graph(variant, model=model, tools=[log.echo()], max_turns=2, **NATIVE)
    out = run(graph, {"question": "q"}, CONFIG)
    assert (out["status"], out["answer"]) == ("turn_limit", None)
    forced = out["turns"][-1]
    assert (forced["kind"], forced["action"], forced["observation"]) == ("forced", "echo", None)
    assert log.calls == [("echo", "1"), ("echo", "2")]  # the forced call's Action never runs


@pytest.mark.parametrize("variant", ["notes", "notes_compaction"])
def test_at_the_cap_the_notes_variants_stop_early(variant: str, run: Runner) -> None:
    model = fake_model(*[call("echo", {"text": str(i)}) for i in range(3)])
    graph = build_graph(variant, model=model, tools=[ToolLog().echo()], max_turns=3, **NATIVE)
    out = run(graph, {"question": "q"}, CONFIG)
    assert (out["status"], len(model.calls)) == ("stopped_early", 3)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_same_call_three_times_is_stuck(variant: str, run: Runner) -> None:
    added: list[tuple[int, int]] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        added.append((a, b))
        return a + b

    replies = [
        call("add", {"a": 1, "b": 2}),
        call("add", {"b": 2, "a": 1}),  # the same arguments, in another order
        call("add", {"a": 1, "b": 2}),
        answer("never"),
    ]
    model = fake_model(*replies)
    out = run(build_graph(variant, model=model, tools=[add], **NATIVE), {"question": "q"}, CONFIG)
    assert out["status"] == "stuck" and len(model.calls) == 3
    assert added == [(1, 2), (1, 2)]  # the third repeat is not run
    assert out["turns"][-1]["kind"] == "stuck"


def test_other_arguments_are_not_a_repeat(run: Runner) -> None:
    replies = [
        call("echo", {"text": "a"}),
        call("echo", {"text": "a"}),
        call("echo", {"text": "b"}),
        call("echo", {"text": "a"}),
        answer("ok"),
    ]
    out = run(
        build_graph("transcript", model=fake_model(*replies), tools=[ToolLog().echo()], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert out["status"] == "answered"


def test_a_tool_timeout_and_a_long_result_are_observations(run: Runner) -> None:
    model = fake_model(call("sleepy", {"text": "x"}), call("big", {"text": "y"}), answer("done"))
    graph = build_graph(
        "transcript",
        model=model,
        tools=[sleepy, big],
        tool_timeout=0.2,
        max_observation_chars=100,
        **NATIVE,
    )
    out = run(graph, {"question": "q"}, CONFIG)
    timed_out, cut = out["turns"][0]["observation"], out["turns"][1]["observation"]
    assert timed_out == prompts.TOOL_TIMEOUT.format(name="sleepy", seconds=0.2)
    assert cut.startswith("x" * 100) and "4900 of 5000 characters cut" in cut
    tool_messages = [m for m in model.calls[2]["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == [timed_out, cut]  # as the model sees them
    assert out["answer"] == "done"


def counter(messages: Any) -> int:
    """100 tokens a message."""
    return 100 * len(messages)


def compacting(model: FakeChatModel, window: int, threshold: float, keep: int) -> Any:
    """The compaction variant calling an echo tool natively, 100 tokens a message."""
    return build_graph(
        "compaction",
        model=model,
        tools=[ToolLog().echo()],
        token_counter=counter,
        context_window=window,
        compaction_threshold=threshold,
        keep_turns=keep,
        **NATIVE,
    )


def test_compaction_summarizes_native_turns_with_their_actions(run: Runner) -> None:
    steps = iter(range(100))

    def reply(messages: list[BaseMessage]) -> Any:
        if str(messages[0].content).startswith("You are compacting"):
            return "## Goal\nG\n## Next step\nGo on."
        done = next(steps)
        return call("echo", {"text": f"step {done}"}) if done < 6 else answer("done")

    model = fake_model(*[reply] * 30)
    out = run(compacting(model, window=1000, threshold=0.7, keep=1), {"question": "q"}, CONFIG)
    assert out["status"] == "answered" and out["compactions"]
    request = next(p for p in model.prompts if p.startswith("You are compacting"))
    assert "Action: echo[step 0]\nObservation: echo: step 0" in request
    assert next(
        c for c in model.calls if c["options"].get("tools") is None
    )  # the summarizer: no tools
    for c in model.calls:
        answered(c["messages"])


def test_context_exhausted_in_the_tool_calls_format(run: Runner) -> None:
    model = fake_model(*[call("echo", {"text": str(i)}) for i in range(5)])
    out = run(compacting(model, window=500, threshold=0.9, keep=3), {"question": "q"}, CONFIG)
    assert out["status"] == "context_exhausted"


@pytest.mark.parametrize("variant", ["notes", "notes_compaction"])
def test_update_notes_is_a_tool(variant: str, run: Runner) -> None:
    notes = "plan: search the tower, then the bridge; subtract"
    replies = [
        call("update_notes", {"text": notes}, "Plan first."),
        call("update_notes", {"text": "x" * 50}),
        answer("48"),
    ]
    model = fake_model(*replies)
    graph = build_graph(
        variant, model=model, tools=[ToolLog().echo()], max_notes_chars=len(notes), **NATIVE
    )
    out = run(graph, {"question": "q"}, CONFIG)
    assert out["notes"] == notes and out["answer"] == "48"
    saved, refused, _ = out["turns"]
    assert (saved["action"], saved["action_input"], saved["observation"]) == (
        "update_notes",
        notes,
        prompts.NOTES_SAVED,
    )
    assert refused["observation"].startswith("Notes not saved: they are 50 characters")
    schema = next(
        s["function"]
        for s in model.calls[0]["options"]["tools"]
        if s["function"]["name"] == "update_notes"
    )
    assert f"at most {len(notes)} characters" in schema["description"]
    assert schema["parameters"]["required"] == ["text"]
    second = model.calls[1]["messages"]
    assert prompts.NOTES_BLOCK_TOOLS.format(notes=notes) in [m.content for m in second]
    resent = next(m for m in second if isinstance(m, AIMessage) and m.tool_calls)
    assert resent.tool_calls[0]["args"] == {"text": prompts.NOTES_ELIDED}  # not twice in view
    assert saved["args"] == {"text": notes}  # the record keeps the text
    chat = next(m for m in out["messages"] if getattr(m, "tool_calls", None))
    assert chat.tool_calls[0]["args"] == {"text": notes}  # the chat shows the notes saved


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (AIMessage("48"), "48"),
        (AIMessage("Thought: I now have enough information.\nFinal Answer: 48"), "48"),
        (AIMessage("Thought: done.\nFinish[48]"), "48"),
        (
            AIMessage("<think>hmm</think>The bridge opened 48 years later."),
            "The bridge opened 48 years later.",
        ),
    ],
)
def test_a_reply_without_a_tool_call_is_the_final_answer(
    reply: AIMessage, expected: str, run: Runner
) -> None:
    out = run(
        build_graph("transcript", model=fake_model(reply), tools=[calculator], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert (out["status"], out["answer"]) == ("answered", expected)


def test_an_empty_reply_is_corrected_and_two_are_stuck(run: Runner) -> None:
    model = fake_model(AIMessage(""), AIMessage("Final Answer:"), AIMessage("48"))
    out = run(
        build_graph("transcript", model=model, tools=[calculator], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert out["answer"] == "48"
    assert out["turns"][0]["observation"] == prompts.EMPTY_REPLY_TOOLS.format(valid="calculator")
    assert out["turns"][1]["observation"] == prompts.EMPTY_ANSWER
    model = fake_model(AIMessage(""), AIMessage(""), AIMessage("never"))
    out = run(
        build_graph("transcript", model=model, tools=[calculator], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert out["status"] == "stuck" and len(model.calls) == 2


def test_a_tool_call_wins_over_a_final_answer_in_its_text(run: Runner) -> None:
    reply = call("calculator", {"expression": "1937-1889"}, "Final Answer: maybe 50")
    out = run(
        build_graph(
            "transcript", model=fake_model(reply, AIMessage("48")), tools=[calculator], **NATIVE
        ),
        {"question": "q"},
        CONFIG,
    )
    assert out["turns"][0]["observation"] == "48" and out["answer"] == "48"


def test_a_text_model_s_turns_are_untouched_by_the_format(run: Runner) -> None:
    """A graph built for tool calls, run with action_format text: the seed's text prompt."""
    model = fake_model("Action: calculator[1937-1889]", "Final Answer: 48")
    graph = build_graph("transcript", model=model, tools=[calculator], **NATIVE)
    out = run(graph, {"question": "q"}, CONFIG, context={"action_format": "text"})
    assert out["answer"] == "48" and model.bound == [[], []]
    assert "Action: tool_name[input]" in model.prompts[0] and "tool_calls" not in out["turns"][0]


def test_a_fake_chat_model_records_bound_tools() -> None:
    model = FakeChatModel(replies=["x"])
    model.bind_tools([calculator], tool_choice="auto").invoke("hi")
    assert model.bound == [["calculator"]]
    assert model.calls[0]["options"]["tool_choice"] == "auto"


class ToolCallingGenericFake(GenericFakeChatModel):
    """langchain-core's own fake, made to take tools, as a user's test would make it."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_seed_with_langchain_cores_generic_fake(variant: str, run: Runner) -> None:
    """Its stream carries the text alone, without the tool calls: it is called plain."""
    log = ToolLog()
    model = ToolCallingGenericFake(messages=iter(SEED_CALLS))
    graph = build_graph(variant, model=model, tools=seed_tools(log), **NATIVE)
    out = run(graph, {"question": "How many years apart?"}, CONFIG)
    assert (out["status"], out["answer"]) == ("answered", "48")
    assert [c[0] for c in log.calls] == ["search", "search", "calculator"]
