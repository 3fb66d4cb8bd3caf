"""``constrained_decoding="gbnf"`` through the graphs: every model call of the text format
carries the step's grammar in the request body (llama.cpp's ``grammar``, vLLM's
``structured_outputs``), in every variant, under ``invoke`` and ``ainvoke``; the forced answer
carries the answer's alone; the ``tool_calls`` format binds its tools strict; a server that
rejects the field is warned of once and the run goes on unconstrained; a model that cannot carry
it is a ValueError. Against the local OpenAI-compatible test server (``tests/fakes.py``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel

from reactgraph import RunContext, build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling import constrained
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.tools import calculator, search_tools
from reactgraph.variants import REGISTRY, VARIANTS
from tests.fakes import (
    CONFIG,
    FakeOpenAIServer,
    Fault,
    Runner,
    answer,
    fake_model,
    seed_call_responder,
    seed_responder,
)
from tests.gbnf_reader import to_regex

GBNF = {"constrained_decoding": "gbnf"}
REJECTED = "Unrecognized request argument supplied: grammar"


def graph(server: FakeOpenAIServer, variant: str, **settings: Any) -> Any:
    model = chat_model("local-model", base_url=server.url, timeout=10, stream=False)
    model.extra_body = {"top_k": 5}  # the model's own body fields stay beside the grammar
    if REGISTRY[variant].setting("context_window"):
        settings.setdefault("context_window", 100_000)
    settings.setdefault("max_completion_tokens", 256)
    return build_graph(variant, model=model, tools=[*search_tools(), calculator], **settings)


def grammars(server: FakeOpenAIServer) -> list[str | None]:
    return [request.get("grammar") for request in server.requests]


def warnings_of(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and text in r.getMessage()
    ]


def test_the_setting_is_off_by_default_and_takes_gbnf() -> None:
    assert RunSettings().constrained_decoding == "off"
    for variant in VARIANTS:
        assert REGISTRY[variant].setting("constrained_decoding") is not None
    with pytest.raises(ValueError, match="constrained_decoding"):
        build_graph("transcript", model=fake_model(), tools=[], constrained_decoding="json")


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_call_carries_the_step_grammar_in_every_variant(
    openai_server: FakeOpenAIServer, variant: str, run: Runner
) -> None:
    openai_server.responder = seed_responder
    result = run(graph(openai_server, variant, **GBNF), {"question": "How many years?"}, CONFIG)
    assert result["status"] == "answered" and result["answer"] == "48"
    assert len(openai_server.requests) == 4
    for request in openai_server.requests:
        grammar = request["grammar"]
        assert request["structured_outputs"] == {"grammar": grammar}
        assert request["top_k"] == 5 and request["max_tokens"] == 256
        pattern = to_regex(grammar)
        for name in ("search", "lookup", "calculator"):
            assert pattern.fullmatch(f"Thought: t\nAction: {name}[x]")
        notes = pattern.fullmatch("Thought: t\nAction: update_notes[plan]")
        assert bool(notes) == variant.startswith("notes")
        assert pattern.fullmatch("Thought: t\nFinal Answer: 48")
    # The replies the server gave are what the grammar allows: none was corrected.
    assert all(turn["kind"] != "invalid" for turn in result["turns"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_off_sends_no_grammar(openai_server: FakeOpenAIServer, variant: str, run: Runner) -> None:
    openai_server.responder = seed_responder
    result = run(graph(openai_server, variant), {"question": "How many years?"}, CONFIG)
    assert result["answer"] == "48"
    for request in openai_server.requests:
        assert "grammar" not in request and "structured_outputs" not in request


@pytest.mark.parametrize("variant", ["transcript", "compaction"])
def test_the_forced_answer_s_grammar_is_the_answer_alone(
    openai_server: FakeOpenAIServer, variant: str, run: Runner
) -> None:
    openai_server.script.extend(["Thought: look.\nAction: search[Eiffel Tower]", answer("1889")])
    built = graph(openai_server, variant, max_turns=1, **GBNF)
    result = run(built, {"question": "When?"}, CONFIG)
    assert result["status"] == "turn_limit" and result["answer"] == "1889"
    step, forced = (to_regex(g or "") for g in grammars(openai_server))
    assert step.fullmatch("Thought: t\nAction: search[x]")
    assert not forced.fullmatch("Thought: t\nAction: search[x]")
    assert forced.fullmatch("Thought: t\nFinal Answer: 1889")


def test_a_run_s_context_turns_it_on(openai_server: FakeOpenAIServer, run: Runner) -> None:
    openai_server.responder = seed_responder
    built = graph(openai_server, "transcript")
    run(built, {"question": "q"}, CONFIG, context=RunContext(constrained_decoding="gbnf"))
    assert all(grammars(openai_server))
    openai_server.requests.clear()
    run(built, {"question": "q"}, {"configurable": {"thread_id": "t2"}})
    assert not any(grammars(openai_server))


def rejecting(body: dict[str, Any]) -> Any:
    """A server that refuses the grammar field, as OpenAI's does; else the seed."""
    return Fault(400, REJECTED) if "grammar" in body else seed_responder(body)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_server_that_rejects_the_grammar_is_warned_of_once_and_the_run_goes_on(
    openai_server: FakeOpenAIServer,
    variant: str,
    run: Runner,
    caplog: pytest.LogCaptureFixture,
) -> None:
    openai_server.responder = rejecting
    built = graph(openai_server, variant, model_retries=0, **GBNF)  # not a retry: none left
    with caplog.at_level(logging.WARNING):
        first = run(built, {"question": "q"}, CONFIG)
        second = run(built, {"question": "q"}, {"configurable": {"thread_id": "t2"}})
    assert first["answer"] == second["answer"] == "48"
    (warning,) = warnings_of(caplog, "rejected")
    assert openai_server.url in warning and "constrained_decoding='gbnf'" in warning
    assert REJECTED in warning and "unconstrained" in warning
    # Asked once with the grammar, then never again: the server is remembered.
    assert grammars(openai_server)[0] is not None
    assert not any(grammars(openai_server)[1:])
    assert len(openai_server.requests) == 1 + 4 + 4


def test_a_server_that_ignores_the_grammar_is_said_once(
    openai_server: FakeOpenAIServer, run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.responder = lambda body: "The answer is 48 years."
    built = graph(openai_server, "transcript", max_turns=3, **GBNF)
    with caplog.at_level(logging.WARNING):
        result = run(built, {"question": "q"}, CONFIG)
    assert result["status"] == "stuck"
    (warning,) = warnings_of(caplog, "does not seem to honour")
    assert openai_server.url in warning and "constrained_decoding='gbnf'" in warning


def test_another_400_is_not_taken_for_a_rejection(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.responder = lambda body: Fault(400, "the prompt is too long")
    built = graph(openai_server, "transcript", model_retries=0, **GBNF)
    with pytest.raises(Exception, match="too long"):
        run(built, {"question": "q"}, CONFIG)
    assert not constrained.refused(openai_server.url)


def strict_tools(body: dict[str, Any]) -> bool:
    functions = [tool["function"] for tool in body.get("tools") or []]
    return bool(functions) and all(f.get("strict") is True for f in functions)


@pytest.mark.parametrize("variant", VARIANTS)
def test_tool_calls_bind_every_tool_strict(
    openai_server: FakeOpenAIServer, variant: str, run: Runner
) -> None:
    openai_server.responder = seed_call_responder
    built = graph(openai_server, variant, action_format="tool_calls", **GBNF)
    result = run(built, {"question": "How many years?"}, CONFIG)
    assert result["answer"] == "48"
    for request in openai_server.requests:
        assert strict_tools(request)
        assert "grammar" not in request  # the grammar is the text format's
        names = {tool["function"]["name"] for tool in request["tools"]}
        assert ("update_notes" in names) == variant.startswith("notes")
        for tool in request["tools"]:
            assert tool["function"]["parameters"]["additionalProperties"] is False


def test_tool_calls_off_binds_no_tool_strict(openai_server: FakeOpenAIServer, run: Runner) -> None:
    openai_server.responder = seed_call_responder
    built = graph(openai_server, "transcript", action_format="tool_calls")
    assert run(built, {"question": "q"}, CONFIG)["answer"] == "48"
    assert not any(strict_tools(request) for request in openai_server.requests)


def test_a_server_that_rejects_strict_tools_is_called_without(
    openai_server: FakeOpenAIServer, run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    refusal = "Invalid schema for function 'lookup': strict mode requires every property required"
    openai_server.responder = lambda body: (
        Fault(400, refusal) if strict_tools(body) else seed_call_responder(body)
    )
    built = graph(openai_server, "transcript", action_format="tool_calls", model_retries=0, **GBNF)
    with caplog.at_level(logging.WARNING):
        assert run(built, {"question": "q"}, CONFIG)["answer"] == "48"
    (warning,) = warnings_of(caplog, "rejected")
    assert openai_server.url in warning and "constrained_decoding" in warning
    assert [strict_tools(r) for r in openai_server.requests] == [True] + [False] * 4


def test_tool_calls_with_a_model_that_cannot_bind_strict_tools_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"tool_calls.*strict.*FakeChatModel"):
        build_graph(
            "transcript",
            model=fake_model(),
            tools=[calculator],
            action_format="tool_calls",
            **GBNF,
        )
    built = build_graph("transcript", model=fake_model(answer("x")), tools=[calculator])
    context = RunContext(action_format="tool_calls", constrained_decoding="gbnf")
    with pytest.raises(ValueError, match="strict"):
        built.invoke({"question": "q"}, CONFIG, context=context)


def test_the_text_format_with_a_model_that_cannot_carry_a_grammar_is_a_value_error() -> None:
    model = GenericFakeChatModel(messages=iter([]))
    with pytest.raises(ValueError, match=r"grammar.*GenericFakeChatModel"):
        build_graph("transcript", model=model, tools=[calculator], **GBNF)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_scripted_model_gets_the_grammar_too(variant: str, run: Runner) -> None:
    model = fake_model(
        "Thought: look.\nAction: search[Eiffel Tower]", answer("1889"), report_usage=True
    )
    settings: dict[str, Any] = (
        {"context_window": 100_000} if REGISTRY[variant].setting("context_window") else {}
    )
    built = build_graph(variant, model=model, tools=search_tools(), **GBNF, **settings)
    assert run(built, {"question": "q"}, CONFIG)["answer"] == "1889"
    for call in model.calls:
        body = call["options"]["extra_body"]
        assert body["grammar"] == body["structured_outputs"]["grammar"]
        assert to_regex(body["grammar"]).fullmatch("Thought: t\nAction: lookup[x]")


@pytest.mark.parametrize("variant", ["transcript", "compaction"])
def test_an_answer_schema_shapes_the_grammars_answer_and_the_answer_is_typed(
    openai_server: FakeOpenAIServer, variant: str, run: Runner
) -> None:
    schema = {
        "type": "object",
        "properties": {"years": {"type": "integer"}},
        "required": ["years"],
        "additionalProperties": False,
    }
    openai_server.script.extend(
        ["Thought: look.\nAction: search[Eiffel Tower]", 'Thought: t\nFinal Answer: {"years": 48}']
    )
    built = graph(openai_server, variant, max_turns=1, answer_schema=schema, **GBNF)
    result = run(built, {"question": "How many years?"}, CONFIG)
    assert result["status"] == "turn_limit" and result["structured_answer"] == {"years": 48}
    step, forced = (to_regex(g or "") for g in grammars(openai_server))
    # The step's grammar and the forced answer's both take only an answer of the schema.
    for pattern in (step, forced):
        assert pattern.fullmatch('Thought: t\nFinal Answer: {"years": 48}')
        assert not pattern.fullmatch('Thought: t\nFinal Answer: {"years": "many"}')
        assert not pattern.fullmatch("Thought: t\nFinal Answer: 48 years")
    assert step.fullmatch("Thought: t\nAction: search[x]")
    assert not forced.fullmatch("Thought: t\nAction: search[x]")


def test_values_holding_observation_reach_the_model_escaped_and_come_back_as_they_are(
    run: Runner,
) -> None:
    """A tool's ``enum`` and a run's answer schema (its context) hold "Observation:": the
    grammar sent with each call writes them with the n escaped, so the server's stop sequence
    never cuts the reply; the tool gets, and the answer is, the value itself."""
    from langchain_core.tools import StructuredTool

    seen: list[str] = []
    mode = StructuredTool(
        name="mode",
        description="Set a mode.",
        args_schema={
            "type": "object",
            "properties": {"m": {"enum": ["Observation: on", "off"]}, "x": {"type": "integer"}},
            "required": ["m", "x"],
        },
        func=lambda m, x: seen.append(m) or "set",
    )
    model = fake_model(
        'Thought: set it.\nAction: mode[{"m": "Observatio\\u006e: on", "x": 1}]',
        'Thought: done.\nFinal Answer: "Observatio\\u006e: done"',
    )
    built = build_graph("transcript", model=model, tools=[mode], **GBNF)
    context = {"answer_schema": {"const": "Observation: done"}}
    out = run(built, {"question": "q"}, CONFIG, context=context)
    assert out["status"] == "answered" and out["structured_answer"] == "Observation: done"
    assert seen == ["Observation: on"]
    for call in model.calls:
        grammar = call["options"]["extra_body"]["grammar"]
        assert "observation:" not in grammar.lower()
        assert to_regex(grammar).fullmatch('Thought: t\nFinal Answer: "Observatio\\u006e: done"')
