"""reactgraph's public entry point: ``build_graph(variant, ...)``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from graphs import transcript

VARIANTS = ("transcript",)
PLANNED = ("notes", "compaction")


def build_graph(
    variant: str,
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver | None = None,
    max_turns: int = 10,
    tool_timeout: float = 10.0,
    max_observation_chars: int = 2000,
    stuck_repeats: int = 3,
) -> CompiledStateGraph:
    """Build and compile one variant of the ReAct loop.

    ``graph.invoke({"question": ...}, config)`` returns the state, whose ``answer``, ``status``
    and ``turns`` are the result. Bad arguments raise ``TypeError`` or ``ValueError``.
    """
    settings: dict[str, Any] = {
        "max_turns": max_turns,
        "tool_timeout": tool_timeout,
        "max_observation_chars": max_observation_chars,
        "stuck_repeats": stuck_repeats,
    }
    if variant == "transcript":
        return transcript.build(model, tools, checkpointer, **settings)
    if variant in PLANNED:
        raise ValueError(f"the {variant!r} variant is not available yet; use 'transcript'")
    raise ValueError(f"unknown variant {variant!r}; choose one of: {', '.join(VARIANTS)}")


__all__ = ["VARIANTS", "build_graph"]
