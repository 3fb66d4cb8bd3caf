"""Settings are declared once per variant and checked by the same code at build time and per
run; a run's context can never silently apply a setting the variant does not have."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import VARIANTS, RunContext, build_graph
from reactgraph.nodes.vocabulary.run_settings import RunSettings, knob
from reactgraph.settings import settings_of
from reactgraph.variants import REGISTRY
from tests.fakes import ToolLog, action, answer, fake_model


def graph(variant: str, **settings: object):
    extra = {"context_window": 100_000} if REGISTRY[variant].setting("context_window") else {}
    return build_graph(variant, model=fake_model(answer("ok")), tools=[], **extra, **settings)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Probe(RunSettings):
    share: float = knob(0.5, "s", above=0, maximum=1)


def test_a_setting_checks_type_and_range_the_same_way_everywhere() -> None:
    named = {s.name: s for s in settings_of(Probe, max_turns=10)}
    turns, share = named["max_turns"], named["share"]
    assert turns.check(3) == 3
    with pytest.raises(TypeError):
        turns.check("3")
    with pytest.raises(TypeError):
        turns.check(True)
    with pytest.raises(ValueError, match=">= 1"):
        turns.check(0)
    assert share.check(1) == 1.0
    for bad in (0, 1.5, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            share.check(bad)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_context_schema_is_the_variants_own_settings_with_the_built_values(
    variant: str,
) -> None:
    spec = REGISTRY[variant]
    built = graph(variant, max_turns=7)
    fields = {f.name: f for f in dataclasses.fields(built.context_schema)}
    assert set(fields) == {s.name for s in spec.settings if s.knob.per_run}
    assert fields["max_turns"].default == 7
    assert all(f.metadata["description"] for f in fields.values())
    schema = built.get_context_jsonschema()
    assert schema["properties"]["max_turns"]["default"] == 7
    for name in ("window_turns", "max_notes_chars", "context_window", "keep_turns"):
        assert (name in schema["properties"]) == (spec.setting(name) is not None)


def test_a_context_field_of_another_variant_raises_from_invoke_before_anything_is_stored() -> None:
    saver = InMemorySaver()
    transcript = build_graph(
        "transcript", model=fake_model(answer("ok")), tools=[], checkpointer=saver
    )
    config = {"configurable": {"thread_id": "t"}}
    for context in (RunContext(window_turns=1), {"window_turns": 1}):
        with pytest.raises(ValueError, match="window_turns do\\(es\\) not apply"):
            transcript.invoke({"question": "q"}, config, context=context)
    with pytest.raises(ValueError, match="window_turns"):
        asyncio.run(transcript.ainvoke({"question": "q"}, config, context={"window_turns": 1}))
    assert list(saver.list(config)) == []


@pytest.mark.parametrize(
    ("context", "error"),
    [
        ({"max_turns": 0}, ValueError),
        ({"max_turns": "5"}, TypeError),
        ({"tool_timeout": -1}, ValueError),
        ({"notes_dir": "/etc"}, ValueError),  # a path is never a run's choice
    ],
)
def test_a_bad_run_value_is_refused_like_a_bad_build_value(context: dict, error: type) -> None:
    notes = graph("notes")
    with pytest.raises(error):
        notes.invoke({"question": "q"}, context=context)
    build_settings = {k: v for k, v in context.items() if k != "notes_dir"}
    if build_settings:
        with pytest.raises(error):
            graph("notes", **build_settings)


def test_a_run_context_overrides_only_what_it_sets() -> None:
    model = fake_model(action("echo", "1"), answer("forced"))
    built = build_graph(
        "notes", model=model, tools=[ToolLog().echo()], max_turns=30, window_turns=5
    )
    out = built.invoke({"question": "q"}, context=RunContext(max_turns=1))
    assert out["settings"]["max_turns"] == 1 and out["settings"]["window_turns"] == 5
    assert out["status"] == "stopped_early"


def test_the_context_must_be_a_mapping_or_the_graphs_own_schema() -> None:
    transcript = graph("transcript")
    with pytest.raises(TypeError, match="context must be"):
        transcript.invoke({"question": "q"}, context=42)
    own = transcript.context_schema(max_turns=2)
    assert own.max_turns == 2 and own.tool_timeout == 10.0


@pytest.mark.parametrize("question", ["", "   ", None, "nul\x00byte", "lone \ud800 surrogate"])
def test_a_bad_question_is_refused_before_anything_is_stored(question: object) -> None:
    saver = InMemorySaver()
    transcript = build_graph(
        "transcript", model=fake_model(answer("ok")), tools=[], checkpointer=saver
    )
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ValueError, match="question"):
        transcript.invoke({"question": question}, config)
    assert list(saver.list(config)) == []


def test_default_caps_of_each_variant() -> None:
    caps = {name: REGISTRY[name].setting("max_turns").default for name in VARIANTS}
    assert caps == {"transcript": 10, "notes": 40, "compaction": 60, "notes_compaction": 60}


def test_the_graph_is_langgraphs_own_class_and_copies_keep_the_checks() -> None:
    """build_graph adopts LangGraph's compiled graph the way its own ``copy`` rebuilds one:
    this fails if that constructor changes."""
    from langgraph.graph.state import CompiledStateGraph

    from reactgraph import ReactGraph

    built = graph("transcript")
    assert isinstance(built, ReactGraph) and isinstance(built, CompiledStateGraph)
    copy = built.with_config({"tags": ["x"]})
    assert isinstance(copy, ReactGraph)
    with pytest.raises(ValueError, match="window_turns"):
        copy.invoke({"question": "q"}, context={"window_turns": 2})


UNSTORABLE = [
    ({"max_run_tokens": 2**64}, "max_run_tokens cannot be stored: it holds an integer outside"),
    ({"max_turns": 2**64}, "max_turns cannot be stored"),
    ({"max_turns": 2**63}, "max_turns cannot be stored"),
    ({"tool_call_limits": {"echo": 2**70}}, r"tool_call_limits\['echo'\] cannot be stored"),
    (
        {"answer_schema": {"type": "object", "properties": {"a\ud800": {"type": "string"}}}},
        "answer_schema cannot be stored: it holds a character U\\+D800 at position 1 in the key",
    ),
    ({"answer_schema": {"type": "string", "maxLength": 2**64}}, "answer_schema cannot be stored"),
    ({"instructions": "be\x00brief"}, "instructions cannot be stored: it holds a character U"),
    ({"approve": ["echo\udc80"]}, "approve cannot be stored"),
]


@pytest.mark.parametrize(("settings", "says"), UNSTORABLE)
def test_a_setting_no_checkpointer_can_store_is_refused_before_anything_is_stored(
    settings: dict, says: str
) -> None:
    """Values that pass their type and range but that msgpack or JSON cannot write (an integer
    of 2^63 or more, a lone surrogate, NUL) are a ValueError from the one check: at build time,
    and from a run's context under invoke and ainvoke, with nothing stored."""
    with pytest.raises(ValueError, match=says):
        build_graph(
            "transcript", model=fake_model(answer("ok")), tools=[ToolLog().echo()], **settings
        )
    saver = InMemorySaver()
    built = build_graph(
        "transcript", model=fake_model(answer("ok")), tools=[ToolLog().echo()], checkpointer=saver
    )
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ValueError, match=says):
        built.invoke({"question": "q"}, config, context=settings)
    with pytest.raises(ValueError, match=says):
        asyncio.run(built.ainvoke({"question": "q"}, config, context=settings))
    assert list(saver.list(config)) == []


def test_the_largest_storable_integer_is_taken_and_stored() -> None:
    saver = InMemorySaver()
    most = 2**63 - 1
    built = build_graph(
        "transcript",
        model=fake_model(answer("ok")),
        tools=[ToolLog().echo()],
        checkpointer=saver,
        max_run_tokens=most,
        tool_call_limits={"echo": most},
    )
    out = built.invoke({"question": "q"}, {"configurable": {"thread_id": "t"}})
    assert out["settings"]["max_run_tokens"] == most and out["status"] == "answered"
