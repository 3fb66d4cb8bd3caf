"""What every variant's graph shares: the state, the context schema and the core nodes."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import START, StateGraph

from reactgraph.models import chat_model
from reactgraph.nodes.control import parse_reply, start_run
from reactgraph.nodes.deps import Deps, TokenCounterFn, make_deps
from reactgraph.nodes.model import acall_model, call_model
from reactgraph.nodes.settings import DEFAULTS, RunContext, Settings, make_settings
from reactgraph.nodes.state import InputState, State
from reactgraph.nodes.tooling import arun_tool, run_tool


class Twin(Runnable[dict[str, Any], dict[str, Any]]):
    """A node with a sync and an async body: ``invoke`` runs one, ``ainvoke`` the other, so
    ``ainvoke``/``astream`` never park a model call or a tool in a thread."""

    def __init__(self, name: str, sync: Any, async_: Any) -> None:
        self.name = name
        self._sync = sync
        self._async = async_

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self._sync(input, config or {})

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return await self._async(input, config or {})


def twin(name: str, sync: Any, async_: Any, **bound: Any) -> Twin:
    """A ``Twin`` node with the same keyword arguments bound into both bodies."""
    return Twin(name, partial(sync, **bound), partial(async_, **bound))


def _openai_compatible(name: str, base_url: str | None) -> BaseChatModel:
    """A run's context may name another model: an OpenAI-compatible one, by name and URL."""
    return chat_model(name, base_url=base_url)


def core_builder(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    settings: dict[str, Any],
    *,
    token_counter: TokenCounterFn | None = None,
    extra_actions: Sequence[tuple[str, str]] = (),
    base: Settings = DEFAULTS,
) -> tuple[StateGraph, Deps]:
    """A graph with the shared nodes and the shared edges: START -> start_run and
    call_model -> parse_reply. Variants add their own nodes and the rest of the wiring."""
    deps = make_deps(
        model,
        tools,
        make_settings(base, **settings),
        token_counter=token_counter,
        extra_actions=extra_actions,
        model_factory=_openai_compatible,
    )
    builder = StateGraph(State, context_schema=RunContext, input_schema=InputState)
    builder.add_node("start_run", partial(start_run, deps=deps))
    builder.add_node("call_model", twin("call_model", call_model, acall_model, deps=deps))
    builder.add_node("parse_reply", partial(parse_reply, deps=deps))
    builder.add_node("run_tool", twin("run_tool", run_tool, arun_tool, deps=deps))
    builder.add_edge(START, "start_run")
    builder.add_edge("call_model", "parse_reply")
    return builder, deps
