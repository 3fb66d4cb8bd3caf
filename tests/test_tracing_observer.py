"""Traces only observe: an application's span processor that raises in ``on_start`` or
``on_end`` (through the OpenTelemetry SDK) never fails a run, in any variant, either action
format, ``invoke`` or ``ainvoke``, through a retry and an approval's pause and resume; the
failure is said once per process as a warning."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.loop.middleware import spans
from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES, DEMO_TOOL_CALLS
from reactgraph.tools import default_tools
from tests.fakes import Runner, ToolLog, action, answer, fake_model

CONFIG = {"configurable": {"thread_id": "observed"}}


class Raising(SpanProcessor):
    """A processor that raises where the test says: ``on_start``, ``on_end`` or both."""

    def __init__(self) -> None:
        self.where: set[str] = set()
        self.seen = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.seen += 1
        if "start" in self.where:
            raise RuntimeError("the processor broke on start")

    def on_end(self, span: Any) -> None:
        if "end" in self.where:
            raise ValueError("the processor broke on end")


@pytest.fixture(scope="module")
def processor() -> Iterator[Raising]:
    """The process's tracer provider for this module, with the raising processor, then none."""
    raising = Raising()
    provider = TracerProvider()
    provider.add_span_processor(raising)
    trace._TRACER_PROVIDER_SET_ONCE._done = False  # type: ignore[attr-defined]
    trace.set_tracer_provider(provider)
    yield raising
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER_SET_ONCE._done = False  # type: ignore[attr-defined]
    provider.shutdown()


@pytest.fixture(params=[("start",), ("end",), ("start", "end")], ids="-".join)
def broken(
    request: pytest.FixtureRequest, processor: Raising, monkeypatch: pytest.MonkeyPatch
) -> Raising:
    processor.where, processor.seen = set(request.param), 0
    # A fresh process, which has not said it yet.
    monkeypatch.setattr(spans, "_failed_once", threading.Event())
    return processor


def said(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == spans.__name__ and r.levelno == logging.WARNING and "tracing failed" in r.msg
    ]


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_processor_that_raises_never_fails_the_run(
    run: Runner,
    broken: Raising,
    variant: str,
    action_format: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    replies = DEMO_TOOL_CALLS if action_format == "tool_calls" else DEMO_REPLIES
    graph = build_graph(
        variant,
        model=fake_model(*replies),
        tools=default_tools(),
        action_format=action_format,
        **({"context_window": 100_000} if "compaction" in variant else {}),
    )
    with caplog.at_level(logging.DEBUG, logger=spans.__name__):
        out = run(graph, {"question": DEMO_QUESTION}, CONFIG)
    assert (out["status"], out["answer"]) == ("answered", "48")
    assert broken.seen > 0  # the spans were started: the processor did raise
    (warning,) = said(caplog)  # once, however many spans failed
    assert "the run goes on" in warning.getMessage()


def test_a_retry_and_an_approval_go_through_a_broken_processor(
    run: Runner, broken: Raising, caplog: pytest.LogCaptureFixture
) -> None:
    def down(messages: Any) -> str:
        raise TimeoutError("the server is slow")

    log = ToolLog()
    graph = build_graph(
        "transcript",
        model=fake_model(down, action("echo", "x"), answer("done")),
        tools=[log.echo()],
        checkpointer=InMemorySaver(),
        approve=["echo"],
        retry_backoff_s=0.0,
    )
    with caplog.at_level(logging.DEBUG, logger=spans.__name__):
        waiting = run(graph, {"question": "q"}, CONFIG)
        assert waiting["__interrupt__"]
        out = run(graph, Command(resume={"type": "accept"}), CONFIG)
    assert out["status"] == "answered" and log.calls == [("echo", "x")]
    assert len(said(caplog)) == 1
