"""OpenTelemetry traces of a run, after the GenAI semantic conventions, through
``opentelemetry-api`` only (the ``reactgraph[otel]`` extra).

Nothing here imports OpenTelemetry: it is used only when the application already imported it and
set a tracer provider (``trace.set_tracer_provider``; the command line does with ``--otel`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``). Without one every hook returns at once.

The spans of one run::

    invoke_agent <variant>            the run (a resumed run: a segment, child of the first)
      reactgraph.turn <n>             one per turn: kind, tokens, token source, latencies
        chat <model>                  each model call (``reactgraph.kind``: turn/summary/forced)
        execute_tool <tool>           the tool call (an error status and ``error.type`` when it
                                      failed or timed out, ended at the timeout)

One trace per run: the run span's W3C ``traceparent`` is kept in the checkpoint (the state's
``trace``), so a run resumed in another process (after a crash, in a batch's worker, on a Ray
actor) continues the same trace: its spans hang under a new ``invoke_agent`` segment whose parent
is the first one. The run's decisions are events on the run span (``reactgraph.stuck``,
``reactgraph.compaction``, ``reactgraph.forced_answer``, ``reactgraph.notes_saved``,
``reactgraph.approval.requested``/``.decided``; anything else through ``run_event``, as budgets
do); retries are events on their ``chat`` span. Prompts, replies and Observations are recorded
only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

Spans are kept per process in a registry keyed by (thread, run): the run segment and the open
turn span. A pause (an approval's interrupt) or a failure ends the segment; the next node that
runs opens another.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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


def _api() -> Any | None:
    """``opentelemetry.trace`` when the application set a tracer provider, else None (without
    importing anything: an application with a provider has imported the API already)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    try:
        provider = trace.get_tracer_provider()
    except Exception:  # a broken OTEL_PYTHON_TRACER_PROVIDER: no traces, never a failed run
        return None
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return trace


def enabled() -> bool:
    """Whether spans are being made: the application set a tracer provider."""
    return _api() is not None


def captures_content() -> bool:
    """Whether prompts, replies and Observations go on the spans (the GenAI opt-in)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() == "true"


def _tracer(trace: Any) -> Any:
    from importlib.metadata import PackageNotFoundError, version

    try:
        own = version("reactgraph")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        own = None
    return trace.get_tracer(TRACER_NAME, own)


def _cut(text: Any) -> str:
    text = text if isinstance(text, str) else json.dumps(text, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_CAPTURED_CHARS else text[:MAX_CAPTURED_CHARS] + "…"


def _ns(seconds_ago: float, now: int | None = None) -> int:
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
class _Run:
    span: Any
    variant: str
    model: str | None
    turn: int | None = None
    turn_span: Any = None
    failures: dict[str, str] = field(default_factory=dict)
    """Tool failures by idempotency key: the ``error.type`` of the call."""


_RUNS: dict[tuple[str, int], _Run] = {}
_LOCK = threading.Lock()


def _key(state: Mapping[str, Any]) -> tuple[str, int] | None:
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
        attributes["reactgraph.question"] = _cut(state["question"])
    return attributes


def begin_run(state: Mapping[str, Any], variant: str, model: str | None) -> dict[str, str] | None:
    """Open the run span of a run ``start_run`` just began (``state`` is the state after it);
    the trace context to keep in the checkpoint, or None without a tracer provider."""
    trace = _api()
    key = _key(state)
    if trace is None or key is None:
        return None
    span = _tracer(trace).start_span(
        f"invoke_agent {variant}",
        kind=trace.SpanKind.INTERNAL,
        attributes=_run_attributes(state, variant, resumed=False),
    )
    with _LOCK:
        old = _RUNS.pop(key, None)
        _RUNS[key] = _Run(span, variant, model)
    if old is not None:  # the same thread and run again (a test's graph reused a thread)
        _end_segment(old, paused=True)
    return {"traceparent": traceparent(span.get_span_context())}


def _live(state: Mapping[str, Any], variant: str = "", model: str | None = None) -> _Run | None:
    """The run's live segment in this process, opened (as a child of the stored run span) when
    this process had none: a resumed run, a run continued in a worker or after a pause."""
    key = _key(state)
    if key is None:
        return None
    with _LOCK:
        found = _RUNS.get(key)
    if found is not None:
        return found
    trace = _api()
    stored = state.get("trace")
    if trace is None or not stored or state.get("status"):
        return None
    parent = parent_context(trace, stored)
    if parent is None:
        return None
    variant = variant or "reactgraph"
    span = _tracer(trace).start_span(
        f"invoke_agent {variant}",
        context=parent,
        kind=trace.SpanKind.INTERNAL,
        attributes=_run_attributes(state, variant, resumed=True),
    )
    run = _Run(span, variant, model)
    with _LOCK:
        found = _RUNS.setdefault(key, run)
    if found is not run:
        span.end()
    return found


def _set_error(span: Any, error_type: str, description: str | None = None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def _end_segment(run: _Run, paused: bool = False, error: BaseException | None = None) -> None:
    if run.turn_span is not None:
        if error is not None:
            _set_error(run.turn_span, type(error).__qualname__, str(error)[:500])
        run.turn_span.end()
        run.turn_span, run.turn = None, None
    if paused:
        run.span.set_attribute("reactgraph.paused", True)
    if error is not None:
        _set_error(run.span, type(error).__qualname__, str(error)[:500])
    run.span.end()


def _pop(state: Mapping[str, Any]) -> _Run | None:
    key = _key(state)
    if key is None:
        return None
    with _LOCK:
        return _RUNS.pop(key, None)


# --- Turns and model calls. -------------------------------------------------------------------


def _turn_span(run: _Run, number: int, start_ns: int | None = None) -> Any:
    """The open span of turn ``number``, opened now (or at ``start_ns``) when it is not."""
    if run.turn == number and run.turn_span is not None:
        return run.turn_span
    trace = _api()
    if trace is None:
        return None
    if run.turn_span is not None:  # a turn left open (never completed): closed as it was
        run.turn_span.end()
    run.turn_span = _tracer(trace).start_span(
        f"reactgraph.turn {number}",
        context=trace.set_span_in_context(run.span),
        kind=trace.SpanKind.INTERNAL,
        attributes={"reactgraph.turn": number},
        start_time=start_ns,
    )
    run.turn = number
    return run.turn_span


@dataclass
class ChatSpan:
    """A model call's span while the call runs; ``retry`` records a retry on it."""

    span: Any
    model: str | None
    purpose: str
    started: float = field(default_factory=time.perf_counter)

    def retry(self, attempt: int, error: BaseException, delay: float) -> None:
        attributes: dict[str, Any] = {
            "reactgraph.attempt": attempt,
            "error.type": type(error).__qualname__,
            "reactgraph.retry_in_s": round(delay, 3),
        }
        status = getattr(error, "status_code", None)
        if status is None:
            status = getattr(getattr(error, "response", None), "status_code", None)
        if isinstance(status, int):
            attributes["http.response.status_code"] = status
        self.span.add_event(RETRY, attributes)


def chat_started(
    state: Mapping[str, Any], model: str | None, purpose: str, messages: Sequence[Any]
) -> ChatSpan | None:
    """Open the ``chat <model>`` span of a model call of the run's current turn (``purpose``:
    ``turn``, ``summary`` or ``forced``); None when the run is not traced."""
    run = _live(state, model=model)
    if run is None:
        return None
    trace = _api()
    if trace is None:
        return None
    number = len(state.get("turns") or []) + 1
    turn_span = _turn_span(run, number)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "reactgraph.kind": purpose,
        "reactgraph.turn": number,
    }
    if model:
        attributes["gen_ai.request.model"] = model
    if purpose == "summary":
        attributes["reactgraph.summary"] = True
    if purpose == "forced":
        attributes["reactgraph.forced_answer"] = True
    if captures_content():
        attributes["gen_ai.input.messages"] = _cut(_messages_json(messages))
    span = _tracer(trace).start_span(
        f"chat {model or 'model'}",
        context=trace.set_span_in_context(turn_span),
        kind=trace.SpanKind.CLIENT,
        attributes=attributes,
    )
    return ChatSpan(span, model, purpose)


def _messages_json(messages: Sequence[Any]) -> str:
    out = []
    for message in messages:
        content = getattr(message, "content", message)
        role = {"human": "user", "ai": "assistant", "tool": "tool"}.get(
            getattr(message, "type", ""), getattr(message, "type", "user")
        )
        out.append({"role": role, "parts": [{"type": "text", "content": str(content)}]})
    return json.dumps(out, ensure_ascii=False)


def chat_ended(chat: ChatSpan | None, reply: Mapping[str, Any]) -> None:
    """End a model call's span with its usage (and the reply, when content is captured), and
    record the GenAI client metrics."""
    if chat is None:
        return
    span = chat.span
    span.set_attribute("gen_ai.usage.input_tokens", int(reply.get("prompt_tokens") or 0))
    span.set_attribute("gen_ai.usage.output_tokens", int(reply.get("completion_tokens") or 0))
    span.set_attribute("reactgraph.token_source", str(reply.get("token_source") or ""))
    if reply.get("message_id"):
        span.set_attribute("gen_ai.response.id", str(reply["message_id"]))
    if reply.get("cut"):
        span.set_attribute("reactgraph.cut", True)
        span.set_attribute("gen_ai.response.finish_reasons", ["length"])
    if reply.get("tool_calls"):
        span.set_attribute("reactgraph.tool_calls", len(reply["tool_calls"]))
    if captures_content():
        output = [{"role": "assistant", "parts": [{"type": "text", "content": reply.get("raw")}]}]
        span.set_attribute("gen_ai.output.messages", _cut(json.dumps(output, ensure_ascii=False)))
    span.end()
    _record_metrics(chat, reply, None)


def chat_failed(chat: ChatSpan | None, error: BaseException) -> None:
    """End a model call's span that gave no reply (every retry failed) with an error status."""
    if chat is None:
        return
    cause = error.__cause__ if error.__cause__ is not None else error
    _set_error(chat.span, type(cause).__qualname__, str(error)[:500])
    chat.span.end()
    _record_metrics(chat, None, type(cause).__qualname__)


_INSTRUMENTS: dict[int, tuple[Any, tuple[Any, Any]]] = {}


def _instruments() -> tuple[Any, Any] | None:
    """The two GenAI client histograms, when the application set a meter provider."""
    metrics = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return None
    provider = metrics.get_meter_provider()
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__.startswith(
        "_Proxy"
    ):
        return None
    with _LOCK:
        kept = _INSTRUMENTS.get(id(provider))
        found = kept[1] if kept is not None and kept[0] is provider else None
        if found is None:
            meter = provider.get_meter(TRACER_NAME)
            found = (
                meter.create_histogram(
                    "gen_ai.client.token.usage",
                    unit="{token}",
                    description="Number of input and output tokens used",
                    explicit_bucket_boundaries_advisory=[
                        1,
                        4,
                        16,
                        64,
                        256,
                        1024,
                        4096,
                        16384,
                        65536,
                        262144,
                        1048576,
                        4194304,
                        16777216,
                        67108864,
                    ],
                ),
                meter.create_histogram(
                    "gen_ai.client.operation.duration",
                    unit="s",
                    description="GenAI operation duration",
                    explicit_bucket_boundaries_advisory=[
                        0.01,
                        0.02,
                        0.04,
                        0.08,
                        0.16,
                        0.32,
                        0.64,
                        1.28,
                        2.56,
                        5.12,
                        10.24,
                        20.48,
                        40.96,
                        81.92,
                    ],
                ),
            )
            _INSTRUMENTS[id(provider)] = (provider, found)
    return found


def _record_metrics(chat: ChatSpan, reply: Mapping[str, Any] | None, error: str | None) -> None:
    instruments = _instruments()
    if instruments is None:
        return
    tokens, duration = instruments
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "reactgraph.kind": chat.purpose}
    if chat.model:
        attributes["gen_ai.request.model"] = chat.model
    if error is not None:
        attributes["error.type"] = error
    duration.record(time.perf_counter() - chat.started, attributes)
    if reply is not None:
        for kind, count in (("input", "prompt_tokens"), ("output", "completion_tokens")):
            tokens.record(int(reply.get(count) or 0), {**attributes, "gen_ai.token.type": kind})


# --- Tools. -----------------------------------------------------------------------------------


def tool_failed(config: Mapping[str, Any], error_type: str) -> None:
    """Note that the tool call keyed in ``config`` failed (``timeout``, or the exception's
    type), for its span."""
    key = (config.get("configurable") or {}).get("idempotency_key")
    if not isinstance(key, str) or not enabled():
        return
    thread, _, _rest = key.rpartition("/")
    thread, _, run = thread.rpartition("/")
    with _LOCK:
        found = _RUNS.get((thread, int(run))) if run.isdigit() else None
        if found is not None:
            found.failures[key] = error_type


def _tool_span(
    run: _Run, state: Mapping[str, Any], turn: Mapping[str, Any], timeout: float, now: int
) -> None:
    trace = _api()
    if trace is None or run.turn_span is None:
        return
    name = str(turn.get("action") or "tool")
    key = f"{state.get('thread_id')}/{state.get('run', 1)}/{turn['turn']}"
    with _LOCK:
        failure = run.failures.pop(key, None)
    latency = float(turn.get("tool_latency_s") or 0.0)
    start = _ns(latency, now)
    end = now
    if failure == "timeout":
        end = start + int(timeout * 1e9)  # at the timeout, whatever the abandoned call does
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": key,
        "reactgraph.turn": int(turn["turn"]),
    }
    if turn.get("tool_call_id"):
        attributes["reactgraph.tool.model_call_id"] = str(turn["tool_call_id"])
    if captures_content():
        arguments = turn.get("args") if turn.get("args") is not None else turn.get("action_input")
        attributes["gen_ai.tool.call.arguments"] = _cut(arguments or "")
        attributes["gen_ai.tool.call.result"] = _cut(turn.get("observation") or "")
    span = _tracer(trace).start_span(
        f"execute_tool {name}",
        context=trace.set_span_in_context(run.turn_span),
        kind=trace.SpanKind.INTERNAL,
        attributes=attributes,
        start_time=start,
    )
    if failure is not None:
        span.set_attribute("reactgraph.tool.timed_out", failure == "timeout")
        _set_error(
            span, failure, f"the tool {name} {'timed out' if failure == 'timeout' else 'failed'}"
        )
    span.end(end_time=end)


# --- The node shell's hooks (graphs.assembly.Node). -------------------------------------------


def node_entered(node: str, state: Mapping[str, Any], variant: str, model: str | None) -> None:
    """Before a node runs: the run's segment is live in this process (opened when the run was
    started or paused elsewhere)."""
    if node != "start_run" and state.get("trace") and _api() is not None:
        _live(state, variant, model)


def node_failed(node: str, state: Mapping[str, Any], error: BaseException) -> None:
    """A node raised: an approval's interrupt pauses the run (the segment ends, the request is
    an event); any other error ends the segment with an error status."""
    if not enabled():
        return
    from langgraph.errors import GraphBubbleUp

    run = _pop(state)
    if run is None:
        return
    if isinstance(error, GraphBubbleUp):
        if node == "approve_action":
            parsed = state.get("parsed") or {}
            run.span.add_event(
                APPROVAL_REQUESTED,
                {
                    "reactgraph.turn": len(state.get("turns") or []) + 1,
                    "gen_ai.tool.name": str(parsed.get("action") or ""),
                },
            )
        _end_segment(run, paused=True)
    else:
        _end_segment(run, error=error)


def node_done(
    node: str,
    state: Mapping[str, Any],
    update: dict[str, Any],
    merged: Callable[[], Mapping[str, Any]],
    variant: str,
    model: str | None,
    timeout: Callable[[Mapping[str, Any]], float],
) -> dict[str, Any]:
    """After a node's update: start_run opens the run span (and the update keeps its trace
    context); completed turns end their spans; the run's decisions become events; a run that
    ended ends its span. Returns the update (start_run's with ``trace``)."""
    if node == "start_run":
        after = merged()
        stored = begin_run(after, variant, model)
        if stored is not None:
            return {**update, "trace": stored}
        return {**update, "trace": {}} if state.get("trace") else update
    if _api() is None or not state.get("trace"):
        return update
    run = _live(state, variant, model)
    if run is None:
        return update
    now = time.time_ns()
    for turn in update.get("turns") or ():
        _complete_turn(run, state, turn, timeout(state), now)
    for record in update.get("compactions") or ():
        run.span.add_event(
            COMPACTION,
            {
                "reactgraph.turn": int(record.get("turn") or 0),
                "reactgraph.tokens_before": int(record.get("tokens_before") or 0),
                "reactgraph.tokens_after": int(record.get("tokens_after") or 0),
                "reactgraph.first_kept_turn": int(record.get("first_kept_turn") or 0),
                "reactgraph.summarized": record.get("summary") is not None,
            },
        )
    if (
        "notes" in update
        and node not in ("start_run", "load_notes")
        and update["notes"] is not None
    ) and update["notes"] != state.get("notes"):
        run.span.add_event(
            NOTES_SAVED,
            {
                "reactgraph.turn": len(state.get("turns") or []) + 1,
                "reactgraph.notes_chars": len(update["notes"]),
            },
        )
    if node == "force_answer":
        run.span.add_event(
            FORCED_ANSWER,
            {
                "reactgraph.turn": len(state.get("turns") or []) + 1,
                "reactgraph.answered": update.get("answer") is not None,
            },
        )
    status = update.get("status")
    if status:
        _end_run(run, state, merged(), status)
    return update


def _complete_turn(
    run: _Run, state: Mapping[str, Any], turn: Mapping[str, Any], timeout: float, now: int
) -> None:
    number = int(turn["turn"])
    spent = float(turn.get("model_latency_s") or 0.0) + float(turn.get("tool_latency_s") or 0.0)
    span = _turn_span(run, number, start_ns=_ns(spent, now))
    if span is None:
        return
    kind = turn.get("kind")
    attributes: dict[str, Any] = {
        "reactgraph.turn.kind": str(kind),
        "gen_ai.usage.input_tokens": int(turn.get("prompt_tokens") or 0),
        "gen_ai.usage.output_tokens": int(turn.get("completion_tokens") or 0),
        "reactgraph.token_source": str(turn.get("token_source") or ""),
        "reactgraph.model_latency_s": float(turn.get("model_latency_s") or 0.0),
    }
    if turn.get("tool_latency_s") is not None:
        attributes["reactgraph.tool_latency_s"] = float(turn["tool_latency_s"])
    if turn.get("action"):
        attributes["reactgraph.action"] = str(turn["action"])
    if turn.get("cut"):
        attributes["reactgraph.cut"] = True
    span.set_attributes(attributes)
    approval = turn.get("approval")
    if approval:
        run.span.add_event(
            APPROVAL_DECIDED,
            {
                "reactgraph.turn": number,
                "reactgraph.decision": str(approval.get("decision")),
                "reactgraph.decided_by": str(approval.get("by")),
                "gen_ai.tool.name": str(turn.get("action") or ""),
            },
        )
    ran = kind == "action" and (not approval or approval.get("decision") in ("approve", "edit"))
    if ran:
        _tool_span(run, state, turn, timeout, now)
    if kind == "stuck":
        run.span.add_event(
            STUCK, {"reactgraph.turn": number, "reactgraph.action": str(turn.get("action") or "")}
        )
    span.end(end_time=now)
    run.turn_span, run.turn = None, None


def _end_run(run: _Run, state: Mapping[str, Any], after: Mapping[str, Any], status: str) -> None:
    turns = list(after.get("turns") or [])
    compactions = list(after.get("compactions") or [])
    inputs = sum(int(t.get("prompt_tokens") or 0) for t in turns)
    outputs = sum(int(t.get("completion_tokens") or 0) for t in turns)
    inputs += sum(int(c.get("prompt_tokens") or 0) for c in compactions)
    outputs += sum(int(c.get("completion_tokens") or 0) for c in compactions)
    run.span.set_attributes(
        {
            "reactgraph.status": status,
            "reactgraph.turns": len(turns),
            "gen_ai.usage.input_tokens": inputs,
            "gen_ai.usage.output_tokens": outputs,
        }
    )
    if captures_content() and isinstance(after.get("answer"), str):
        run.span.set_attribute("reactgraph.answer", _cut(after["answer"]))
    popped = _pop(state)
    _end_segment(popped or run)


def run_event(state: Mapping[str, Any], name: str, attributes: Mapping[str, Any]) -> None:
    """Add an event to the run's span (the hook for a run's other decisions: a budget's warning
    or its end, as ``reactgraph.budget``). Does nothing when the run is not traced."""
    if not state.get("trace") or _api() is None:
        return
    run = _live(state)
    if run is not None:
        run.span.add_event(name, dict(attributes))


def end_all() -> None:
    """End every span this process still holds open (the command line, before it exports):
    a run left waiting is a paused segment."""
    with _LOCK:
        runs = list(_RUNS.values())
        _RUNS.clear()
    for run in runs:
        _end_segment(run, paused=True)
