"""The run's parameters: one typed object, checked once, and the per-run context overrides.

``Settings`` is what nodes read (from the state, so a resumed run keeps the settings it started
with). ``RunContext`` is the graph's context schema: every field optional, ``None`` meaning "the
value given to ``build_graph``".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from os import PathLike
from typing import Any

from typing_extensions import TypedDict


class Settings(TypedDict):
    """Effective parameters of one run."""

    max_turns: int
    """Turn cap; the run stops (or is forced to answer) after this many turns."""
    tool_timeout: float
    """Seconds a tool call may take before its Observation becomes a timeout error."""
    max_observation_chars: int
    """Observations longer than this are cut, with a marker saying how much was cut."""
    stuck_repeats: int
    """The same action with the same input this many times in a row ends the run as stuck."""
    window_turns: int | None
    """How many recent turns the model sees; None shows the whole transcript."""
    max_notes_chars: int
    """Longest notes text update_notes accepts (notes variant)."""
    notes_dir: str
    """Folder of the notes files, one ``<thread_id>.md`` each (notes variant)."""
    compaction_threshold: float
    """Compact when the prompt reaches this share of the context window (compaction variant)."""
    keep_turns: int
    """Recent turns kept verbatim through a compaction (compaction variant)."""
    context_window: int
    """The model's context window in tokens (compaction variant)."""
    model_retries: int
    """Retries of a model call after a transient fault (429, 5xx, timeout)."""
    retry_backoff_s: float
    """First backoff between retries, doubled each time, unless the server sends Retry-After."""
    model_name: str | None
    """A model to call instead of the built one (an OpenAI-compatible name); None: the built."""
    base_url: str | None
    """The OpenAI-compatible server of ``model_name``; None: OpenAI (or OPENAI_BASE_URL)."""


DEFAULTS = Settings(
    max_turns=10,
    tool_timeout=10.0,
    max_observation_chars=2000,
    stuck_repeats=3,
    window_turns=None,
    max_notes_chars=4000,
    notes_dir="runs/notes",
    compaction_threshold=0.75,
    keep_turns=3,
    context_window=128_000,
    model_retries=3,
    retry_backoff_s=0.5,
    model_name=None,
    base_url=None,
)


def _check_int(name: str, value: Any, minimum: int, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def make_settings(base: Settings = DEFAULTS, **overrides: Any) -> Settings:
    """``base`` with ``overrides`` applied and checked; bad values raise TypeError/ValueError."""
    unknown = set(overrides) - set(Settings.__annotations__)
    if unknown:
        raise TypeError(f"unknown setting(s): {', '.join(sorted(unknown))}")
    settings = Settings(**{**base, **overrides})  # type: ignore[typeddict-item]
    _check_int("max_turns", settings["max_turns"], 1)
    _check_int("max_observation_chars", settings["max_observation_chars"], 1)
    _check_int("stuck_repeats", settings["stuck_repeats"], 2)
    _check_int("window_turns", settings["window_turns"], 1, optional=True)
    _check_int("max_notes_chars", settings["max_notes_chars"], 1)
    notes_dir = settings["notes_dir"]
    if not isinstance(notes_dir, str | PathLike):
        raise TypeError(f"notes_dir must be a path, got {type(notes_dir).__name__}")
    settings["notes_dir"] = str(notes_dir)
    _check_int("keep_turns", settings["keep_turns"], 0)
    _check_int("model_retries", settings["model_retries"], 0)
    backoff = settings["retry_backoff_s"]
    if isinstance(backoff, bool) or not isinstance(backoff, int | float) or not backoff >= 0:
        raise ValueError(f"retry_backoff_s must be a number >= 0, got {backoff!r}")
    settings["retry_backoff_s"] = float(backoff)
    for name in ("model_name", "base_url"):
        value = settings[name]
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ValueError(f"{name} must be a non-empty string or None, got {value!r}")
    _check_int("context_window", settings["context_window"], 1)
    threshold = settings["compaction_threshold"]
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise TypeError(f"compaction_threshold must be a number, got {type(threshold).__name__}")
    if not 0 < threshold <= 1:
        raise ValueError(f"compaction_threshold must be in (0, 1], got {threshold}")
    settings["compaction_threshold"] = float(threshold)
    timeout = settings["tool_timeout"]
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"tool_timeout must be a number, got {type(timeout).__name__}")
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"tool_timeout must be a positive number of seconds, got {timeout}")
    settings["tool_timeout"] = float(timeout)
    return settings


def _describe(text: str) -> Any:
    return field(default=None, metadata={"description": text})


@dataclass(frozen=True)
class RunContext:
    """Per-run overrides of the settings given to ``build_graph``; None keeps the built value."""

    max_turns: int | None = _describe("Turn cap for this run.")
    tool_timeout: float | None = _describe("Seconds a tool call may take.")
    max_observation_chars: int | None = _describe("Longest Observation kept before cutting.")
    stuck_repeats: int | None = _describe("Identical actions in a row that end the run as stuck.")
    window_turns: int | None = _describe("Notes variant: recent turns the model sees.")
    max_notes_chars: int | None = _describe("Notes variant: longest notes update_notes accepts.")
    compaction_threshold: float | None = _describe(
        "Compaction variant: compact at this share of the context window (0-1]."
    )
    keep_turns: int | None = _describe("Compaction variant: turns kept verbatim through one.")
    model_name: str | None = _describe(
        "Model to call for this run (OpenAI-compatible name); empty: the built model."
    )
    base_url: str | None = _describe(
        "OpenAI-compatible server URL for model_name (vLLM, Ollama, llama.cpp, LM Studio)."
    )

    def overrides(self) -> dict[str, Any]:
        """The fields this context sets, by name."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


def resolve_settings(defaults: Settings, context: RunContext | None) -> Settings:
    """The run's effective settings: the built defaults with the context's overrides."""
    if context is None:
        return defaults
    if not isinstance(context, RunContext):
        raise TypeError(f"context must be a RunContext, got {type(context).__name__}")
    return make_settings(defaults, **context.overrides())
