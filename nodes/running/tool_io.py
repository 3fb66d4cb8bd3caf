"""A tool's input and output as the loop has them, for any ``BaseTool``.

The model writes one string per action, ``tool_name[input]``. What the tool gets depends on the
arguments the model is meant to see: ``tool.tool_call_schema`` (a pydantic model or a JSON-schema
dict, injected arguments already left out) when the tool declares an ``args_schema``; else what
its ``_run`` takes, as LangChain reads it (the classic ``Tool``: one string, ``tool_input``):

- no argument: the input is ignored (``pid[]``, ``pid[now]`` both call it with no arguments);
- one argument: the raw input under that argument's name (a non-string argument gets the input
  read as JSON when it parses: ``slow[2]`` is ``{"seconds": 2}``);
- several: the input must be a JSON object of them;
- a schema-less tool that takes only ``*args``: the raw input itself, as LangChain passes a string.

A tool whose arguments cannot be read (a pydantic schema with no JSON form) is still listed; a call
to it is an Observation naming it and what it expects.

The tool is then invoked with a LangChain ``ToolCall``, as ``ToolNode`` does, so it answers with a
``ToolMessage``: its content (or any other result) is the Observation's text (``as_text``), and
its artifact (``content_and_artifact`` tools) is kept as plain JSON values every checkpointer
stores, or a marker when it is too large or cannot be read (``keepable``).

The arguments the model never sees are filled as LangGraph's ``ToolNode`` fills them
(``reactgraph.nodes.running.injection``).
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, Tool
from langgraph.types import Command

from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.bounded import remembered
from reactgraph.nodes.vocabulary.storable import storable

# What a schema-less tool's ``_run`` takes that LangChain fills itself, never the model.
_FILLED = frozenset({"self", "config", "run_manager", "callbacks"})
RAW = "*args"
"""The one "argument" of a schema-less tool that takes only ``*args``: it gets the raw input."""


class Uncallable(ValueError):
    """The loop cannot call this tool; the message is the model's Observation."""


def _expects(tool: BaseTool) -> str:
    if isinstance(tool, Tool) and tool.args_schema is None:
        return ", ".join(_required(tool)) or "one string"
    fields = getattr(tool.args_schema, "model_fields", None) or {}
    named = [f"{n}: {getattr(f.annotation, '__name__', f.annotation)}" for n, f in fields.items()]
    return ", ".join(named) or type(tool.args_schema).__name__


def _required(tool: Tool) -> list[str]:
    """The positional parameters a classic ``Tool``'s function requires, but those LangChain
    fills itself (``callbacks``, ``config``)."""
    function = tool.func or tool.coroutine
    try:
        parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [
        p.name
        for p in parameters
        if p.kind in kinds and p.default is p.empty and p.name not in _FILLED
    ]


def _declared(tool: BaseTool) -> dict[str, Any]:
    """What a tool without an ``args_schema`` takes. LangChain infers its ``tool_call_schema``
    from ``_run``'s signature, which for the classic ``Tool`` is ``(*args, config, **kwargs)``;
    ``tool.args`` says what it really takes (one string), and ``config`` is LangChain's."""
    if isinstance(tool, Tool):
        if len(_required(tool)) > 1:  # it would fail on every call, missing an argument
            raise TypeError("a classic Tool passes its function one string")
        return dict(tool.args)
    try:
        parameters = list(inspect.signature(type(tool)._run).parameters.values())
    except (TypeError, ValueError):
        return dict(tool.args)
    return _run_args(tool, parameters)


def _run_args(tool: BaseTool, parameters: list[inspect.Parameter]) -> dict[str, Any]:
    """The arguments ``_run`` names (but those LangChain fills), with their schemas from
    ``tool.args``; a ``_run`` that takes only ``*args`` gets the raw input (``RAW``)."""
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    args = tool.args
    found = {name: args.get(name, {}) for name in named if name not in _FILLED}
    if not found and any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return {RAW: {"type": "string"}}
    return found


# Each tool's visible arguments, read once per tool and schema (a call reads its arguments, and
# the chat view its tool call's, at every turn): by (id, hidden), with the tool and its schema.
_VISIBLE: dict[tuple[int, frozenset[str]], tuple[BaseTool, Any, dict[str, Any]]] = {}
_VISIBLE_LOCK = threading.Lock()
_MOST_TOOLS = 512


def visible_args(tool: BaseTool, hidden: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The arguments the model writes, name -> JSON schema, in the schema's order.

    Raises ``Uncallable`` when the tool's schema has no JSON form to read them from.
    """
    key = (id(tool), hidden)
    found = _VISIBLE.get(key)
    if found is not None and found[0] is tool and found[1] is tool.args_schema:
        return dict(found[2])
    properties = _visible(tool, hidden)
    with _VISIBLE_LOCK:
        remembered(_VISIBLE, key, (tool, tool.args_schema, properties), _MOST_TOOLS)
    return dict(properties)


def _visible(tool: BaseTool, hidden: frozenset[str]) -> dict[str, Any]:
    """``visible_args``, read from the tool's schema."""
    try:
        if tool.args_schema is None:
            properties = _declared(tool)
        else:
            schema: Any = tool.tool_call_schema
            if not isinstance(schema, Mapping):
                to_json = getattr(schema, "model_json_schema", None) or schema.schema
                schema = to_json()
            properties = schema.get("properties") or {}
        if not isinstance(properties, Mapping):
            raise TypeError(f"its properties are a {type(properties).__name__}, not an object")
    except Exception as error:  # pydantic's PydanticInvalidForJsonSchema, a broken schema
        raise Uncallable(
            prompts.TOOL_UNCALLABLE.format(
                name=tool.name, expects=_expects(tool), why=_first_line(error)
            )
        ) from None
    return {name: spec for name, spec in properties.items() if name not in hidden}


def model_json(text: str) -> Any:
    """The JSON value a model wrote; ValueError when it is not JSON, or nests deeper than the
    decoder reads (its RecursionError, at about a thousand levels: a few KB of brackets)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON nests too deep") from None


def _first_line(error: BaseException) -> str:
    """An error's first line, its type's name when it has none."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


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
        value = model_json(text)
    except ValueError:
        return text  # the tool's own validation tells the model what is wrong
    if isinstance(value, dict) and set(value) == {name}:
        return value[name]
    return value


def tool_arguments(
    tool: BaseTool, tool_input: str, hidden: frozenset[str] = frozenset()
) -> dict[str, Any] | str:
    """The model's arguments for ``tool`` from its input string (see the module doc): a dict,
    or the raw string for a tool that takes only ``*args``.

    Raises ValueError with the text the model should read when the input does not fit.
    """
    properties = visible_args(tool, hidden)
    if not properties:
        return {}
    if list(properties) == [RAW]:
        return tool_input
    if len(properties) == 1:
        name, spec = next(iter(properties.items()))
        return {name: _one(name, spec, tool_input)}
    try:
        value = model_json(tool_input)
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


def call_arguments(
    tool: BaseTool, args: Mapping[str, Any], hidden: frozenset[str] = frozenset()
) -> dict[str, Any] | str:
    """What ``tool`` gets from a native tool call's arguments (the ``tool_calls`` format): the
    model's own, less any it wrote for an injected argument; for a one-argument tool, a single
    value under another name is that argument's (small models often call it ``input``); for a
    tool that takes only ``*args``, the raw string. The tool's own validation judges the rest.

    Raises ``Uncallable`` (a ValueError: the Observation) when the tool's schema cannot be read.
    """
    properties = visible_args(tool, hidden)
    if not properties:
        return {}
    given = {name: value for name, value in args.items() if name not in hidden}
    if list(properties) == [RAW]:
        value = next(iter(given.values())) if len(given) == 1 else given
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(properties) == 1 and len(given) == 1:
        (name,) = properties
        given = {name: next(iter(given.values()))}
    return given


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
