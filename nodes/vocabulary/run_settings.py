"""A run's settings as one typed, frozen value, and where every setting is declared.

Each setting is one field of these classes, and declared nowhere else: its type (the
annotation), its default, its description, bounds and where it may be set (its ``Knob``, made by
``knob``). A variant's spec names its class and changes only defaults (``max_turns``). The
checks, the command line's flags, Studio's form and the docs' table all read these fields
(``reactgraph.settings.settings_of``: a read-only view of each). Nodes read a run's value as
attributes (``deps.run_settings(state).max_turns``), so a misspelt setting is a type error under
mypy.

The state stores the run's settings as a plain mapping (what every checkpointer and the
LangGraph server's API keep as they are, and what older checkpoints hold); the value is made
from it each time a node reads it, over the values the graph was built with (a run started
before a setting existed gets the built value).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T", bound="RunSettings")

HISTORY_RUNS_MAX = 100
"""The most earlier runs a prompt may carry (``history_runs``), and so the most run records a
thread's state keeps (``reactgraph.nodes.vocabulary.reducers.kept_runs``)."""
MAX_INSTRUCTIONS_CHARS = 16_000
"""The longest ``instructions`` text: it is sent with every model call of the run."""


@dataclass(frozen=True)
class Knob:
    """What a setting's field declares besides its name, type and default: the field's metadata
    (``metadata["knob"]``), typed. Written by ``knob``, read by ``knob_of``; the checks, the
    command line's flags, Studio's form and the docs' table read it through
    ``reactgraph.settings.Setting``, a view of the field."""

    description: str
    """What it does, in one or two sentences (``--help``, Studio's form, the docs' table)."""
    minimum: float | None = None
    """Smallest allowed value, inclusive."""
    above: float | None = None
    """Lower bound the value must exceed (exclusive)."""
    maximum: float | None = None
    """Largest allowed value, inclusive; for a text, its most characters."""
    most: str | None = None
    """Another setting whose value is this one's largest, inclusive (``window_step``:
    ``window_turns``), checked over the values a graph is built or a run started with."""
    build: bool = True
    """Whether ``build_graph`` takes it as a keyword argument (and the command line a flag)."""
    per_run: bool = True
    """Whether a run's context may change it (and Studio's form shows it)."""
    unset: str = "none"
    """What a None default means, in words (``--help``, the docs' table)."""
    changes_answers: bool = True
    """Whether an answer made under another value is another result (an eval's or a batch's
    results are reused only for the same values)."""
    metavar: str | None = None
    """The value's name in ``--help`` (default: its type's, ``INT``)."""
    at_file: bool = False
    """For a text: its flag also takes ``@FILE``, the text of that file."""
    checker: str | None = None
    """The value's own check beyond its type, by its dotted name (``answer_schema``'s:
    ``reactgraph.nodes.reading.answer_schema.check_schema``, read where the settings are checked,
    so this bottom room imports none above it); it returns the value to keep and raises
    TypeError/ValueError."""
    flag: str | None = None
    """The command line's flag when it is not made from the name (``--tool-call-limit`` for
    ``tool_call_limits``, one limit a flag)."""


def knob(default: Any, description: str, **details: Any) -> Any:
    """A setting's field: its default, its description and the rest of its ``Knob`` (bounds,
    where it may be set...). Its type is the annotation (``tuple[str, ...]``: a list of names;
    ``tuple[float, float]``: a pair of numbers, ``tuple[float, float] | tuple[float, float,
    float]``: two or three; ``dict[str, int]``: a number per name;
    ``dict[str, Any]``: a JSON object, whose flag names a JSON file; a ``Literal``: its
    choices; ``X | None``: None allowed, meaning ``unset``)."""
    metadata = {"knob": Knob(description, **details)}
    if isinstance(default, dict):  # a mapping's default is made afresh for each value
        return dataclasses.field(default_factory=lambda: dict(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def knob_of(item: dataclasses.Field[Any]) -> Knob:
    """A setting's field's ``Knob``: its description, bounds and where it may be set."""
    found = item.metadata.get("knob")
    if not isinstance(found, Knob):
        raise TypeError(f"{item.name} is not a setting: declare it with knob(...)")
    return found


def default_of(item: dataclasses.Field[Any]) -> Any:
    """A setting's field's declared default (a mapping's made afresh)."""
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return item.default


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """The settings every variant has."""

    max_turns: int = knob(
        10, "Turn cap: after this many turns the run takes its cap exit.", minimum=1
    )
    tool_timeout: float = knob(
        10.0,
        "Seconds a tool call may take before its Observation becomes a timeout error.",
        above=0,
    )
    max_observation_chars: int = knob(
        2000,
        "Observations longer than this many characters are cut, with a marker saying how much.",
        minimum=1,
    )
    stuck_repeats: int = knob(
        3,
        "The same action with the same input (or the same unreadable reply) this many times in "
        "a row ends the run as stuck.",
        minimum=2,
    )
    model_retries: int = knob(
        3,
        "Retries of a model call after a transient fault (429, 5xx, timeout, malformed response).",
        minimum=0,
        changes_answers=False,  # how faults are survived, not what is answered
    )
    retry_backoff_s: float = knob(
        0.5,
        "First wait between retries in seconds, doubled each time, unless the server sends "
        "Retry-After.",
        minimum=0,
        changes_answers=False,
    )
    max_completion_tokens: int | None = knob(
        4096,
        "Cap on the tokens of each model reply (the forced answer and summaries too); None: no "
        "cap. A reply cut at the cap gets a corrective Observation.",
        minimum=1,
        unset="no cap",
    )
    action_format: Literal["text", "tool_calls"] = knob(
        "text",
        "How the model gives its Action: text (an Action: tool_name[input] line in its reply) "
        "or tool_calls (the model's native tool calls; a reply with no tool call is the "
        "answer).",
    )
    approve: tuple[str, ...] = knob(
        (),
        "Tools whose Actions wait for a person to approve, edit or reject them before they run: "
        "tool names (a list, or separated by commas), all, or none.",
        metavar="TOOL",
    )
    model_name: str | None = knob(
        None,
        "Model to call for this run (an OpenAI-compatible name); empty: the built model.",
        build=False,
        unset="the built model",
    )
    base_url: str | None = knob(
        None,
        "OpenAI-compatible server URL for model_name (vLLM, Ollama, llama.cpp, LM Studio).",
        build=False,
        unset="the built model's",
    )
    history_runs: int = knob(
        5,
        "Earlier runs on the thread each prompt carries (oldest first) as their questions and "
        "answers, in one block before the question; 0: each question alone.",
        minimum=0,
        maximum=HISTORY_RUNS_MAX,
        # A batch's or an eval's question runs alone on a thread of its own: no earlier runs.
        changes_answers=False,
    )
    instructions: str | None = knob(
        None,
        "The application's instructions to its agent (tone, language, domain rules, which tool "
        f"to prefer), at most {MAX_INSTRUCTIONS_CHARS} characters: a block of their own in every "
        "prompt of the run, after the loop's rules and before the question.",
        maximum=MAX_INSTRUCTIONS_CHARS,
        metavar="TEXT|@FILE",
        at_file=True,
    )
    answer_schema: dict[str, Any] | None = knob(  # noqa: RUF009 (knob is a dataclasses.field)
        None,
        "A JSON schema the answer must match: the Final Answer is asked for as one JSON object, "
        "checked (a mismatch gets a corrective Observation), and kept as structured_answer. "
        "build_graph's response_format (a pydantic model, a TypedDict) sets it too.",
        unset="a text answer",
        metavar="FILE.json",
        checker="reactgraph.nodes.reading.answer_schema.check_schema",
    )
    # --- Run budgets (``nodes.loop.middleware.budgets``): what one run may spend in all. ---
    max_run_tokens: int | None = knob(
        None,
        "Budget of the run's tokens: prompt plus completion tokens of every model call (summaries "
        "and the forced answer too); once spent, no further model call or tool runs and the run "
        "ends budget_exhausted. None: no budget.",
        minimum=1,
        unset="no budget",
    )
    max_run_cost: float | None = knob(
        None,
        "Budget of the run's cost, in the currency of token_prices (which it needs); once spent, "
        "the run ends budget_exhausted. None: no budget.",
        above=0,
        unset="no budget",
    )
    token_prices: tuple[float, float] | tuple[float, float, float] | None = knob(
        None,
        "Prices of a million prompt (input) and completion (output) tokens, and of a million "
        "prompt tokens the provider read from its prefix cache (cached; default: the input "
        "price), for the run's cost (usage's cost, max_run_cost): INPUT,OUTPUT[,CACHED]. None: "
        "the cost is not counted.",
        minimum=0,
        unset="no prices",
        metavar="INPUT,OUTPUT[,CACHED]",
    )
    max_run_seconds: float | None = knob(
        None,
        "Budget of the run's wall time in seconds, not counting time waiting for a person's "
        "approval; once spent, the run ends budget_exhausted. None: no budget.",
        above=0,
        unset="no budget",
    )
    tool_call_limits: dict[str, int] = knob(  # noqa: RUF009 (knob gives a default_factory)
        {},
        "Most calls a tool may make in a run, per tool (TOOL=N, repeatable): a call past its "
        "limit does not run, its Observation says so, and other tools still run.",
        minimum=0,
        metavar="TOOL=N",
        flag="--tool-call-limit",
    )
    parallel_tool_calls: bool = knob(
        False,
        "Run every tool call of one reply at once (up to max_parallel_calls): several "
        "Action lines in the text format, several tool calls in the tool_calls format. Off: one "
        "action per turn, any other call answered as not run.",
    )
    max_parallel_calls: int = knob(
        8,
        "With parallel_tool_calls: the most calls of one reply that run; each call past it "
        "gets a corrective Observation.",
        minimum=1,
        maximum=16,
    )
    constrained_decoding: Literal["off", "gbnf"] = knob(
        "off",
        "Replies constrained by the server to the ReAct format: off, or gbnf (a grammar built "
        "from the run's tools, sent as llama.cpp's grammar and vLLM's structured_outputs; in "
        "the tool_calls format, strict tool schemas). A server that rejects it: one warning, "
        "and the run goes on unconstrained.",
    )

    # --- The model ladder (``nodes.loop.middleware.ladder``): the rungs above ``model``. ---
    escalate_to: tuple[str, ...] = knob(
        (),
        "The model ladder: the rungs above the model, in order (MODEL[@BASE_URL], repeatable; "
        "build_graph takes chat models). The run moves up one rung, for the rest of the run, "
        "when a model call fails after its retries, when escalate_after replies in a row cannot "
        "be used, or instead of ending stuck. A run's context may name fewer rungs (their "
        "names), never others.",
        metavar="MODEL[@BASE_URL]",
        unset="no ladder",
    )
    escalate_after: int = knob(
        2,
        "Replies in a row the loop cannot use (no Action and no answer, an unknown tool, "
        "arguments that cannot be read, an answer that fails its schema) after which the run "
        "moves up the ladder (escalate_to).",
        minimum=1,
    )

    @classmethod
    def of(cls: type[T], values: Mapping[str, Any]) -> T:
        """The value from a mapping of checked settings; keys of other variants (or of an older
        version) are left out."""
        known = {f.name for f in dataclasses.fields(cls)}
        # A list of names (or a pair of prices) comes back from a checkpointer as a list.
        given: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in known
        }
        return cls(**given)

    def over(self: T, values: Mapping[str, Any]) -> T:
        """This value with ``values`` over it (a run's stored settings, or its context); keys
        of other variants (or of an older version) are left out."""
        return self.of({**vars(self), **values})

    def as_dict(self) -> dict[str, Any]:
        """The settings as the state stores them: a list of names (``approve``) or a pair
        (``token_prices``) as a list, what a checkpointer gives back; a mapping as a dict."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }


@dataclass(frozen=True, kw_only=True)
class NotesSettings(RunSettings):
    """The notes variants' own settings besides the common ones."""

    window_turns: int = knob(
        8, "How many recent turns the model sees besides its notes.", minimum=1
    )
    window_step: int = knob(
        1,
        "Turns the window drops at once (1 to window_turns): it keeps between window_turns and "
        "window_turns + window_step - 1 recent turns, so most calls extend the previous prompt "
        "and a server's prefix cache reuses it; 1: always the last window_turns turns.",
        minimum=1,
        most="window_turns",
    )
    max_notes_chars: int = knob(4000, "Longest notes text update_notes accepts.", minimum=1)
    notes_dir: str = knob(
        "runs/notes",
        "Folder of the notes files, one per thread (unless a store is given).",
        per_run=False,  # a path: never chosen by whoever starts a run
        changes_answers=False,
    )


@dataclass(frozen=True, kw_only=True)
class CompactionSettings(RunSettings):
    """The compaction variants' own settings besides the common ones."""

    compaction_threshold: float = knob(
        0.75,
        "Compact when the prompt reaches this share of the context window (0-1].",
        above=0,
        maximum=1,
    )
    keep_turns: int = knob(3, "Recent turns kept word for word through a compaction.", minimum=0)
    context_window: int | None = knob(
        None,
        "The model's context window in tokens (unset: looked up from the model's name).",
        minimum=1,
        unset="looked up",
    )


@dataclass(frozen=True, kw_only=True)
class NotesCompactionSettings(CompactionSettings, NotesSettings):
    """Both: notes and a window, and compaction."""


def notes_limit(settings: RunSettings) -> int | None:
    """The run's ``max_notes_chars`` when its variant keeps notes, else None."""
    return settings.max_notes_chars if isinstance(settings, NotesSettings) else None


def parallel_cap(settings: RunSettings) -> int | None:
    """The most calls of one reply that run: ``max_parallel_calls`` when
    ``parallel_tool_calls`` is on, else None (one action per turn)."""
    return settings.max_parallel_calls if settings.parallel_tool_calls else None


def narrowed(settings: RunSettings, kind: type[T]) -> T:
    """``settings`` as the variant's own class a node needs (``CompactionSettings`` for
    compaction's node); TypeError for a graph whose variant has no such settings."""
    if not isinstance(settings, kind):
        raise TypeError(f"this node needs {kind.__name__}, the run has {type(settings).__name__}")
    return settings
