"""What the model is told of its tools: one line each in the text format's prompt
(``describe_tools``), and, bound to the model, a function schema each for the ``tool_calls``
action format.

Each tool, and each of the variant's own actions (``update_notes``), becomes the JSON schema of a
function, built from the arguments the model is meant to write (``tool_io.visible_args``: the
same reading of every tool form as the text format's; injected arguments never shown). The model's
``bind_tools`` turns them into the call arguments its provider wants (``tools``, and for the
OpenAI family ``tool_choice="auto"``, which llama-cpp-python's chatml-function-calling needs
before it calls anything); every call of the run passes those, through the same retries,
deadline and streaming as the text format.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import BaseTool

from reactgraph.nodes.calling.streamchoice import openai_family
from reactgraph.nodes.running.injection import Injected
from reactgraph.nodes.running.tool_io import RAW, Uncallable, describe_schema, visible_args
from reactgraph.nodes.vocabulary import prompts

logger = logging.getLogger(__name__)

RAW_PARAMETER = "input"
"""What a tool that takes only ``*args`` calls its one argument in its schema."""


def describe_tool(tool: BaseTool, hidden: frozenset[str] = frozenset()) -> str:
    """A tool's description for the prompt; a tool of several arguments says how to write them
    (injected arguments are never shown)."""
    text = " ".join(tool.description.split())
    try:
        shown = visible_args(tool, hidden)
    except Uncallable as error:
        logger.warning("the model cannot call the tool %r: %s", tool.name, error)
        return text
    if len(shown) > 1:
        text = prompts.TOOL_JSON_INPUT.format(
            description=text, schema=describe_schema(tool, hidden)
        )
    return text


def describe_tools(
    tools: Sequence[BaseTool],
    extra: Sequence[tuple[str, str]] = (),
    injected: Mapping[str, Injected] | None = None,
) -> str:
    """One line per action, name and description, for the prompt's {tool_descriptions}."""
    injected = injected or {}
    pairs = [
        (tool.name, describe_tool(tool, getattr(injected.get(tool.name), "hidden", frozenset())))
        for tool in tools
    ]
    pairs.extend(extra)
    return "\n".join(prompts.TOOL_LINE.format(name=n, description=d) for n, d in pairs)


def parameters(tool: BaseTool, hidden: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The arguments the model writes for ``tool``, name -> JSON schema (none when its schema
    cannot be read: a call to it gets an Observation saying so)."""
    try:
        shown = visible_args(tool, hidden)
    except Uncallable:
        return {}
    if list(shown) == [RAW]:
        return {RAW_PARAMETER: {"type": "string"}}
    return {name: dict(spec) if isinstance(spec, Mapping) else {} for name, spec in shown.items()}


def _hidden(tool: BaseTool, injected: Mapping[str, Injected]) -> frozenset[str]:
    return getattr(injected.get(tool.name), "hidden", frozenset())


def action_arguments(
    tools: Mapping[str, BaseTool],
    injected: Mapping[str, Injected],
    extra_actions: Sequence[tuple[str, str]],
    notes_limit: int | None,
) -> dict[str, dict[str, Any] | None]:
    """Every action with the arguments the model writes (name -> JSON schema), for the step's
    grammar (``constrained_decoding``): None for a tool whose schema cannot be read; the
    variant's own actions take their text, at most the run's ``max_notes_chars`` long."""
    found: dict[str, dict[str, Any] | None] = {}
    for name, tool in tools.items():
        try:
            visible_args(tool, _hidden(tool, injected))
        except Uncallable:
            found[name] = None
            continue
        found[name] = parameters(tool, _hidden(tool, injected))
    for name, _ in extra_actions:
        text: dict[str, Any] = {"type": "string"}
        if notes_limit is not None:
            text["maxLength"] = notes_limit
        found[name] = {"text": text}
    return found


def _function(name: str, description: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    required = [n for n, spec in properties.items() if "default" not in spec]
    schema = {"type": "object", "properties": dict(properties), "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


def action_parameters(
    tools: Mapping[str, BaseTool],
    injected: Mapping[str, Injected],
    extra_actions: Sequence[tuple[str, str]],
) -> dict[str, tuple[str, ...]]:
    """Every action the model may call with the names of its arguments (the reader maps a
    call's arguments to the turn record's ``action_input`` with them)."""
    found = {name: tuple(parameters(tool, _hidden(tool, injected))) for name, tool in tools.items()}
    found.update({name: ("text",) for name, _ in extra_actions})
    return found


def schema_name(schema: Mapping[str, Any]) -> str:
    """The name of a tool's JSON schema (``{"type": "function", "function": {"name": ...}}``,
    or a flat ``{"name": ...}``)."""
    inner = schema.get("function")
    return str((inner if isinstance(inner, Mapping) else schema).get("name", ""))


def names_of(tools: Any) -> tuple[str, ...]:
    """The names of a model request's tools (a ``BaseTool``'s, or a JSON schema's)."""
    return tuple(
        schema_name(t) if isinstance(t, Mapping) else str(getattr(t, "name", "")) for t in tools
    )


def tool_schemas(
    tools: Mapping[str, BaseTool],
    injected: Mapping[str, Injected],
    extra_actions: Sequence[tuple[str, str]],
    notes_limit: int | None,
) -> list[dict[str, Any]]:
    """The functions the model may call: the tools, then the variant's own actions (their
    descriptions filled with the run's ``max_notes_chars``)."""
    schemas = [
        _function(
            name,
            " ".join(tool.description.split()),
            parameters(tool, _hidden(tool, injected)),
        )
        for name, tool in tools.items()
    ]
    for name, description in extra_actions:
        text = {"type": "string", "description": prompts.UPDATE_NOTES_TEXT}
        filled = description.replace(prompts.NOTES_LIMIT, str(notes_limit))
        schemas.append(_function(name, filled[:1].upper() + filled[1:], {"text": text}))
    return schemas


def binding_options(model: BaseChatModel) -> dict[str, Any]:
    """What ``bind_tools`` is given besides the tools: ``tool_choice="auto"`` for the OpenAI
    family (OpenAI's own default; llama-cpp-python's chatml-function-calling ignores the tools
    without it), nothing for other models (their default)."""
    return {"tool_choice": "auto"} if openai_family(model) else {}


def refused(bound: dict[str, Any]) -> dict[str, Any]:
    """The same call arguments with the tools refused where the binding says how to choose
    (``tool_choice="none"``); as they are otherwise (the tools stay, for the transcript)."""
    return {**bound, "tool_choice": "none"} if "tool_choice" in bound else bound


def _closed(schema: Any, depth: int = 0) -> Any:
    """A JSON schema with every object closed (``additionalProperties: false``, what strict
    function schemas ask for), at most a few dozen levels down."""
    if depth > 32:
        return schema
    if isinstance(schema, Mapping):
        closed = {k: _closed(v, depth + 1) for k, v in schema.items()}
        if closed.get("type") == "object" or isinstance(closed.get("properties"), Mapping):
            closed.setdefault("additionalProperties", False)
        return closed
    if isinstance(schema, list):
        return [_closed(v, depth + 1) for v in schema]
    return schema


def strict_schemas(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The function schemas marked ``strict``: the server constrains each call's arguments to
    its schema (``constrained_decoding="gbnf"`` in the ``tool_calls`` format)."""
    marked = []
    for schema in schemas:
        function = dict(schema["function"])
        function["parameters"] = _closed(function.get("parameters", {}))
        function["strict"] = True
        marked.append({**schema, "function": function})
    return marked


def bound_arguments(
    model: BaseChatModel, schemas: list[dict[str, Any]], strict: bool = False
) -> dict[str, Any]:
    """The call arguments ``model.bind_tools(schemas)`` adds (none when it returns the model
    itself); ``strict``: each function's arguments constrained to its schema by the server
    (``constrained_decoding="gbnf"``). ValueError, saying what to do, for a model that cannot
    bind tools, or whose binding is another runnable than the model with call arguments."""
    try:
        bound = model.bind_tools(
            strict_schemas(schemas) if strict else schemas, **binding_options(model)
        )
    except NotImplementedError:
        raise ValueError(
            f"action_format='tool_calls' needs a chat model that can bind tools: "
            f"{type(model).__name__} has no bind_tools; use action_format='text' with it"
        ) from None
    if bound is model:
        return {}  # a model that keeps its tools itself (some test doubles)
    if not isinstance(bound, RunnableBinding) or bound.bound is not model:
        raise ValueError(
            f"action_format='tool_calls': {type(model).__name__}.bind_tools returned "
            f"{type(bound).__name__}, not the model with its call arguments bound (which this "
            "loop passes on each call itself); use action_format='text' with it"
        )
    return dict(bound.kwargs)
