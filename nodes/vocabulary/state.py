"""The one state type shared by every variant, and the records it holds.

Everything here is a plain ``typing_extensions.TypedDict`` of JSON-friendly values, so the
checkpointers serialise it without custom types and the LangGraph server can read the input
schema on Python 3.11.

Its annotations are types, not strings (no ``from __future__ import annotations``): LangGraph
reads a graph's state type hints at every build, and strings are parsed and evaluated anew each
time, which cost a build about a fifth of its work.
"""

from typing import Annotated, Any, Literal, NotRequired

from langchain_core.messages import AnyMessage
from typing_extensions import TypedDict

from reactgraph.nodes.vocabulary.actions import Approval as Approval
from reactgraph.nodes.vocabulary.actions import CallReading as CallReading
from reactgraph.nodes.vocabulary.actions import CallRecord as CallRecord
from reactgraph.nodes.vocabulary.actions import Decision as Decision
from reactgraph.nodes.vocabulary.actions import ToolCallRecord as ToolCallRecord
from reactgraph.nodes.vocabulary.endings import Status
from reactgraph.nodes.vocabulary.reducers import Chat, Earlier, Rare, Replaced, Transcript

TurnKind = Literal["action", "invalid", "answer", "stuck", "forced"]
TokenSource = Literal["usage", "tiktoken", "estimate"]


class ParsedReply(TypedDict):
    """What the parser read from one model reply; routers read this, never the raw text."""

    kind: Literal["action", "answer", "invalid"]
    """Which of the three readings the reply has."""
    thought: str | None
    """The reply's Thought, when it wrote one."""
    action: str | None
    """The tool name of an ``action`` reading (canonical spelling), else None."""
    action_input: str | None
    """The raw input string of an ``action`` reading, else None."""
    answer: str | None
    """The Final Answer text of an ``answer`` reading, else None."""
    error: str | None
    """For an ``invalid`` reading: the corrective text the model gets as its Observation."""
    approval: NotRequired[Approval]
    """A person's decision on the action, once made (``approve_action``); an edit changes
    ``action``/``action_input`` to what runs."""
    call_id: NotRequired[str | None]
    """``tool_calls`` format: the id of the tool call read (the first the model sent)."""
    args: NotRequired[dict[str, Any] | None]
    """``tool_calls`` format: that call's arguments as the model sent them (``action_input``
    is their text: the one argument's string, else the JSON object)."""
    structured_answer: NotRequired[Any]
    """A run with an answer schema: the answer as the JSON value that matched it (``answer``
    is then its JSON text)."""
    actions: NotRequired[list[CallReading]]
    """``parallel_tool_calls``: every call of a reply that holds more than one, in the reply's
    order (the single-action fields above are the first's); absent for one call."""


class ModelReply(TypedDict):
    """The latest model call's output, waiting to be parsed and completed into a turn."""

    raw: str
    """The reply exactly as the model returned it."""
    text: str
    """The reply as it enters the transcript: reasoning blocks removed, cut at 'Observation:'."""
    prompt_tokens: int
    """Tokens of the prompt sent for this call."""
    completion_tokens: int
    """Tokens of the reply."""
    token_source: TokenSource
    """Where the two counts came from: the provider's usage, tiktoken, or a character estimate."""
    model_latency_s: float
    """Wall time of the model call in seconds."""
    message_id: str | None
    """The id of the model's message, so the chat view's copy matches the streamed tokens."""
    cut: NotRequired[bool]
    """True when the reply stopped at ``max_completion_tokens`` (or the server's limit)."""
    tool_calls: NotRequired[list[ToolCallRecord]]
    """``tool_calls`` format: the reply's tool calls, in order (those with readable arguments
    first), at most ``reactgraph.nodes.reading.toolcalls.MAX_CALLS``; the reply's text is
    ``raw``."""
    lost_calls: NotRequired[int]
    """Earlier sendings of this call whose replies were lost (the process was killed while they
    were in flight, ``reactgraph.nodes.loop.middleware.budgets.sending``): each is counted in
    ``prompt_tokens`` at the prompt's tokens (by the token counter). Absent when none."""
    model: NotRequired[str]
    """The model that wrote the reply, by its rung's name (a run with a model ladder,
    ``escalate_to``); absent without a ladder."""


class Turn(TypedDict):
    """One completed turn: a model call and what came of it."""

    turn: int
    """1-based turn number across the whole run (all windows)."""
    kind: TurnKind
    """``action`` ran a tool; ``invalid`` got a corrective Observation; ``answer`` ended the run;
    ``stuck`` was a repeat that ended the run; ``forced`` is the last call at the turn cap."""
    reply: str
    """The model's raw reply."""
    text: str
    """The reply as the model sees it in later prompts (cleaned and cut)."""
    thought: str | None
    """The parsed Thought, if any."""
    action: str | None
    """The parsed tool name, if any."""
    action_input: str | None
    """The parsed tool input, if any."""
    observation: str | None
    """The Observation appended after this turn (already truncated), or None."""
    tool_latency_s: float | None
    """Wall time of the tool call in seconds, or None when no tool ran."""
    model_latency_s: float
    """Wall time of the model call in seconds."""
    prompt_tokens: int
    """Tokens of the prompt of this turn's model call."""
    completion_tokens: int
    """Tokens of this turn's reply."""
    token_source: TokenSource
    """Where the token counts came from."""
    message_id: NotRequired[str | None]
    """The id of the model's message (its chat-view copy carries the same id)."""
    cut: NotRequired[bool]
    """True when the reply was cut at ``max_completion_tokens``: it got a corrective
    Observation instead of being acted on (the forced answer is kept as it came)."""
    artifact: NotRequired[Any]
    """The tool's artifact (``response_format="content_and_artifact"``), as plain JSON values;
    the Observation is its content. Absent when the tool gave none."""
    approval: NotRequired[Approval]
    """A person's decision on the action before it ran (the ``approve`` setting); absent when
    none was asked for."""
    tool_calls: NotRequired[list[ToolCallRecord]]
    """``tool_calls`` format: the reply's tool calls as later prompts send them back (a saved
    ``update_notes`` text elided, as in ``text``); the first is the one acted on, every other
    one is answered "one action per turn" (with ``parallel_tool_calls``, each is answered by
    its own entry of ``actions``). Absent in the ``text`` format."""
    tool_call_id: NotRequired[str | None]
    """``tool_calls`` format: the id of the call acted on."""
    args: NotRequired[dict[str, Any] | None]
    """``tool_calls`` format: its arguments as the model sent them."""
    lost_calls: NotRequired[int]
    """Earlier sendings of the turn's model call a kill left without their reply: counted in
    ``prompt_tokens`` (``ModelReply.lost_calls``). Absent when none."""
    actions: NotRequired[list[CallRecord]]
    """``parallel_tool_calls``: a turn that ran several calls of one reply holds each, in the
    reply's order, with its own Observation (``observation`` is then all of them, labelled;
    the single-action fields are the first call's). Absent for a turn of one call."""
    model: NotRequired[str]
    """The model that wrote the turn's reply, by its rung's name (a run with a model ladder,
    ``escalate_to``); absent without a ladder."""


class ModelUsage(TypedDict):
    """One model's share of a run's spend (``RunUsage.by_model``)."""

    prompt_tokens: int
    """Prompt tokens of its calls."""
    completion_tokens: int
    """Completion tokens of its calls."""
    calls: int
    """Its calls that were answered or counted (a call its server failed on is not)."""
    cost: float | None
    """Their cost at the prices in force on its rung (a rung's own ``token_prices``, else the
    run's); None without prices."""


class RunUsage(TypedDict):
    """What a run has spent so far (``out["usage"]``): kept in the checkpoint, so a resumed run
    goes on counting from it (``reactgraph.nodes.loop.middleware.budgets``)."""

    prompt_tokens: int
    """Prompt tokens of every model call of the run (summaries and the forced answer too): the
    provider's usage where it reports one, else counted as the turns are; a call sent and never
    answered (the process killed, the time budget spent) counts its prompt."""
    completion_tokens: int
    """Completion tokens of the same calls."""
    total_tokens: int
    """The two together: what ``max_run_tokens`` caps."""
    cost: float | None
    """Their cost at ``token_prices`` (per million prompt, completion and cached prompt tokens);
    None without prices."""
    cache_read_tokens: NotRequired[int]
    """Of the prompt tokens, those the provider reported reading from its prefix cache
    (``input_token_details.cache_read``, OpenAI's ``cached_tokens``, llama.cpp's), priced at
    the cached price; 0 when none were. Absent from a run's usage from before they were
    counted."""
    seconds: float
    """Wall time spent in the run's steps, in seconds (not time waiting for a person's
    approval, nor time the run was not running)."""
    tool_calls: dict[str, int]
    """Tool name to the calls of it that ran (a call refused by a limit or a person did not)."""
    by_model: NotRequired[dict[str, ModelUsage]]
    """A run with a model ladder (``escalate_to``): the tokens and cost above, split by the
    rung's name of the model that was called (a summary's call under its summarizer's: the
    run's model's name when it is the model itself). Absent without a ladder."""


class Escalation(TypedDict):
    """One move up the model ladder (``escalate_to``)."""

    turn: int
    """Turns completed when the run moved up (the next turn is the new model's)."""
    rung: int
    """The rung moved to: 1 is the first model of ``escalate_to``."""
    from_model: str
    """The rung's name of the model left."""
    to_model: str
    """The rung's name of the model moved to."""
    reason: Literal["fault", "unusable", "stuck"]
    """``fault``: a model call failed after its retries; ``unusable``: ``escalate_after``
    replies in a row could not be used; ``stuck``: the stuck rule would have ended the run."""
    detail: str
    """What happened, in a few words (the fault's type and message, cut)."""


class BudgetRecord(TypedDict):
    """Which budget ended a run (``budget_exhausted``), and what had been spent."""

    budget: str
    """The setting: ``max_run_tokens``, ``max_run_cost`` or ``max_run_seconds``."""
    limit: float
    """Its value."""
    spent: float
    """What the run had spent of it when it stopped (at least ``limit``)."""
    turn: int
    """Turns completed when it was reached."""


class CompactionRecord(TypedDict):
    """One compaction of the history into a summary (compaction variant)."""

    turn: int
    """Number of turns completed when the compaction ran."""
    first_kept_turn: int
    """Turn number of the first turn shown verbatim in the new window."""
    tokens_before: int
    """Prompt tokens before the compaction."""
    tokens_after: int
    """Prompt tokens of the fresh window."""
    summary: str | None
    """The summary, or None when the summarizer failed and older turns were dropped instead."""
    prompt_tokens: int
    """Tokens of the summarizer's prompt (0 when no summary was asked for; both attempts' when
    the first gave an empty summary)."""
    completion_tokens: int
    """Tokens of the summarizer's reply."""
    token_source: NotRequired[TokenSource]
    """Where the summarizer's counts came from (absent when no summary was asked for)."""


class EarlierRun(TypedDict):
    """One run on a thread as later runs see it (``history_runs``): its question and how it
    ended, never its turns."""

    run: int
    """The run's number on the thread (the state's ``run`` while it ran)."""
    question: str
    """Its question (kept up to ``reactgraph.nodes.loop.middleware.conversation.STORED_CHARS``
    characters)."""
    answer: str | None
    """Its final answer (or forced answer), kept like the question; None when it gave none."""
    status: Status | None
    """How it ended; None while it runs, or when it never ended (killed and not resumed, or a
    new question came while it waited for an approval)."""


Messages = Annotated[list[AnyMessage], Chat]


class InputState(TypedDict):
    """What a caller passes to ``invoke``: a question, or chat messages whose last human
    message is the question."""

    question: NotRequired[Annotated[str, Replaced]]
    """The question to answer."""
    messages: NotRequired[Messages]
    """Chat messages (Studio's chat, Agent Chat UI): the last human message is the question."""


class State(TypedDict):
    """The whole state of one run. ``turns`` is the full, append-only transcript."""

    question: Annotated[str, Replaced]
    """The question, kept verbatim for every prompt. Stored once per run (when it is written),
    not in every checkpoint, like the other fields a run fixes at its start."""
    messages: NotRequired[Messages]
    """The chat view of every run on the thread, derived from the turns (see
    ``nodes.chatview.chat``)."""
    settings: NotRequired[Annotated[dict[str, Any], Replaced]]
    """The run's effective settings (the variant's, built values overridden by the run's
    context), fixed when the run starts so a resumed run keeps them. Stored once per run."""
    thread_id: NotRequired[Annotated[str, Replaced]]
    """The checkpoint thread of the run, or a fresh id when the caller gave none. Stored once
    per run."""
    run: NotRequired[Annotated[int, Replaced]]
    """Runs started on this thread so far, this one included: with the turn number it keys each
    tool call, so tools with side effects can recognise a repeat after a resume. Stored once
    per run."""
    turns: NotRequired[Annotated[list[Turn], Transcript]]
    """Every completed turn of this run, in order. Appended to, never edited; stored as deltas,
    so a checkpoint holds only what a step added."""
    reply: NotRequired[ModelReply | None]
    """The latest model reply, between ``call_model`` and the node that completes the turn."""
    parsed: NotRequired[ParsedReply | None]
    """The parse of ``reply``."""
    answer: NotRequired[str | None]
    """The final answer, or None while running or when the run ended without one."""
    status: NotRequired[Status | None]
    """None while running; then how the run ended."""
    notes: NotRequired[Annotated[str, Replaced]]
    """The current notes (notes variants); None where the variant keeps no notes. Stored only
    when they change."""
    resumed_notes: NotRequired[bool]
    """True when the notes were carried over from an earlier run on the same thread."""
    compactions: NotRequired[Annotated[list[CompactionRecord], Rare]]
    """Every compaction of this run, in order (compaction variants)."""
    summary: NotRequired[Annotated[str, Replaced]]
    """The latest summary, or None if no compaction produced one. Stored only when it changes."""
    earlier_runs: NotRequired[Annotated[list[EarlierRun], Earlier]]
    """The thread's runs so far, this one included, oldest first, as question and ending
    (``EarlierRun``): what a later run's prompt shows of the conversation (``history_runs``). A
    run's record is written when it starts and when it ends; at most ``HISTORY_RUNS_MAX`` are
    kept, so a long thread's state stays bounded."""
    structured_answer: NotRequired[Any]
    """A run with an answer schema (``answer_schema``, ``response_format``): the final answer
    as the JSON value that matched it (a dict for an object schema), ``answer`` being its JSON
    text; None while running, without a schema, or when the run ended without a matching
    answer. Its reducer is the last value, as ``answer``'s (one node writes it per step; a
    delta channel cannot hold a value of any JSON type)."""
    usage: NotRequired[Annotated[RunUsage, Replaced]]
    """What the run has spent so far (tokens, cost, seconds, tool calls), kept in every step's
    checkpoint so a resume goes on counting; reset when a new run starts on the thread."""
    budget: NotRequired[Annotated[BudgetRecord, Replaced]]
    """Which budget ended the run and how much was spent (status ``budget_exhausted``); None
    otherwise."""
    budget_warned: NotRequired[Annotated[list[str], Replaced]]
    """The budgets (``max_run_tokens``..., or ``tool_call_limits.<tool>``) whose 80% warning an
    Observation has already given: each is given once."""
    rung: NotRequired[Annotated[int, Replaced]]
    """The model ladder's rung the run has reached (``escalate_to``): 0 the built model, n the
    n-th model of the ladder. In the checkpoint, so a resumed run goes on with that model;
    reset when a new run starts on the thread. Absent without a ladder."""
    escalations: NotRequired[Annotated[list[Escalation], Replaced]]
    """Every move up the model ladder in this run, in order (``Escalation``); a new list is
    written at each (at most one per rung). Absent without a ladder."""
    trace: NotRequired[Annotated[dict[str, str], Replaced]]
    """The run's trace context (``{"traceparent": ...}``, W3C) when it is traced with
    OpenTelemetry, so a resumed run, in any process, continues the same trace (see
    ``nodes.loop.middleware.tracing``); empty when the run is not traced. Stored once per run."""
