"""Typed answers and the application's instructions through the graph: every variant, both
action formats, ``invoke`` and ``ainvoke``.

A pydantic model, a TypedDict and a JSON schema become the answer's schema; a matching answer is
``structured_answer`` (its JSON text ``answer``) with no extra model call; one that does not
match gets a corrective Observation naming the failure and the loop goes on (repeats are
stuck); at the cap the forced answer asks for the schema, and a typed answer comes back. The
``instructions`` are one block in every prompt of the run, the forced answer's and the
summaries' included, built or per run.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.calling.providers import ModelCallError
from reactgraph.nodes.calling.tokens import message_text
from reactgraph.nodes.vocabulary import prompts
from reactgraph.variants import REGISTRY
from tests.fakes import FakeChatModel, Runner, ToolLog, action, answer, call, echo_graph
from tests.test_typed_answer import Years, YearsDict

FORMATS = ["text", "tool_calls"]
MATRIX = [(v, f) for v in VARIANTS for f in FORMATS]
SUMMARY = "## Goal\nG\n## Next step\nGo on."
RULE = "Always answer in French, and prefer the echo tool."


YEARS_SCHEMA = {
    "type": "object",
    "properties": {"years": {"type": "integer"}, "first": {"type": "string"}},
    "required": ["years", "first"],
}


def make(
    variant: str, action_format: str, replies: list[Any], **settings: Any
) -> tuple[Any, FakeChatModel, ToolLog]:
    """A graph of ``variant`` in ``action_format`` over a scripted model and an echo tool."""
    model = FakeChatModel(replies=replies)
    graph, log = echo_graph(variant, action_format, model, **settings)
    return graph, model, log


def step(action_format: str, text: str) -> Any:
    """An echo Action in the format."""
    if action_format == "tool_calls":
        return call("echo", {"text": text}, "I should look.")
    return action("echo", text)


def final(action_format: str, text: str) -> Any:
    """A final answer in the format: the text format's label, a plain reply in tool_calls."""
    return AIMessage(text) if action_format == "tool_calls" else answer(text)


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
@pytest.mark.parametrize(
    "kind", [Years, YearsDict, YEARS_SCHEMA], ids=["pydantic", "typeddict", "schema"]
)
def test_an_invalid_answer_is_corrected_and_the_valid_one_is_the_structured_answer(
    variant: str, action_format: str, kind: Any, run: Runner
) -> None:
    replies = [
        step(action_format, "Eiffel"),
        final(action_format, '{"years": "forty-eight", "first": "Eiffel Tower"}'),
        final(action_format, 'Here it is:\n```json\n{"years": 48, "first": "Eiffel Tower"}\n```'),
    ]
    graph, model, log = make(variant, action_format, replies, response_format=kind)
    out = run(graph, {"question": "How many years?"})
    assert out["status"] == "answered"
    assert out["structured_answer"] == {"years": 48, "first": "Eiffel Tower"}
    assert json.loads(out["answer"]) == out["structured_answer"]
    assert len(model.calls) == 3  # no extra call for the valid answer
    assert log.calls == [("echo", "Eiffel")]
    kinds = [t["kind"] for t in out["turns"]]
    assert kinds == ["action", "invalid", "answer"]
    correction = out["turns"][1]["observation"]
    assert "$.years" in correction and "'forty-eight' is not of type 'integer'" in correction
    # The model read the correction, and every prompt showed the schema.
    assert correction in model.prompts[2]
    assert all('"years"' in p and "Answer format:" in p for p in model.prompts)


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_at_the_cap_the_forced_answer_asks_for_the_schema_and_is_typed(
    variant: str, action_format: str, run: Runner
) -> None:
    replies = [
        step(action_format, "a"),
        step(action_format, "b"),
        final(action_format, 'Final answer follows. {"years": 48, "first": "Eiffel Tower"} Done.'),
    ]
    graph, model, _ = make(variant, action_format, replies, response_format=Years, max_turns=2)
    if REGISTRY[variant].at_cap != "force_answer":
        pytest.skip(f"{variant} stops early at the cap, with no forced answer")
    out = run(graph, {"question": "How many years?"})
    assert out["status"] == "turn_limit"
    assert out["structured_answer"] == {"years": 48, "first": "Eiffel Tower"}
    assert json.loads(out["answer"]) == out["structured_answer"]
    last = message_text(model.calls[-1]["messages"][-1])
    assert last == prompts.FORCE_TYPED_ANSWER.format(kind="object")
    assert '"years"' in model.prompts[-1]


@pytest.mark.parametrize("action_format", FORMATS)
def test_a_forced_answer_that_does_not_match_has_no_structured_answer(
    action_format: str, run: Runner
) -> None:
    replies = [step(action_format, "a"), final(action_format, "forty-eight years")]
    graph, _, _ = make("transcript", action_format, replies, response_format=Years, max_turns=1)
    out = run(graph, {"question": "How many years?"})
    assert out["status"] == "turn_limit" and out["structured_answer"] is None
    assert out["answer"] == "forty-eight years"


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
def test_the_same_invalid_answer_again_and_again_is_stuck(
    variant: str, action_format: str, run: Runner
) -> None:
    replies = [final(action_format, '{"years": 48}')] * 3
    graph, model, _ = make(variant, action_format, replies, response_format=Years)
    out = run(graph, {"question": "How many years?"})
    assert out["status"] == "stuck" and out["structured_answer"] is None
    assert len(model.calls) == 3
    assert "'first' is a required property" in out["turns"][0]["observation"]


@pytest.mark.parametrize("action_format", FORMATS)
def test_a_per_run_schema_through_the_context(action_format: str, run: Runner) -> None:
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 2}
    replies = [final(action_format, "[1]"), final(action_format, "[1889, 1937]")]
    graph, model, _ = make("transcript", action_format, replies)
    out = run(graph, {"question": "Which years?"}, context={"answer_schema": schema})
    assert out["structured_answer"] == [1889, 1937] and out["answer"] == "[1889, 1937]"
    assert "should be non-empty" in out["turns"][0]["observation"] or (
        "is too short" in out["turns"][0]["observation"]
    )
    assert "one JSON value" in model.prompts[0]
    # Without the context, the same graph answers in text.
    graph2, _, _ = make("transcript", action_format, [final(action_format, "[1]")])
    plain = run(graph2, {"question": "Which years?"})
    assert plain["answer"] == "[1]" and plain.get("structured_answer") is None


def test_a_text_reply_that_is_only_json_is_the_answer(run: Runner) -> None:
    graph, _, _ = make("transcript", "text", ['{"years": 48, "first": "Eiffel Tower"}'])
    out = run(graph, {"question": "Q?"}, context={"answer_schema": YEARS_SCHEMA})
    assert out["status"] == "answered" and out["structured_answer"]["years"] == 48


def test_a_string_schema_takes_the_plain_answer_but_not_unlabelled_prose(run: Runner) -> None:
    graph, _, _ = make("transcript", "text", ["I should look it up.", answer("Paris")])
    out = run(graph, {"question": "Q?"}, context={"answer_schema": {"type": "string"}})
    assert out["structured_answer"] == "Paris" and out["answer"] == '"Paris"'
    assert out["turns"][0]["kind"] == "invalid"
    assert out["turns"][0]["observation"].startswith("Invalid format: no Action")


def test_a_typed_answer_is_checkpointed_resumed_and_reset_by_the_next_run(run: Runner) -> None:
    """A provider fault stops the run resumably; the resumed run's typed answer is stored in
    the checkpoint; the next run on the thread starts without it."""
    state = {"fail": True}

    def flaky(messages: list[BaseMessage]) -> str:
        if state.pop("fail", False):
            raise TimeoutError("injected timeout")
        return answer('{"years": 48, "first": "Eiffel Tower"}')

    replies = [action("echo", "x"), flaky, flaky, answer("no json here"), answer("none")]
    model = FakeChatModel(replies=replies)
    saver = InMemorySaver()
    graph = build_graph(
        "transcript",
        model=model,
        tools=[ToolLog().echo()],
        checkpointer=saver,
        response_format=Years,
        model_retries=0,
        retry_backoff_s=0,
    )
    config = {"configurable": {"thread_id": "typed"}}
    with pytest.raises(ModelCallError):
        run(graph, {"question": "How many years?"}, config)
    out = run(graph, None, config)
    assert out["structured_answer"] == {"years": 48, "first": "Eiffel Tower"}
    assert graph.get_state(config).values["structured_answer"]["years"] == 48
    again = run(graph, {"question": "And now?"}, config, context={"max_turns": 1})
    assert again["structured_answer"] is None and again["status"] != "answered"


def test_response_format_misuse_raises() -> None:
    model = FakeChatModel(replies=[])
    with pytest.raises(TypeError, match="response_format"):
        build_graph("transcript", model=model, tools=[], response_format=int)
    with pytest.raises(ValueError, match="not both"):
        build_graph(
            "transcript", model=model, tools=[], response_format=Years, answer_schema=YEARS_SCHEMA
        )
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        build_graph("transcript", model=model, tools=[], answer_schema={"type": 5})
    graph = build_graph("transcript", model=model, tools=[])
    with pytest.raises(ValueError, match="refer only to its own parts"):
        graph.invoke({"question": "q"}, context={"answer_schema": {"$ref": "http://x/y.json"}})
    assert model.calls == []


# --- The application's instructions ----------------------------------------------------------


def agent_prompts(model: FakeChatModel) -> list[str]:
    return [p for p in model.prompts if not p.startswith("You are compacting")]


def summary_prompts(model: FakeChatModel) -> list[str]:
    return [p for p in model.prompts if p.startswith("You are compacting")]


def in_order(prompt: str, *parts: str) -> bool:
    """Whether each part is in the prompt once, after the one before."""
    places = [prompt.find(part) for part in parts]
    return all(p >= 0 for p in places) and places == sorted(places)


def responder(action_format: str) -> Callable[[list[BaseMessage]], Any]:
    """A new echo step each turn; summarize when asked to."""
    steps = itertools.count()

    def reply(messages: list[BaseMessage]) -> Any:
        if message_text(messages[0]).startswith("You are compacting"):
            return SUMMARY
        return step(action_format, f"step {next(steps)}")

    return reply


@pytest.mark.parametrize(("variant", "action_format"), MATRIX)
@pytest.mark.parametrize("where", ["build", "run"])
def test_the_instructions_are_in_every_prompt_of_the_run(
    variant: str, action_format: str, where: str, run: Runner
) -> None:
    built: dict[str, Any] = {"max_turns": 6}
    if "token_counter" in REGISTRY[variant].objects:
        built.update(context_window=1500, compaction_threshold=0.6, keep_turns=1)
    if where == "build":
        built["instructions"] = RULE
    forced = final(action_format, "fini")
    replies = [responder(action_format)] * 12 + [forced] * 3
    graph, model, _ = make(variant, action_format, replies, **built)
    context = {"instructions": RULE} if where == "run" else None
    out = run(graph, {"question": "How many years?"}, context=context)
    assert out["status"] in ("turn_limit", "stopped_early")
    agents = agent_prompts(model)
    assert len(agents) >= 6
    block = prompts.INSTRUCTIONS_BLOCK.format(instructions=RULE)
    rules_end = "- Do not answer from memory when a tool can verify the fact."
    for prompt in agents:
        assert prompt.count(RULE) == 1
        assert in_order(prompt, rules_end, block, "Question: How many years?")
    if REGISTRY[variant].at_cap == "force_answer":
        assert prompts.FORCE_ANSWER in agents[-1]
    if "token_counter" in REGISTRY[variant].objects:
        summaries = summary_prompts(model)
        assert summaries, "the run was compacted"
        for prompt in summaries:
            assert prompt.count(RULE) == 1 and in_order(prompt, block, "The question")
    # The same graph without them: no block anywhere.
    graph2, model2, _ = make(
        variant,
        action_format,
        [responder(action_format)] * 12 + [forced] * 3,  # a responder of its own
        **{k: v for k, v in built.items() if k != "instructions"},
    )
    run(graph2, {"question": "How many years?"})
    assert not any("Instructions from the application" in p for p in model2.prompts)


def test_the_instructions_come_after_the_answer_format_and_both_before_the_question(
    run: Runner,
) -> None:
    graph, model, _ = make("transcript", "text", [answer('{"years": 1, "first": "x"}')])
    run(graph, {"question": "Q?"}, context={"instructions": RULE, "answer_schema": YEARS_SCHEMA})
    assert in_order(model.prompts[0], "Rules:", "Answer format:", RULE, "Question: Q?")


def test_instructions_are_bounded_and_checked() -> None:
    from reactgraph.nodes.vocabulary.run_settings import MAX_INSTRUCTIONS_CHARS

    model = FakeChatModel(replies=[])
    too_long = "x" * (MAX_INSTRUCTIONS_CHARS + 1)
    with pytest.raises(ValueError, match=f"at most {MAX_INSTRUCTIONS_CHARS} characters"):
        build_graph("transcript", model=model, tools=[], instructions=too_long)
    with pytest.raises(TypeError):
        build_graph("transcript", model=model, tools=[], instructions=5)
    graph = build_graph("transcript", model=model, tools=[])
    with pytest.raises(ValueError, match="at most"):
        graph.invoke({"question": "q"}, context={"instructions": too_long})
    build_graph("transcript", model=model, tools=[], instructions="y" * MAX_INSTRUCTIONS_CHARS)
    assert model.calls == []
    instructions = REGISTRY["transcript"].setting("instructions")
    assert instructions is not None
    assert str(MAX_INSTRUCTIONS_CHARS) in instructions.knob.description


def test_the_docs_examples_run_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "typed-answers.md").read_text("utf-8")
    examples = re.findall(r"^```python\n(.*?)^```$", page, re.S | re.M)
    assert len(examples) == 2
    for example in examples:
        exec(compile(example, "docs/typed-answers.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "48 ans" in printed and "{'years': 48, 'first': 'Eiffel Tower'}" in printed


BACKTRACKING = {
    "type": "object",
    "properties": {"word": {"type": "string", "pattern": "^(a+)+$"}},
    "required": ["word"],
}
HOURS = '{"word": "' + "a" * 40 + 'b"}'  # hours on Python's re; at once on RE2


@pytest.mark.parametrize("action_format", FORMATS)
@pytest.mark.parametrize("where", ["build", "context"])
def test_a_backtracking_pattern_checks_the_answer_at_once(
    action_format: str, where: str, run: Runner
) -> None:
    """A client's schema with ``^(a+)+$`` (built in, or sent in a run's context): the answer
    of 41 characters that took hours is corrected at once, and the next one is the answer."""
    replies = [final(action_format, HOURS), final(action_format, '{"word": "aaaa"}')]
    built = {"answer_schema": BACKTRACKING} if where == "build" else {}
    graph, _, _ = make("transcript", action_format, replies, **built)
    context = {"answer_schema": BACKTRACKING} if where == "context" else None
    out = run(graph, {"question": "Q?"}, {"configurable": {"thread_id": "t"}}, context=context)
    assert out["status"] == "answered" and out["structured_answer"] == {"word": "aaaa"}
    assert "does not match '^(a+)+$'" in out["turns"][0]["observation"]


REFUSED_SCHEMAS = [
    pytest.param({"$ref": "#"}, "loop back to the same value", id="self-ref"),
    pytest.param(
        {"$dynamicRef": "https://example.com/meta#meta"}, "refer only to its own", id="external"
    ),
    pytest.param(
        {"type": "string", "pattern": "(a)\\1"}, "cannot run in linear time", id="backreference"
    ),
    pytest.param(
        {
            "$defs": {
                **{f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(22)},
                "d22": {"type": "string"},
            },
            "$ref": "#/$defs/d0",
        },
        "subschemas applied to one value",
        id="doubling",
    ),
]


@pytest.mark.parametrize(("schema", "says"), REFUSED_SCHEMAS)
def test_a_schema_no_answer_can_pass_or_that_cannot_be_checked_in_time_is_refused(
    schema: dict[str, Any], says: str, run: Runner
) -> None:
    """At build time (``answer_schema``, ``response_format``) and from a run's context, before
    anything is stored."""
    with pytest.raises(ValueError, match=re.escape(says)):
        make("transcript", "text", [final("text", "x")], answer_schema=schema)
    with pytest.raises(ValueError, match=re.escape(says)):
        make("transcript", "text", [final("text", "x")], response_format=schema)
    saver = InMemorySaver()
    graph = build_graph(
        "transcript", model=FakeChatModel(replies=["x"]), tools=[], checkpointer=saver
    )
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ValueError, match=re.escape(says)):
        run(graph, {"question": "Q?"}, config, context={"answer_schema": schema})
    assert list(saver.list(config)) == []


@pytest.mark.parametrize("action_format", FORMATS)
def test_an_answer_no_checkpointer_can_store_is_corrected_and_the_run_kept(
    action_format: str, run: Runner
) -> None:
    """A whole number outside 64 bits in the model's JSON failed the run at its next write
    (``TypeError: Integer exceeds 64-bit range``): now a corrective Observation."""
    replies = [
        final(action_format, '{"years": 123456789012345678901234567890, "first": "x"}'),
        final(action_format, '{"years": 48, "first": "Eiffel\\u0000 Tower"}'),
    ]
    graph, _, _ = make(
        "transcript",
        action_format,
        replies,
        answer_schema=YEARS_SCHEMA,
        checkpointer=InMemorySaver(),
    )
    out = run(graph, {"question": "Q?"}, {"configurable": {"thread_id": "t"}})
    assert out["status"] == "answered"
    assert out["structured_answer"] == {"years": 48, "first": "Eiffel\ufffd Tower"}
    assert "outside 64 bits" in out["turns"][0]["observation"]
