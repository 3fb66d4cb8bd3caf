"""The spans of the calls a run makes: one ``chat <model>`` span per actual model call (its
retries as events on it), one ``execute_tool <tool>`` span per actual tool call (ended at its
timeout when it timed out), and the span of a variant's own action, made when its turn
completes."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reactgraph.nodes.loop.middleware.genai_metrics import record_metrics
from reactgraph.nodes.loop.middleware.spans import (
    RETRY,
    RunSpans,
    api,
    captures_content,
    cut,
    live,
    ns_ago,
    observer,
    set_error,
    tracer,
    turn_span,
)


@dataclass
class ChatSpan:
    """A model call's span while the call runs; ``retry`` records a retry on it."""

    span: Any
    model: str | None
    purpose: str
    started: float = field(default_factory=time.perf_counter)

    @observer()
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


@observer()
def chat_started(
    state: Mapping[str, Any], model: str | None, purpose: str, messages: Sequence[Any]
) -> ChatSpan | None:
    """Open the ``chat <model>`` span of a model call of the run's current turn (``purpose``:
    ``turn``, ``summary`` or ``forced``); None when the run is not traced."""
    run = live(state, model=model)
    if run is None:
        return None
    trace = api()
    if trace is None:
        return None
    number = len(state.get("turns") or []) + 1
    open_turn = turn_span(run, number)
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
        attributes["gen_ai.input.messages"] = cut(_messages_json(messages))
    span = tracer(trace).start_span(
        f"chat {model or 'model'}",
        context=trace.set_span_in_context(open_turn),
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


@observer()
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
        span.set_attribute("gen_ai.output.messages", cut(json.dumps(output, ensure_ascii=False)))
    span.end()
    record_metrics(chat, reply, None)


@observer()
def chat_failed(chat: ChatSpan | None, error: BaseException) -> None:
    """End a model call's span that gave no reply (every retry failed) with an error status."""
    if chat is None:
        return
    cause = error.__cause__ if error.__cause__ is not None else error
    set_error(chat.span, type(cause).__qualname__, str(error)[:500])
    chat.span.end()
    record_metrics(chat, None, type(cause).__qualname__)


def _open_tool_span(
    turn_span: Any, name: str, call_id: str, number: int, parsed: Mapping[str, Any], start: int
) -> Any:
    trace: Any = api()
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "reactgraph.turn": number,
    }
    model_call_id = parsed.get("call_id") or parsed.get("tool_call_id")
    if model_call_id:
        attributes["reactgraph.tool.model_call_id"] = str(model_call_id)
    if captures_content():
        args = parsed.get("args")
        attributes["gen_ai.tool.call.arguments"] = cut(
            args if args is not None else parsed.get("action_input") or ""
        )
    return tracer(trace).start_span(
        f"execute_tool {name}",
        context=trace.set_span_in_context(turn_span),
        kind=trace.SpanKind.INTERNAL,
        attributes=attributes,
        start_time=start,
    )


@observer()
def tool_started(state: Mapping[str, Any], request: Any) -> ToolSpan | None:
    """Open the ``execute_tool <tool>`` span of one actual tool call (a middleware's retry is
    another) under the run's current turn; None when the run is not traced."""
    run = live(state)
    if run is None or api() is None:
        return None
    number = len(state.get("turns") or []) + 1
    call = request.tool_call
    name, call_id = str(call.get("name") or "tool"), str(call.get("id") or "")
    start = time.time_ns()
    parsed = state.get("parsed") or {}
    span = _open_tool_span(turn_span(run, number), name, call_id, number, parsed, start)
    return ToolSpan(span, start)


@observer()
def action_span(run: RunSpans, state: Mapping[str, Any], turn: Mapping[str, Any], now: int) -> None:
    """The span of a variant's own action (``update_notes``), which its node ran: made when
    its turn completes, as long as its node took."""
    if run.turn_span is None or api() is None:
        return
    key = f"{state.get('thread_id')}/{state.get('run', 1)}/{turn['turn']}"
    start = ns_ago(float(turn.get("tool_latency_s") or 0.0), now)
    name, number = str(turn.get("action")), int(turn["turn"])
    span = _open_tool_span(run.turn_span, name, key, number, turn, start)
    if captures_content():
        span.set_attribute("gen_ai.tool.call.result", cut(turn.get("observation") or ""))
    span.end(end_time=now)


@dataclass(frozen=True)
class ToolSpan:
    """A tool call's span while the call runs, and when it started (nanoseconds)."""

    span: Any
    start: int


@observer()
def tool_ended(
    started: ToolSpan | None, message: Any = None, error: BaseException | None = None
) -> None:
    """End a tool call's span: its result (when content is captured), or its error; a timeout
    (``reactgraph.tool.timed_out``) ends it at the timeout, whatever the abandoned call does."""
    if started is None:
        return
    span, end = started.span, None
    if error is not None:
        timed_out = isinstance(error, TimeoutError)
        span.set_attribute("reactgraph.tool.timed_out", timed_out)
        kind = "timeout" if timed_out else type(error).__qualname__
        set_error(span, kind, f"the tool {'timed out' if timed_out else 'failed'}")
        seconds = getattr(error, "seconds", None)
        if timed_out and isinstance(seconds, int | float):
            end = started.start + int(seconds * 1e9)
    elif message is not None and captures_content():
        span.set_attribute("gen_ai.tool.call.result", cut(getattr(message, "content", "")))
    span.end(end_time=end)
