"""A tool's answer as the loop keeps it: a ``ToolMessage``'s content (or any other result) as
the Observation's text, and its artifact (``content_and_artifact`` tools) as plain JSON values
every checkpointer stores, or a marker when it is too large or cannot be read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from reactgraph.nodes import prompts
from reactgraph.nodes.storable import storable

ARTIFACT_MAX_CHARS = 100_000
"""An artifact whose JSON is longer is kept as a marker saying so (it lives in every checkpoint
of the run)."""


def as_text(result: Any) -> str:
    """A tool's result as the model reads it."""
    if isinstance(result, str):
        return result
    content = getattr(result, "content", None)  # a ToolMessage or similar
    if content is not None and content is not result:
        return as_text(content)
    if isinstance(result, list) and all(isinstance(b, dict) and "text" in b for b in result):
        return "\n".join(str(b["text"]) for b in result)  # content blocks (MCP, Anthropic)
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):  # an int too long to print, a value nested too deep
        return prompts.TOOL_UNPRINTABLE.format(kind=type(result).__name__)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {storable(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return storable(str(value))


def keepable(artifact: Any) -> Any:
    """The artifact as the turn record keeps it: plain JSON values every checkpointer stores,
    or a marker when it is too large."""
    if artifact is None:
        return None
    try:
        cleaned = _clean(artifact)
        size = len(json.dumps(cleaned, ensure_ascii=False))
    except (ValueError, RecursionError):
        return prompts.ARTIFACT_UNKEPT.format(kind=type(artifact).__name__, size="unknown")
    if size > ARTIFACT_MAX_CHARS:
        return prompts.ARTIFACT_UNKEPT.format(kind=type(artifact).__name__, size=size)
    return cleaned


def outcome(name: str, result: Any) -> tuple[str, Any]:
    """The Observation and the artifact of a tool's answer."""
    if isinstance(result, Command) or (
        isinstance(result, list) and any(isinstance(r, Command) for r in result)
    ):
        return prompts.TOOL_COMMAND.format(name=name), None
    artifact = result.artifact if isinstance(result, ToolMessage) else None
    return as_text(result) or "(no output)", keepable(artifact)
