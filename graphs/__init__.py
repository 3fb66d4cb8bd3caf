"""reactgraph's public entry point: ``build_graph(variant, ...)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from reactgraph import compaction, notes, transcript
from reactgraph.nodes.deps import TokenCounterFn

VARIANTS = ("transcript", "notes", "compaction")
# LangGraph reads the default durability of a run from this configurable key.
_DURABILITY_KEY = "__pregel_durability"
# Settings that only some variants use; passing one to another variant is a mistake.
_ONLY = {
    "window_turns": ("notes",),
    "max_notes_chars": ("notes",),
    "notes_dir": ("notes",),
    "store": ("notes",),
    "compaction_threshold": ("compaction",),
    "keep_turns": ("compaction",),
    "context_window": ("compaction",),
    "token_counter": ("compaction",),
    "summarizer": ("compaction",),
}


def build_graph(
    variant: str,
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver | None = None,
    store: BaseStore | None = None,
    max_turns: int | None = None,
    tool_timeout: float = 10.0,
    max_observation_chars: int = 2000,
    stuck_repeats: int = 3,
    model_retries: int = 3,
    window_turns: int | None = None,
    max_notes_chars: int | None = None,
    notes_dir: str | None = None,
    compaction_threshold: float | None = None,
    keep_turns: int | None = None,
    context_window: int | None = None,
    token_counter: TokenCounterFn | None = None,
    summarizer: BaseChatModel | None = None,
) -> CompiledStateGraph:
    """Build and compile one variant of the ReAct loop.

    ``max_turns`` defaults to 10 (transcript), 40 (notes) or 60 (compaction). Notes:
    ``window_turns`` 8, ``max_notes_chars`` 4000, ``notes_dir`` "runs/notes", and ``store`` to
    keep the notes in a LangGraph store instead of files. Compaction: ``compaction_threshold``
    0.75, ``keep_turns`` 3, ``context_window`` looked up from the model's name (else 128,000),
    ``token_counter`` tiktoken, ``summarizer`` the model itself.

    ``graph.invoke({"question": ...}, config)`` returns the state, whose ``answer``, ``status``
    and ``turns`` are the result. Bad arguments raise ``TypeError`` or ``ValueError``.
    """
    optional = {
        "max_turns": max_turns,
        "window_turns": window_turns,
        "max_notes_chars": max_notes_chars,
        "notes_dir": notes_dir,
        "store": store,
        "compaction_threshold": compaction_threshold,
        "keep_turns": keep_turns,
        "context_window": context_window,
        "token_counter": token_counter,
        "summarizer": summarizer,
    }
    given = {name: value for name, value in optional.items() if value is not None}
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of: {', '.join(VARIANTS)}")
    misplaced = [name for name in given if variant not in _ONLY.get(name, (variant,))]
    if misplaced:
        raise ValueError(f"{', '.join(misplaced)} do(es) not apply to the {variant!r} variant")
    settings: dict[str, Any] = {
        "tool_timeout": tool_timeout,
        "max_observation_chars": max_observation_chars,
        "stuck_repeats": stuck_repeats,
        "model_retries": model_retries,
        **given,
    }
    builders = {
        "transcript": transcript.build,
        "notes": notes.build,
        "compaction": compaction.build,
    }
    graph = builders[variant](model, tools, checkpointer, **settings)
    if checkpointer is not None:
        # Write each step's checkpoint before the next starts, so a run killed at any point
        # resumes where it stopped ("async", LangGraph's default, can lose the last steps).
        # An explicit `durability=` on invoke/stream still wins.
        graph = graph.with_config(configurable={_DURABILITY_KEY: "sync"})
    return graph


__all__ = ["VARIANTS", "build_graph"]
