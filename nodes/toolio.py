"""A tool's input and output as the ReAct text protocol has them, for any ``BaseTool``.

The model writes one string per action, ``tool_name[input]``. What the tool gets depends on the
arguments the model is meant to see (``tool.tool_call_schema``: a pydantic model or a JSON-schema
dict, injected arguments already left out):

- no argument: the input is ignored (``pid[]``, ``pid[now]`` both call it with no arguments);
- one argument: the raw input under that argument's name (a non-string argument gets the input
  read as JSON when it parses: ``slow[2]`` is ``{"seconds": 2}``);
- several: the input must be a JSON object of them.

The tool is then invoked with a LangChain ``ToolCall``, as ``ToolNode`` does, so it answers with a
``ToolMessage``: its content is the Observation, its artifact (``content_and_artifact`` tools)
is kept in the turn record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command

from reactgraph.nodes import prompts
from reactgraph.nodes.storable import storable

ARTIFACT_MAX_CHARS = 100_000
"""An artifact whose JSON is longer is kept as a marker saying so (it lives in every checkpoint
of the run)."""


def visible_args(tool: BaseTool, hidden: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The arguments the model writes, name -> JSON schema, in the schema's order."""
    schema: Any = tool.tool_call_schema
    if not isinstance(schema, Mapping):
        to_json = getattr(schema, "model_json_schema", None) or getattr(schema, "schema", None)
        schema = to_json() if to_json is not None else {}
    properties = schema.get("properties") or {}
    return {name: spec for name, spec in properties.items() if name not in hidden}


def _kind(spec: Any) -> str:
    if not isinstance(spec, Mapping):
        return "any"
    kind = spec.get("type") or next(
        (s.get("type") for s in spec.get("anyOf", []) if s.get("type") != "null"), "any"
    )
    return str(kind)


def describe_schema(tool: BaseTool, hidden: frozenset[str] = frozenset()) -> str:
    """The tool's arguments as the model should write them: ``{"a": integer, "b": integer}``."""
    parts = [f'"{name}": {_kind(spec)}' for name, spec in visible_args(tool, hidden).items()]
    return "{" + ", ".join(parts) + "}"


def _one(name: str, spec: Any, text: str) -> Any:
    """The value of a one-argument tool's argument: the raw text, or its JSON reading when the
    argument is not a string and the text parses."""
    if _kind(spec) in ("string", "any"):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text  # the tool's own validation tells the model what is wrong
    if isinstance(value, dict) and set(value) == {name}:
        return value[name]
    return value


def tool_arguments(
    tool: BaseTool, tool_input: str, hidden: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The model's arguments for ``tool`` from its input string (see the module doc).

    Raises ValueError with the text the model should read when the input does not fit.
    """
    properties = visible_args(tool, hidden)
    if not properties:
        return {}
    if len(properties) == 1:
        name, spec = next(iter(properties.items()))
        return {name: _one(name, spec, tool_input)}
    try:
        value = json.loads(tool_input)
    except ValueError:
        problem = "the input is not valid JSON."
    else:
        if isinstance(value, dict):
            return value
        problem = f"got a JSON {type(value).__name__}."
    raise ValueError(
        prompts.TOOL_BAD_INPUT.format(
            name=tool.name, schema=describe_schema(tool, hidden), problem=problem
        )
    )


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
    except ValueError:  # an int too long to print, say
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
