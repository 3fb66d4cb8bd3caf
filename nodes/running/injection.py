"""The arguments of a tool the model never sees, filled the way LangGraph's ``ToolNode`` fills
them (``Injected``): ``InjectedState`` (the run's state, or one field of it), ``InjectedStore``
(the graph's store), ``ToolRuntime`` (state, config, context, store, stream writer, tool call
id), and ``InjectedToolCallId`` (langchain-core fills it from the tool call itself). A plain
``InjectedToolArg`` is not filled by ``ToolNode`` either: it keeps its default, and one without a
default is refused when the graph is built. Only public names are used: the annotations are read
from the tool's full input schema and its function's signature, as ``ToolNode`` reads them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.tools import BaseTool, InjectedToolArg, InjectedToolCallId
from langchain_core.tools.base import get_all_basemodel_annotations
from langgraph.prebuilt import InjectedState, InjectedStore, ToolRuntime


@dataclass(frozen=True)
class Injected:
    """Which of a tool's arguments are filled by the graph, and with what."""

    state: Mapping[str, str | None] = field(default_factory=dict)
    """Argument -> state field (None: the whole state)."""
    store: str | None = None
    runtime: str | None = None
    hidden: frozenset[str] = frozenset()
    """Every injected argument, whoever fills it (never shown to the model, never taken from
    its input)."""

    def __bool__(self) -> bool:
        return bool(self.hidden)


def _markers(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is Annotated:
        return list(typing.get_args(annotation)[1:])
    return [annotation]


def _is(marker: Any, kind: type) -> bool:
    return isinstance(marker, kind) or (isinstance(marker, type) and issubclass(marker, kind))


def _annotations(tool: BaseTool) -> dict[str, Any]:
    found: dict[str, Any] = {}
    function = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if function is not None:
        # Unresolvable hints leave the schema to say.
        with contextlib.suppress(Exception):
            found.update(typing.get_type_hints(function, include_extras=True))
    schema = tool.get_input_schema()
    if isinstance(schema, type):
        found.update(get_all_basemodel_annotations(schema))
    found.pop("return", None)
    return found


def _fills(tool: BaseTool, name: str, markers: list[Any]) -> Iterator[tuple[str, Any]]:
    """What fills the injected argument ``name``, by its markers: ("runtime", None),
    ("state", the field or None for the whole state), ("store", None); langchain-core fills
    an ``InjectedToolCallId``. ValueError for a plain ``InjectedToolArg`` without a default."""
    for marker in markers:
        if _is(marker, ToolRuntime):
            yield "runtime", None
        elif _is(marker, InjectedState):
            yield "state", marker.field if isinstance(marker, InjectedState) else None
        elif _is(marker, InjectedStore):
            yield "store", None
        elif not _is(marker, InjectedToolCallId) and _required_field(tool, name):
            raise ValueError(
                f"tool {tool.name!r}: argument {name!r} is an InjectedToolArg without a "
                "default, which nothing fills (LangGraph's ToolNode does not either); give "
                "it a default or bind it before passing the tool"
            )


def injected_args(tool: BaseTool) -> Injected:
    """The tool's injected arguments; ValueError for one the graph cannot fill."""
    state: dict[str, str | None] = {}
    store = runtime = None
    hidden: set[str] = set()
    for name, annotation in _annotations(tool).items():
        markers = _markers(annotation)
        if not any(_is(m, InjectedToolArg) or _is(m, ToolRuntime) for m in markers):
            continue
        hidden.add(name)
        for role, key in _fills(tool, name, markers):
            if role == "runtime":
                runtime = name
            elif role == "state":
                state[name] = key
            else:
                store = name
    return Injected(state=state, store=store, runtime=runtime, hidden=frozenset(hidden))


def _required_field(tool: BaseTool, name: str) -> bool:
    schema = tool.get_input_schema()
    fields = getattr(schema, "model_fields", {})
    return name in fields and fields[name].is_required()


def _tool_runtime(
    runtime: Any, *, state: Mapping[str, Any], config: Any, call_id: str, tools: list[BaseTool]
) -> ToolRuntime:
    """The ``ToolRuntime`` of a call: what this call knows, the rest from the graph's
    ``runtime`` (when it has it)."""
    known = {
        "state": state,
        "tool_call_id": call_id,
        "config": config,
        "tools": tools,
        "context": getattr(runtime, "context", None),
        "store": getattr(runtime, "store", None),
        "stream_writer": getattr(runtime, "stream_writer", lambda _chunk: None),
    }
    given = {}
    for item in dataclasses.fields(ToolRuntime):
        if item.name in known:
            given[item.name] = known[item.name]
        elif runtime is not None and hasattr(runtime, item.name):
            given[item.name] = getattr(runtime, item.name)
    return ToolRuntime(**given)


def _store(name: str, runtime: Any) -> Any:
    """The graph's store, for the argument ``name``; ValueError when the graph has none."""
    store = getattr(runtime, "store", None)
    if store is None:
        raise ValueError(
            f"the tool's argument {name!r} wants the store (InjectedStore): "
            "pass build_graph a store, or compile the graph with one"
        )
    return store


def fill(
    injected: Injected,
    arguments: dict[str, Any],
    *,
    state: Mapping[str, Any],
    config: Any,
    runtime: Any,
    call_id: str,
    tools: list[BaseTool],
) -> dict[str, Any]:
    """The model's arguments with the injected ones put in (any the model wrote are dropped)."""
    filled = {k: v for k, v in arguments.items() if k not in injected.hidden}
    for name, key in injected.state.items():
        if key is None:
            filled[name] = state
        elif key in state:
            filled[name] = state[key]
    if injected.store:
        filled[injected.store] = _store(injected.store, runtime)
    if injected.runtime:
        filled[injected.runtime] = _tool_runtime(
            runtime, state=state, config=config, call_id=call_id, tools=tools
        )
    return filled
