"""OpenTelemetry traces (``reactgraph.nodes.loop.middleware.tracing``) read back with the SDK's
in-memory exporter and metric reader: the span tree of the seed in every variant and both formats,
the attributes and events of each exit, and what stays off the spans."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.loop.middleware import spans as span_module
from reactgraph.nodes.loop.middleware import tracing
from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES, DEMO_TOOL_CALLS
from reactgraph.tools import default_tools
from tests.fakes import Runner, ToolLog, action, answer, explode, fake_model, sleepy

CONFIG = {"configurable": {"thread_id": "thread-1"}}
# The compaction variants' window: the seed never comes near it.
WINDOW = {"context_window": 100_000}


@pytest.fixture(scope="module")
def exported() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader]]:
    """The process's tracer and meter providers for this module, then none again (so the other
    tests in this worker run untraced, as without a provider)."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    trace._TRACER_PROVIDER_SET_ONCE._done = False  # type: ignore[attr-defined]
    trace.set_tracer_provider(provider)
    metrics._internal._METER_PROVIDER_SET_ONCE._done = False  # type: ignore[attr-defined]
    metrics.set_meter_provider(meters)
    yield spans, reader
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER_SET_ONCE._done = False  # type: ignore[attr-defined]
    metrics._internal._METER_PROVIDER = None  # type: ignore[attr-defined]
    metrics._internal._METER_PROVIDER_SET_ONCE._done = False  # type: ignore[attr-defined]
    provider.shutdown()
    meters.shutdown()


@pytest.fixture
def spans(exported: tuple[InMemorySpanExporter, Any]) -> InMemorySpanExporter:
    exported[0].clear()
    return exported[0]


def echoing(variant: str, *replies: Any, **settings: Any) -> Any:
    """A graph of ``variant`` over a model of ``replies`` and an echo tool (a compaction
    variant in a 100,000-token window)."""
    extra = WINDOW if "compaction" in variant else {}
    model = fake_model(*replies)
    return build_graph(variant, model=model, tools=[ToolLog().echo()], **extra, **settings)


def seed_graph(variant: str, action_format: str, **more: Any) -> Any:
    replies = DEMO_TOOL_CALLS if action_format == "tool_calls" else DEMO_REPLIES
    extra = WINDOW if "compaction" in variant else {}
    return build_graph(
        variant,
        model=fake_model(*replies),
        tools=default_tools(),
        action_format=action_format,
        **extra,
        **more,
    )


def named(spans: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name.startswith(prefix)]


def children(spans: InMemorySpanExporter, parent: ReadableSpan) -> list[ReadableSpan]:
    own = parent.context.span_id
    found = [s for s in spans.get_finished_spans() if s.parent and s.parent.span_id == own]
    return sorted(found, key=lambda s: s.start_time or 0)


def run_span(spans: InMemorySpanExporter) -> ReadableSpan:
    (found,) = named(spans, "invoke_agent")
    return found


def events(span: ReadableSpan, name: str) -> list[Any]:
    return [e for e in span.events if e.name == name]


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_seed_is_one_trace_of_a_run_its_turns_and_their_calls(
    run: Runner, spans: InMemorySpanExporter, variant: str, action_format: str
) -> None:
    out = run(seed_graph(variant, action_format), {"question": DEMO_QUESTION}, CONFIG)
    assert (out["status"], out["answer"]) == ("answered", "48")
    root = run_span(spans)
    assert root.name == f"invoke_agent {variant}" and root.parent is None
    attributes = root.attributes or {}
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == variant
    assert attributes["gen_ai.conversation.id"] == "thread-1"
    assert attributes["reactgraph.status"] == "answered"
    assert attributes["reactgraph.turns"] == 4
    assert attributes["reactgraph.action_format"] == action_format
    assert attributes["gen_ai.usage.input_tokens"] == sum(t["prompt_tokens"] for t in out["turns"])
    assert attributes["gen_ai.usage.output_tokens"] == sum(
        t["completion_tokens"] for t in out["turns"]
    )
    assert out["trace"]["traceparent"].split("-")[1] == f"{root.context.trace_id:032x}"
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {root.context.trace_id}

    turns = children(spans, root)
    assert [s.name for s in turns] == [f"reactgraph.turn {n}" for n in (1, 2, 3, 4)]
    assert [(s.attributes or {})["reactgraph.turn.kind"] for s in turns] == [
        "action",
        "action",
        "action",
        "answer",
    ]
    tools = []
    for turn_span, turn in zip(turns, out["turns"], strict=True):
        calls = children(spans, turn_span)
        chat = calls[0]
        assert chat.name == "chat scripted" and chat.kind == trace.SpanKind.CLIENT
        assert (chat.attributes or {})["gen_ai.request.model"] == "scripted"
        assert (chat.attributes or {})["gen_ai.usage.input_tokens"] == turn["prompt_tokens"]
        assert (chat.attributes or {})["gen_ai.usage.output_tokens"] == turn["completion_tokens"]
        assert (chat.attributes or {})["reactgraph.kind"] == "turn"
        own = turn_span.attributes or {}
        assert own["gen_ai.usage.input_tokens"] == turn["prompt_tokens"]
        assert own["reactgraph.token_source"] == turn["token_source"]
        assert own["reactgraph.model_latency_s"] == turn["model_latency_s"]
        for call in calls[1:]:
            tools.append(call)
            assert (call.attributes or {})["gen_ai.tool.call.id"] == f"thread-1/1/{turn['turn']}"
            assert call.status.status_code == StatusCode.UNSET
        assert turn_span.start_time <= chat.start_time <= chat.end_time <= turn_span.end_time
    assert [s.name for s in tools] == [
        "execute_tool search",
        "execute_tool search",
        "execute_tool calculator",
    ]
    assert [(s.attributes or {})["gen_ai.tool.name"] for s in tools] == [
        "search",
        "search",
        "calculator",
    ]
    # Off by default: no prompt, reply or Observation on any span.
    for span in spans.get_finished_spans():
        texts = [v for v in (span.attributes or {}).values() if isinstance(v, str)]
        assert not any("Eiffel" in t or "1889" in t or t == "48" for t in texts), span.name
        assert not any(
            k.endswith(("messages", "arguments", "result")) for k in span.attributes or {}
        )


def test_the_genai_client_metrics_are_recorded(
    exported: tuple[InMemorySpanExporter, InMemoryMetricReader], spans: InMemorySpanExporter
) -> None:
    reader = exported[1]

    def points() -> dict[str, Any]:
        data = reader.get_metrics_data()
        found: dict[str, Any] = {}
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        key = (metric.name, metric.unit, point.attributes.get("gen_ai.token.type"))
                        found[key] = found.get(key, 0) + point.count
        return found

    before = points()  # the metrics are cumulative: what earlier tests left
    build_graph("transcript", model=fake_model(*DEMO_REPLIES), tools=default_tools()).invoke(
        {"question": DEMO_QUESTION}
    )
    after = points()
    grown = {key: after[key] - before.get(key, 0) for key in after}
    assert grown[("gen_ai.client.token.usage", "{token}", "input")] == 4
    assert grown[("gen_ai.client.token.usage", "{token}", "output")] == 4
    assert grown[("gen_ai.client.operation.duration", "s", None)] == 4


def test_content_goes_on_the_spans_only_when_opted_in(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(span_module.CAPTURE_ENV, "true")
    build_graph("transcript", model=fake_model(*DEMO_REPLIES), tools=default_tools()).invoke(
        {"question": DEMO_QUESTION}
    )
    chat = named(spans, "chat")[0]
    assert "Eiffel" in (chat.attributes or {})["gen_ai.input.messages"]
    assert "search[Eiffel Tower]" in (chat.attributes or {})["gen_ai.output.messages"]
    tool_span = named(spans, "execute_tool")[0]
    assert (tool_span.attributes or {})["gen_ai.tool.call.arguments"] == "Eiffel Tower"
    assert "1889" in (tool_span.attributes or {})["gen_ai.tool.call.result"]
    assert (run_span(spans).attributes or {})["reactgraph.answer"] == "48"


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_stuck_run_has_the_stuck_event(
    run: Runner, spans: InMemorySpanExporter, variant: str
) -> None:
    graph = echoing(variant, *[action("echo", "same")] * 3)
    out = run(graph, {"question": "q"})
    assert out["status"] == "stuck"
    root = run_span(spans)
    assert (root.attributes or {})["reactgraph.status"] == "stuck"
    (stuck,) = events(root, tracing.STUCK)
    assert stuck.attributes["reactgraph.turn"] == 3
    assert [(s.attributes or {})["reactgraph.turn.kind"] for s in children(spans, root)] == [
        "action",
        "action",
        "stuck",
    ]


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_a_timed_out_tool_ends_its_span_in_error_at_the_timeout(
    run: Runner, spans: InMemorySpanExporter, action_format: str
) -> None:
    first = (
        DEMO_TOOL_CALLS[0].model_copy(
            update={
                "tool_calls": [
                    {**DEMO_TOOL_CALLS[0].tool_calls[0], "name": "sleepy", "args": {"text": "x"}}
                ]
            }
        )
        if action_format == "tool_calls"
        else action("sleepy", "x")
    )
    graph = build_graph(
        "transcript",
        model=fake_model(first, answer("gave up")),
        tools=[sleepy],
        tool_timeout=0.2,
        action_format=action_format,
    )
    out = run(graph, {"question": "q"})
    assert out["status"] == "answered" and "timed out" in out["turns"][0]["observation"]
    (span,) = named(spans, "execute_tool")
    assert span.name == "execute_tool sleepy"
    assert span.status.status_code == StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "timeout"
    assert (span.attributes or {})["reactgraph.tool.timed_out"] is True
    assert span.end_time - span.start_time == int(0.2 * 1e9)  # at the timeout, not 30 s on


def test_a_failed_tool_ends_its_span_with_the_error_type(
    run: Runner, spans: InMemorySpanExporter
) -> None:
    graph = build_graph(
        "transcript", model=fake_model(action("explode", "x"), answer("no")), tools=[explode]
    )
    run(graph, {"question": "q"})
    (span,) = named(spans, "execute_tool")
    assert span.status.status_code == StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "ToolException" or (span.attributes or {})[
        "error.type"
    ] == "RuntimeError"


@pytest.mark.parametrize("variant", ["transcript", "compaction"])
def test_the_forced_answer_is_marked(
    run: Runner, spans: InMemorySpanExporter, variant: str
) -> None:
    graph = echoing(variant, action("echo", "1"), answer("forced"), max_turns=1)
    out = run(graph, {"question": "q"})
    assert out["status"] == "turn_limit"
    root = run_span(spans)
    (forced,) = events(root, tracing.FORCED_ANSWER)
    assert forced.attributes["reactgraph.answered"] is True
    chats = named(spans, "chat")
    assert [(c.attributes or {})["reactgraph.kind"] for c in chats] == ["turn", "forced"]
    assert (chats[1].attributes or {})["reactgraph.forced_answer"] is True
    kinds = [(s.attributes or {})["reactgraph.turn.kind"] for s in children(spans, root)]
    assert kinds == ["action", "forced"]


def test_a_compaction_is_an_event_and_its_summary_a_marked_chat(
    run: Runner, spans: InMemorySpanExporter
) -> None:
    from tests.test_compaction_graph import SUMMARY, counter_over_at

    model = fake_model(*[action("echo", str(i)) for i in range(1, 8)], answer("done"))
    graph = build_graph(
        "compaction",
        model=model,
        tools=[ToolLog().echo()],
        context_window=200_000,
        token_counter=counter_over_at(5),
        summarizer=fake_model(SUMMARY),
    )
    out = run(graph, {"question": "q"})
    (record,) = out["compactions"]
    (event,) = events(run_span(spans), tracing.COMPACTION)
    assert event.attributes["reactgraph.tokens_before"] == record["tokens_before"]
    assert event.attributes["reactgraph.tokens_after"] == record["tokens_after"]
    (summary,) = [c for c in named(spans, "chat") if c.attributes["reactgraph.kind"] == "summary"]
    assert summary.attributes["reactgraph.summary"] is True
    assert summary.attributes["gen_ai.usage.input_tokens"] == record["prompt_tokens"]
    totals = run_span(spans).attributes or {}
    assert (
        totals["gen_ai.usage.input_tokens"]
        == sum(t["prompt_tokens"] for t in out["turns"]) + record["prompt_tokens"]
    )


@pytest.mark.parametrize("variant", ["notes", "notes_compaction"])
def test_saved_notes_are_an_event(
    run: Runner, spans: InMemorySpanExporter, variant: str, tmp_path: Any
) -> None:
    replies = (action("update_notes", "- found it"), answer("done"))
    graph = echoing(variant, *replies, notes_dir=str(tmp_path))
    run(graph, {"question": "q"})
    (saved,) = events(run_span(spans), tracing.NOTES_SAVED)
    assert saved.attributes["reactgraph.notes_chars"] == len("- found it")
    (tool_span,) = named(spans, "execute_tool")
    assert tool_span.name == "execute_tool update_notes"


def test_an_approval_pauses_the_run_span_and_the_resume_continues_the_trace(
    run: Runner, spans: InMemorySpanExporter
) -> None:
    graph = build_graph(
        "transcript",
        model=fake_model(action("echo", "x"), answer("done")),
        tools=[ToolLog().echo()],
        checkpointer=InMemorySaver(),
        approve=["echo"],
    )
    run(graph, {"question": "q"}, CONFIG)
    (first,) = named(spans, "invoke_agent")
    assert (first.attributes or {})["reactgraph.paused"] is True
    (asked,) = events(first, tracing.APPROVAL_REQUESTED)
    assert asked.attributes["gen_ai.tool.name"] == "echo"
    out = run(graph, Command(resume={"type": "accept"}), CONFIG)
    assert out["status"] == "answered"
    roots = named(spans, "invoke_agent")
    assert len(roots) == 2
    second = roots[1]
    assert second.parent is not None and second.parent.span_id == first.context.span_id
    assert second.context.trace_id == first.context.trace_id
    assert (second.attributes or {})["reactgraph.resumed"] is True
    assert (second.attributes or {})["reactgraph.status"] == "answered"
    (decided,) = events(second, tracing.APPROVAL_DECIDED)
    assert decided.attributes["reactgraph.decision"] == "approve"
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {first.context.trace_id}


def test_a_retry_is_an_event_on_its_chat_span(run: Runner, spans: InMemorySpanExporter) -> None:
    def down(messages: Any) -> str:
        raise TimeoutError("the server is slow")

    graph = build_graph(
        "transcript",
        model=fake_model(down, answer("done")),
        tools=[ToolLog().echo()],
        retry_backoff_s=0.0,
    )
    assert run(graph, {"question": "q"})["status"] == "answered"
    (chat,) = named(spans, "chat")
    (retry,) = events(chat, span_module.RETRY)
    assert retry.attributes["error.type"] == "TimeoutError"
    assert retry.attributes["reactgraph.attempt"] == 1


def test_a_model_that_stays_down_ends_the_spans_in_error(
    run: Runner, spans: InMemorySpanExporter
) -> None:
    def down(messages: Any) -> str:
        raise TimeoutError("the server is down")

    graph = build_graph(
        "transcript",
        model=fake_model(down, down),
        tools=[ToolLog().echo()],
        retry_backoff_s=0.0,
        model_retries=1,
    )
    with pytest.raises(Exception, match="failed after 2 attempts"):
        run(graph, {"question": "q"})
    (chat,) = named(spans, "chat")
    assert chat.status.status_code == StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "TimeoutError"
    assert run_span(spans).status.status_code == StatusCode.ERROR


def test_budgets_and_other_decisions_have_an_event_hook(spans: InMemorySpanExporter) -> None:
    graph = build_graph("transcript", model=fake_model(answer("done")), tools=[])
    out = graph.invoke({"question": "q"}, CONFIG)
    # A run under way elsewhere (its status not yet set): the event opens its segment here.
    tracing.run_event({**out, "status": None}, "reactgraph.budget", {"reactgraph.budget": "tokens"})
    tracing.end_all()
    (marked,) = [s for s in named(spans, "invoke_agent") if events(s, "reactgraph.budget")]
    assert (marked.attributes or {})["reactgraph.resumed"] is True
    assert marked.context.trace_id == run_span_of(spans, first=True).context.trace_id
    tracing.run_event({"thread_id": "t", "run": 1}, "reactgraph.budget", {})  # untraced: nothing


def run_span_of(spans: InMemorySpanExporter, first: bool) -> ReadableSpan:
    return named(spans, "invoke_agent")[0 if first else -1]


def test_without_a_provider_nothing_is_traced_or_stored() -> None:
    script = """
import sys

blocked = sys.argv[1] == "blocked"
if blocked:  # the extra not installed: OpenTelemetry cannot be imported at all
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "opentelemetry":
                raise ImportError(name)
    sys.meta_path.insert(0, Block())
from reactgraph import build_graph
from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES, ScriptedChatModel
from reactgraph.tools import default_tools
graph = build_graph("transcript", model=ScriptedChatModel(replies=list(DEMO_REPLIES)),
                    tools=default_tools())
out = graph.invoke({"question": DEMO_QUESTION})
assert out["status"] == "answered", out["status"]
assert not out.get("trace"), out.get("trace")
mine = [m for m in sys.modules if m.startswith("opentelemetry")]
if blocked:
    assert not mine, mine
import reactgraph.nodes.loop.middleware.tracing as tracing
assert not tracing.enabled()
print("ok")
"""
    for mode in ("blocked", "installed"):
        done = subprocess.run(
            [sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "ok"


@pytest.mark.parametrize(
    ("env", "flag", "traces", "measures"),
    [
        ({}, False, False, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False, True, True),
        # OpenTelemetry's conventions: the traces' own endpoint alone turns tracing on.
        (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"},
            False,
            True,
            False,
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/v1/traces",
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c/v1/metrics",
            },
            False,
            True,
            True,
        ),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "  "}, False, False, False),
        ({}, True, True, True),
        ({"OTEL_METRICS_EXPORTER": "none"}, True, True, False),
    ],
)
def test_which_variables_turn_the_command_lines_export_on(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], flag: bool, traces: bool, measures: bool
) -> None:
    from reactgraph.app import telemetry

    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_METRICS_EXPORTER",
        telemetry.FLAG_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert telemetry.wanted(flag) is traces
    assert telemetry.metrics_wanted(flag) is measures


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_parallel_calls_have_one_execute_tool_span_each_under_their_turn(
    run: Runner, spans: InMemorySpanExporter, action_format: str
) -> None:
    from tests.fakes import calls

    if action_format == "text":
        first: Any = "Action: search[Eiffel Tower]\nAction: search[Golden Gate Bridge]"
    else:
        first = calls(("search", {"query": "Eiffel Tower"}), ("search", {"query": "Golden Gate"}))
    graph = build_graph(
        "transcript",
        model=fake_model(first, answer("48")),
        tools=default_tools(),
        action_format=action_format,
        parallel_tool_calls=True,
    )
    out = run(graph, {"question": DEMO_QUESTION}, CONFIG)
    assert out["answer"] == "48"
    tools = named(spans, "execute_tool")
    assert [s.name for s in tools] == ["execute_tool search"] * 2
    ids = sorted((s.attributes or {})["gen_ai.tool.call.id"] for s in tools)
    assert ids == ["thread-1/1/1/1", "thread-1/1/1/2"]  # each call its own key
    first_turn = children(spans, run_span(spans))[0]
    assert first_turn.name == "reactgraph.turn 1"
    assert [s.name for s in children(spans, first_turn)][1:] == ["execute_tool search"] * 2
