"""OpenTelemetry spans of a run, after the GenAI semantic conventions, through
``opentelemetry-api`` only (the ``reactgraph[otel]`` extra): the API reached without importing
it, the trace context kept in the checkpoint, the registry of this process's live run segments
and turn spans, and each model call's ``chat`` span. What makes them, and when, is the
``Tracing`` middleware's (``reactgraph.nodes.loop.middleware.tracing``).

Traces only observe: every hook the loop calls (``observer``) catches what the tracing raises (a
span processor whose ``on_start`` or ``on_end`` raises, a meter that fails) and logs it, once per
process as a warning, then at debug level; the run goes on, its spans perhaps incomplete.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

logger = logging.getLogger(__name__)

TRACER_NAME = "reactgraph"
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# At most this many characters of a captured text on a span.
MAX_CAPTURED_CHARS = 16_000

# The run's events (names on the run span).
STUCK = "reactgraph.stuck"
COMPACTION = "reactgraph.compaction"
FORCED_ANSWER = "reactgraph.forced_answer"
NOTES_SAVED = "reactgraph.notes_saved"
APPROVAL_REQUESTED = "reactgraph.approval.requested"
APPROVAL_DECIDED = "reactgraph.approval.decided"
RETRY = "reactgraph.retry"


def api() -> Any | None:
    """``opentelemetry.trace`` when the application set a tracer provider, else None (without
    importing anything: an application with a provider has imported the API already)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    try:
        provider = trace.get_tracer_provider()
    except Exception:  # a broken OTEL_PYTHON_TRACER_PROVIDER: no traces, never a failed run
        return None
    off = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)  # a tuple: no union made per call
    if isinstance(provider, off):
        return None
    return trace


_P = ParamSpec("_P")
_R = TypeVar("_R")
_failed_once = threading.Event()


def _observer_failed(hook: str, error: Exception) -> None:
    """Say that the tracing raised in ``hook``: a warning the first time in this process, then
    at debug level (a broken processor raises at every span)."""
    first = not _failed_once.is_set()
    _failed_once.set()
    logger.log(
        logging.WARNING if first else logging.DEBUG,
        "tracing failed in %s (%s: %s); the run goes on, its spans may be incomplete%s",
        hook,
        type(error).__name__,
        str(error)[:200],
        " (said once per process)" if first else "",
    )


def observer(
    fallback: Callable[..., Any] | None = None,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """A hook the loop calls, made harmless: what it raises (an ``Exception``: a span processor
    or meter of the application's that fails) is logged and the hook returns
    ``fallback(*args)`` (default None) instead, so traces never end a run."""

    def wrap(hook: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(hook)
        def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return hook(*args, **kwargs)
            except Exception as error:
                _observer_failed(hook.__qualname__, error)
                kept = fallback(*args, **kwargs) if fallback is not None else None
                return kept  # type: ignore[return-value]

        return guarded

    return wrap


def enabled() -> bool:
    """Whether spans are being made: the application set a tracer provider."""
    return api() is not None


def captures_content() -> bool:
    """Whether prompts, replies and Observations go on the spans (the GenAI opt-in)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def tracer(trace: Any) -> Any:
    from importlib.metadata import PackageNotFoundError, version

    try:
        own = version("reactgraph")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        own = None
    return trace.get_tracer(TRACER_NAME, own)


def cut(text: Any) -> str:
    text = text if isinstance(text, str) else json.dumps(text, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_CAPTURED_CHARS else text[:MAX_CAPTURED_CHARS] + "…"


def ns_ago(seconds_ago: float, now: int | None = None) -> int:
    """A wall-clock time in nanoseconds, ``seconds_ago`` before ``now`` (default: now)."""
    return (now if now is not None else time.time_ns()) - int(max(seconds_ago, 0.0) * 1e9)


# --- The trace context kept in the checkpoint. ------------------------------------------------


def traceparent(context: Any) -> str:
    """A span context as a W3C ``traceparent`` header value."""
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def parent_context(trace: Any, stored: Mapping[str, Any] | None) -> Any | None:
    """An OpenTelemetry context whose current span is the stored ``traceparent``'s, or None
    when there is none or it cannot be read."""
    value = (stored or {}).get("traceparent")
    if not isinstance(value, str):
        return None
    parts = value.strip().split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    context = trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags & 0xFF)
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(context))


def trace_id_of(stored: Mapping[str, Any] | None) -> str | None:
    """The 32 hex digits of a stored trace context's trace id."""
    value = (stored or {}).get("traceparent")
    parts = value.split("-") if isinstance(value, str) else []
    return parts[1] if len(parts) == 4 else None


# --- The registry of live spans in this process. ---------------------------------------------


@dataclass
class RunSpans:
    span: Any
    variant: str
    model: str | None
    turn: int | None = None
    turn_span: Any = None


RUNS: dict[tuple[str, int], RunSpans] = {}
LOCK = threading.Lock()


def key_of(state: Mapping[str, Any]) -> tuple[str, int] | None:
    thread, run = state.get("thread_id"), state.get("run")
    if not isinstance(thread, str) or not isinstance(run, int):
        return None
    return thread, run


def _run_attributes(state: Mapping[str, Any], variant: str, resumed: bool) -> dict[str, Any]:
    settings = state.get("settings") or {}
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": variant,
        "gen_ai.conversation.id": state.get("thread_id") or "",
        "reactgraph.variant": variant,
        "reactgraph.run": state.get("run") or 1,
        "reactgraph.resumed": resumed,
        "reactgraph.action_format": settings.get("action_format") or "text",
    }
    model = settings.get("model_name")
    if isinstance(model, str) and model:
        attributes["gen_ai.request.model"] = model
    if captures_content() and isinstance(state.get("question"), str):
        attributes["reactgraph.question"] = cut(state["question"])
    return attributes


def begin_run(state: Mapping[str, Any], variant: str, model: str | None) -> dict[str, str] | None:
    """Open the run span of a run ``start_run`` just began (``state`` is the state after it);
    the trace context to keep in the checkpoint, or None without a tracer provider."""
    trace = api()
    key = key_of(state)
    if trace is None or key is None:
        return None
    span = tracer(trace).start_span(
        f"invoke_agent {variant}",
        kind=trace.SpanKind.INTERNAL,
        attributes=_run_attributes(state, variant, resumed=False),
    )
    with LOCK:
        old = RUNS.pop(key, None)
        RUNS[key] = RunSpans(span, variant, model)
    if old is not None:  # the same thread and run again (a test's graph reused a thread)
        end_segment(old, paused=True)
    return {"traceparent": traceparent(span.get_span_context())}


def live(state: Mapping[str, Any], variant: str = "", model: str | None = None) -> RunSpans | None:
    """The run's live segment in this process, opened (as a child of the stored run span) when
    this process had none: a resumed run, a run continued in a worker or after a pause."""
    key = key_of(state)
    if key is None:
        return None
    with LOCK:
        found = RUNS.get(key)
    if found is not None:
        return found
    trace = api()
    stored = state.get("trace")
    if trace is None or not stored or state.get("status"):
        return None
    parent = parent_context(trace, stored)
    if parent is None:
        return None
    variant = variant or "reactgraph"
    span = tracer(trace).start_span(
        f"invoke_agent {variant}",
        context=parent,
        kind=trace.SpanKind.INTERNAL,
        attributes=_run_attributes(state, variant, resumed=True),
    )
    run = RunSpans(span, variant, model)
    with LOCK:
        found = RUNS.setdefault(key, run)
    if found is not run:
        span.end()
    return found


def set_error(span: Any, error_type: str, description: str | None = None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def end_segment(run: RunSpans, paused: bool = False, error: BaseException | None = None) -> None:
    if run.turn_span is not None:
        if error is not None:
            set_error(run.turn_span, type(error).__qualname__, str(error)[:500])
        run.turn_span.end()
        run.turn_span, run.turn = None, None
    if paused:
        run.span.set_attribute("reactgraph.paused", True)
    if error is not None:
        set_error(run.span, type(error).__qualname__, str(error)[:500])
    run.span.end()


def pop_run(state: Mapping[str, Any]) -> RunSpans | None:
    key = key_of(state)
    if key is None:
        return None
    with LOCK:
        return RUNS.pop(key, None)


# --- Turns and model calls. -------------------------------------------------------------------


def turn_span(run: RunSpans, number: int, start_ns: int | None = None) -> Any:
    """The open span of turn ``number``, opened now (or at ``start_ns``) when it is not."""
    if run.turn == number and run.turn_span is not None:
        return run.turn_span
    trace = api()
    if trace is None:
        return None
    if run.turn_span is not None:  # a turn left open (never completed): closed as it was
        run.turn_span.end()
    run.turn_span = tracer(trace).start_span(
        f"reactgraph.turn {number}",
        context=trace.set_span_in_context(run.span),
        kind=trace.SpanKind.INTERNAL,
        attributes={"reactgraph.turn": number},
        start_time=start_ns,
    )
    run.turn = number
    return run.turn_span
