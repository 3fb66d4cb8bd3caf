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

The spans themselves, the trace context and the registry are ``spans``'s; every hook here is
an ``observer``: traces never end a run.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

from reactgraph.nodes.calling.providers import model_name
from reactgraph.nodes.loop.middleware.call_spans import (
    action_span,
    chat_ended,
    chat_failed,
    chat_started,
    tool_ended,
    tool_started,
)
from reactgraph.nodes.loop.middleware.scope import Scope
from reactgraph.nodes.loop.middleware.seam import Middleware
from reactgraph.nodes.loop.middleware.spans import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    COMPACTION,
    FORCED_ANSWER,
    LOCK,
    NOTES_SAVED,
    RUNS,
    STUCK,
    RunSpans,
    api,
    begin_run,
    captures_content,
    cut,
    enabled,
    end_segment,
    live,
    ns_ago,
    observer,
    pop_run,
    turn_span,
)
from reactgraph.nodes.vocabulary.reducers import after

_TRACED = "reactgraph.tracing.enabled"
"""The ``Scope.marks`` key of whether the node's run is traced (asked once per node's run)."""

# --- The node shell's hooks (graphs.assembly.Node). -------------------------------------------


@observer()
def node_entered(node: str, state: Mapping[str, Any], variant: str, model: str | None) -> None:
    """Before a node of a traced run (its state holds ``trace``) runs: the run's segment is live
    in this process (opened when the run was started or paused elsewhere)."""
    if node != "start_run" and api() is not None:
        live(state, variant, model)


@observer()
def node_failed(node: str, state: Mapping[str, Any], error: BaseException) -> None:
    """A node raised: an approval's interrupt pauses the run (the segment ends, the request is
    an event); any other error ends the segment with an error status."""
    if not enabled():
        return
    from langgraph.errors import GraphBubbleUp

    run = pop_run(state)
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
        end_segment(run, paused=True)
    else:
        end_segment(run, error=error)


@observer(lambda node, state, update, *_: _untraced(node, state, update))
def node_done(
    node: str,
    state: Mapping[str, Any],
    update: dict[str, Any],
    merged: Callable[[], Mapping[str, Any]],
    variant: str,
    model: str | None,
    tools: Any = (),
) -> dict[str, Any]:
    """After a node's update: start_run opens the run span (and the update keeps its trace
    context); completed turns end their spans; the run's decisions become events; a run that
    ended ends its span. Returns the update (start_run's with ``trace``)."""
    if node == "start_run":
        stored = begin_run(merged(), variant, model)
        if stored is not None:
            return {**update, "trace": stored}
        return {**update, "trace": {}} if state.get("trace") else update
    if api() is None or not state.get("trace"):
        return update
    run = live(state, variant, model)
    if run is None:
        return update
    _record_node(run, node, state, update, tools)
    status = update.get("status")
    if status:
        _end_run(run, state, merged(), status)
    return update


def _record_node(
    run: RunSpans, node: str, state: Mapping[str, Any], update: dict[str, Any], tools: Any
) -> None:
    """What a node (not start_run) did, on the run's spans: the turns it completed end their
    spans; its compactions, notes saved and forced answer become events of the run's span."""
    now = time.time_ns()
    for turn in update.get("turns") or ():
        _complete_turn(run, state, turn, tools, now)
    for record in update.get("compactions") or ():
        _compaction_event(run, record)
    next_turn = len(state.get("turns") or []) + 1
    if node != "load_notes" and _notes_saved(state, update):
        run.span.add_event(
            NOTES_SAVED,
            {"reactgraph.turn": next_turn, "reactgraph.notes_chars": len(update["notes"])},
        )
    if node == "force_answer":
        run.span.add_event(
            FORCED_ANSWER,
            {"reactgraph.turn": next_turn, "reactgraph.answered": update.get("answer") is not None},
        )


def _compaction_event(run: RunSpans, record: Mapping[str, Any]) -> None:
    """A compaction (its record in ``compactions``) as an event of the run's span."""
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


def _notes_saved(state: Mapping[str, Any], update: Mapping[str, Any]) -> bool:
    """Whether an update writes notes other than the state's."""
    return update.get("notes") is not None and update["notes"] != state.get("notes")


def _untraced(node: str, state: Mapping[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``node_done``'s update when the tracing failed: as it came (start_run's run goes on
    untraced, a trace context an earlier run left cleared)."""
    if node == "start_run" and state.get("trace"):
        return {**update, "trace": {}}
    return update


def _turn_attributes(turn: Mapping[str, Any]) -> dict[str, Any]:
    """A completed turn's attributes on its span: kind, tokens, latencies, its Action."""
    attributes: dict[str, Any] = {
        "reactgraph.turn.kind": str(turn.get("kind")),
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
    return attributes


def _turn_events(run: RunSpans, number: int, turn: Mapping[str, Any]) -> None:
    """A completed turn's decisions as events of the run's span: a person's on its Action, and
    the stuck rule's."""
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
    if turn.get("kind") == "stuck":
        run.span.add_event(
            STUCK, {"reactgraph.turn": number, "reactgraph.action": str(turn.get("action") or "")}
        )


def _complete_turn(
    run: RunSpans, state: Mapping[str, Any], turn: Mapping[str, Any], tools: Any, now: int
) -> None:
    """A completed turn's span (started as long ago as the turn took), its attributes and
    events; an Action of a tool not in ``tools`` gets a span of its own (``action_span``)."""
    number = int(turn["turn"])
    spent = float(turn.get("model_latency_s") or 0.0) + float(turn.get("tool_latency_s") or 0.0)
    span = turn_span(run, number, start_ns=ns_ago(spent, now))
    if span is None:
        return
    span.set_attributes(_turn_attributes(turn))
    if turn.get("kind") == "action" and turn.get("action") not in tools:
        action_span(run, state, turn, now)
    _turn_events(run, number, turn)
    span.end(end_time=now)
    run.turn_span, run.turn = None, None


def _tokens(records: list[Mapping[str, Any]], key: str) -> int:
    """The tokens (``key``: ``prompt_tokens`` or ``completion_tokens``) the records spent."""
    return sum(int(record.get(key) or 0) for record in records)


def _end_run(
    run: RunSpans, state: Mapping[str, Any], after: Mapping[str, Any], status: str
) -> None:
    """End a run's span (``after``: the state at its end): its status, turns and tokens (the
    summaries' too), and its answer where content is captured."""
    turns = list(after.get("turns") or [])
    spenders = [*turns, *(after.get("compactions") or [])]  # a summary's call spends too
    inputs = _tokens(spenders, "prompt_tokens")
    outputs = _tokens(spenders, "completion_tokens")
    run.span.set_attributes(
        {
            "reactgraph.status": status,
            "reactgraph.turns": len(turns),
            "gen_ai.usage.input_tokens": inputs,
            "gen_ai.usage.output_tokens": outputs,
        }
    )
    if captures_content() and isinstance(after.get("answer"), str):
        run.span.set_attribute("reactgraph.answer", cut(after["answer"]))
    popped = pop_run(state)
    end_segment(popped or run)


@observer()
def run_event(state: Mapping[str, Any], name: str, attributes: Mapping[str, Any]) -> None:
    """Add an event to the run's span (the hook for a run's other decisions: a budget's warning
    or its end, as ``reactgraph.budget``). Does nothing when the run is not traced."""
    if not state.get("trace") or api() is None:
        return
    run = live(state)
    if run is not None:
        run.span.add_event(name, dict(attributes))


@observer()
def end_all() -> None:
    """End every span this process still holds open (the command line, before it exports):
    a run left waiting is a paused segment."""
    with LOCK:
        runs = list(RUNS.values())
        RUNS.clear()
    for run in runs:
        end_segment(run, paused=True)


def _reply_of(message: Any, tokens: tuple[int, int, str]) -> dict[str, Any]:
    """What a chat span records of a model call's reply."""
    from reactgraph.nodes.calling.streaming import was_cut
    from reactgraph.nodes.calling.tokens import message_text

    return {
        "prompt_tokens": tokens[0],
        "completion_tokens": tokens[1],
        "token_source": tokens[2],
        "message_id": getattr(message, "id", None),
        "cut": was_cut(message),
        "tool_calls": getattr(message, "tool_calls", None) or [],
        "raw": message_text(message),
    }


class Tracing(Middleware):
    """The traces as middleware: the run and its segments, a span per turn, one ``chat`` span
    per actual model call (a middleware's retry or fallback is another, named by its model)
    and one ``execute_tool`` span per actual tool call, the run's decisions as events. Nothing
    happens unless the application set a tracer provider."""

    def __init__(self, variant: str, model: str | None, tools: Any = ()) -> None:
        self.variant, self.model, self.tools = variant, model, frozenset(tools)

    def _model(self, scope: Scope) -> str | None:
        return scope.settings.model_name or self.model

    def node_entered(self, scope: Scope) -> None:
        if scope.state.get("trace"):  # a traced run's: no segment to bring back otherwise
            node_entered(scope.node, scope.state, self.variant, None)

    def node_failed(self, scope: Scope, error: BaseException) -> None:
        node_failed(scope.node, scope.state, error)

    @staticmethod
    def _enabled(scope: Scope) -> bool:
        """Whether spans are made in this node's run (a tracer provider set), asked once per
        run of a node: its model call, its tool call and its update ask again at no cost."""
        found = scope.marks.get(_TRACED)
        if found is None:
            found = scope.marks[_TRACED] = enabled()
        return found

    def observe(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        if not self._enabled(scope) and not state.get("trace"):
            return update
        merged = functools.partial(after, state, update)
        model = self._model(scope)
        return node_done(scope.node, state, update, merged, self.variant, model, self.tools)

    def wraps(self, hook: str, scope: Scope) -> bool:
        return self._enabled(scope)

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        messages = [m for m in (request.system_message, *request.messages) if m is not None]
        model = model_name(request.model) or self._model(scope)
        span = chat_started(scope.state, model, scope.purpose, messages)
        if span is not None:
            scope.on_retry.append(span.retry)
        try:
            response = yield from call(request)
        except BaseException as error:
            chat_failed(span, error)
            raise
        finally:
            if span is not None:
                scope.on_retry.remove(span.retry)
        if span is not None:
            message = response.result[-1] if response.result else None
            prompt = scope.tokens(lambda: messages, message, request.model)
            chat_ended(span, _reply_of(message, prompt))
        return response

    def wrap_tool_call(self, request: Any, call: Any, scope: Scope) -> Any:
        span = tool_started(scope.state, request)
        try:
            message = yield from call(request)
        except BaseException as error:
            tool_ended(span, error=error)
            raise
        tool_ended(span, message)
        return message
