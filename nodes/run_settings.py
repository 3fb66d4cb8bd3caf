"""A run's settings as one typed, frozen value, and where every setting is declared.

Each setting is one field of these classes: its type, its default, its description and bounds
(``knob``). A variant's spec names its class and changes only defaults (``max_turns``); its
``Setting`` values, the command line's flags, Studio's form and the README's table all come from
these fields (``reactgraph.settings.settings_of``). Nodes read a run's value as attributes
(``deps.run_settings(state).max_turns``), so a misspelt setting is a type error under mypy.

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


def knob(
    default: Any,
    description: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    build: bool = True,
    per_run: bool = True,
    unset: str = "none",
    changes_answers: bool = True,
    metavar: str | None = None,
) -> Any:
    """A setting's field: its default, its description (``--help``, Studio, the README), its
    bounds, and where it may be set (``build``: a ``build_graph`` keyword; ``per_run``: a run's
    context); ``unset`` says in words what a None default means; ``changes_answers``: whether
    an answer made under another value is another result (an eval's or a batch's results are
    reused only for the same values); ``metavar``: the value's name in ``--help``. Its type is the
    annotation (``tuple[str, ...]``: a list of names)."""
    metadata = {
        "description": description,
        "minimum": minimum,
        "above": above,
        "maximum": maximum,
        "build": build,
        "per_run": per_run,
        "unset": unset,
        "changes_answers": changes_answers,
        "metavar": metavar,
    }
    return dataclasses.field(default=default, metadata={"setting": metadata})


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

    @classmethod
    def of(cls: type[T], values: Mapping[str, Any]) -> T:
        """The value from a mapping of checked settings; keys of other variants (or of an older
        version) are left out."""
        known = {f.name for f in dataclasses.fields(cls)}
        # A list of names comes back from a checkpointer as a list.
        given: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in known
        }
        return cls(**given)

    def as_dict(self) -> dict[str, Any]:
        """The settings as the state stores them: a list of names (``approve``) as a list,
        what a checkpointer gives back."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }


@dataclass(frozen=True, kw_only=True)
class NotesSettings(RunSettings):
    """The notes variants' own settings besides the common ones."""

    window_turns: int = knob(
        8, "How many recent turns the model sees besides its notes.", minimum=1
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


def uses_tool_calls(settings: RunSettings) -> bool:
    """Whether the run's model calls its tools natively (``action_format="tool_calls"``)."""
    return settings.action_format == "tool_calls"


def notes_limit(settings: RunSettings) -> int | None:
    """The run's ``max_notes_chars`` when its variant keeps notes, else None."""
    return settings.max_notes_chars if isinstance(settings, NotesSettings) else None


def narrowed(settings: RunSettings, kind: type[T]) -> T:
    """``settings`` as the variant's own class a node needs (``CompactionSettings`` for
    compaction's node); TypeError for a graph whose variant has no such settings."""
    if not isinstance(settings, kind):
        raise TypeError(f"this node needs {kind.__name__}, the run has {type(settings).__name__}")
    return settings
