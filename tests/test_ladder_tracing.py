"""The model ladder in the traces (issue 54): each actual call's ``chat`` span names the model
it went to, and the run's span has an ``escalated`` event with its reason, in both formats,
through ``invoke`` and ``ainvoke``."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from reactgraph.nodes.loop.middleware.ladder import ESCALATED
from tests.fakes import Runner
from tests.test_ladder_graph import down, final, make, step, unusable
from tests.test_tracing import CONFIG, events, exported, named, run_span, spans

__all__ = ["exported", "spans"]  # the module's tracer provider and its exporter


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_each_chat_span_names_its_model_and_the_run_has_an_escalated_event(
    run: Runner, spans: InMemorySpanExporter, action_format: str
) -> None:
    big = [unusable(action_format), unusable(action_format)]
    top = [step(action_format, "x"), final(action_format, "48")]
    graph, _, _, _ = make("transcript", action_format, [down], big, top)
    out = run(graph, {"question": "q"}, CONFIG)
    assert out["answer"] == "48" and out["rung"] == 2
    (failed,) = named(spans, "chat small")
    assert failed.status.status_code == StatusCode.ERROR
    assert len(named(spans, "chat big1")) == 2 and len(named(spans, "chat big2")) == 2
    moved = events(run_span(spans), ESCALATED)
    reasons = [(e.attributes["reactgraph.escalation.reason"]) for e in moved]
    assert reasons == ["fault", "unusable"]
    first = moved[0].attributes
    assert first["reactgraph.escalation.from_model"] == "small"
    assert first["reactgraph.escalation.to_model"] == "big1"
    assert "the small model is down" in first["reactgraph.escalation.detail"]
