"""A BFCL task's functions as LangChain tools, each call recorded for the scorer.

The function docs are in BFCL's JSON-schema dialect; the model is given them as the leaderboard
gives them to an OpenAI-style model (its ``convert_to_tool``): ``float`` as ``number`` (its
description saying it is a float), ``dict`` as ``object``, ``tuple`` as ``array``, an unknown type
as ``string``, and a name's ``.`` as ``_`` (``spotify.play`` is the tool ``spotify_play``). A call
is recorded under the task's own name with the arguments exactly as the model wrote them (the
schema is a JSON-schema dict, which LangChain passes through unvalidated), so the scorer sees
what the model sent.

Single-turn tools run nothing: the leaderboard scores the calls, not their results, so each
answers that it was called. Multi-turn tools call the method of the task's API instance.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from reactgraph.app.eval.bfcl_state import execute

OPENAPI_TYPES = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
}
CALLED = "The call to {name} was made."
"""A single-turn tool's answer (the leaderboard runs no single-turn function)."""


def tool_name(name: str) -> str:
    """The tool's name for a function's (``.`` is ``_``, as OpenAI names allow)."""
    return re.sub(r"\.", "_", name)


def _cast(properties: Mapping[str, Any]) -> dict[str, Any]:
    """BFCL's ``_cast_to_openai_type`` (nested object properties and array items)."""
    cast: dict[str, Any] = {}
    for key, given in properties.items():
        value = dict(given)
        kind = value.get("type", "string")
        if kind == "float":
            value["format"] = "float"
            value["description"] = (
                str(value.get("description", "")) + " This is a float type value."
            )
        value["type"] = OPENAPI_TYPES.get(kind, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast(value["properties"])
            elif isinstance(value.get("items"), Mapping):
                items = dict(value["items"])
                items["type"] = OPENAPI_TYPES.get(items.get("type", "string"), "string")
                if items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast(items["properties"])
                elif items["type"] == "array" and isinstance(items.get("items"), Mapping):
                    inner = dict(items["items"])
                    inner["type"] = OPENAPI_TYPES.get(inner.get("type", "string"), "string")
                    items["items"] = inner
                value["items"] = items
        cast[key] = value
    return cast


def schema_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A function doc's parameters as a JSON schema the model is given."""
    parameters = copy.deepcopy(dict(doc.get("parameters") or {}))
    return {
        "type": "object",
        "properties": _cast(parameters.get("properties") or {}),
        "required": list(parameters.get("required") or []),
    }


class Recorder:
    """The calls of a task's run, per user turn (the scorer's input)."""

    def __init__(self) -> None:
        self.turns: list[list[dict[str, Any]]] = [[]]

    def next_turn(self) -> None:
        """Calls from now on belong to the next user turn."""
        self.turns.append([])

    def record(self, name: str, arguments: Mapping[str, Any], result: str | None = None) -> None:
        """One call, with its result when it ran."""
        call: dict[str, Any] = {"name": name, "arguments": json.loads(json.dumps(arguments))}
        if result is not None:
            call["result"] = result
        self.turns[-1].append(call)


def function_tool(doc: Mapping[str, Any], recorder: Recorder, methods: Any = None) -> BaseTool:
    """A function doc as a tool: recorded, and run on ``methods`` (the API instances' methods)
    when given, else answered with ``CALLED``."""
    name = str(doc["name"])

    def call(**arguments: Any) -> str:
        result = (
            CALLED.format(name=name) if methods is None else execute(methods, name, (), arguments)
        )
        recorder.record(name, arguments, None if methods is None else result)
        return result

    description = str(doc.get("description") or name)
    return StructuredTool.from_function(
        func=call, name=tool_name(name), description=description, args_schema=schema_of(doc)
    )


def task_tools(
    docs: Sequence[Mapping[str, Any]], recorder: Recorder, methods: Any = None
) -> list[BaseTool]:
    """The tools of the given function docs, each name once."""
    seen: dict[str, BaseTool] = {}
    for doc in docs:
        made = function_tool(doc, recorder, methods)
        seen.setdefault(made.name, made)
    return list(seen.values())
