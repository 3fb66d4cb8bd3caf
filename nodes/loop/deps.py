"""The build-time objects every node needs (model, tools, token counter, view, own actions)."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from langgraph.store.base import BaseStore

from reactgraph.nodes import formats
from reactgraph.nodes.calling.binding import (
    action_arguments,
    action_parameters,
    bound_arguments,
    describe_tools,
    tool_schemas,
)
from reactgraph.nodes.calling.constrained import Constraint
from reactgraph.nodes.calling.grammar import react_grammar
from reactgraph.nodes.calling.providers import ModelCaller
from reactgraph.nodes.calling.tokens import TokenCounter
from reactgraph.nodes.loop import prompts
from reactgraph.nodes.loop.run_settings import RunSettings, notes_limit
from reactgraph.nodes.loop.view import WHOLE, View
from reactgraph.nodes.running.tool_io import Injected, injected_args

logger = logging.getLogger(__name__)

TokenCounterFn = Callable[[Sequence[BaseMessage]], int]
ModelFactory = Callable[[str, str | None], BaseChatModel]


def model_name(model: BaseChatModel) -> str | None:
    """The model's name as its client reports it, if it does."""
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


def contained(tool: BaseTool) -> BaseTool:
    """The tool, with its coroutine (if it has one) raising SystemExit or KeyboardInterrupt as
    a plain error. LangChain runs a tool's coroutine in a task of its own, and asyncio re-raises
    those two out of the event loop, which would end the caller's whole process."""
    coroutine = getattr(tool, "coroutine", None)
    if coroutine is None:
        return tool

    @functools.wraps(coroutine)  # keeps the signature LangChain inspects for `config`
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return await coroutine(*args, **kwargs)
        except (SystemExit, KeyboardInterrupt) as error:
            raise ToolExit(str(error) or type(error).__name__) from None

    return tool.model_copy(update={"coroutine": guarded})


MOST_REMEMBERED = 32
"""Per-run models (``model_name``/``base_url``) and notes limits a graph keeps made, the most
recently used: a run's context is anyone's (a server), and each model holds its connections."""

RUNS_REMEMBERED = 512
"""Runs whose typed settings a graph keeps made: more than the runs a batch has in flight (100
by default), each of which reads them several times a step (a smaller cache made them again
at nearly every read)."""

_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


def remembered(
    cache: dict[_Key, _Value], key: _Key, value: _Value, most: int = MOST_REMEMBERED
) -> _Value:
    """``value``, kept under ``key`` as the newest of ``cache``, whose oldest is let go beyond
    ``most`` (the caller holds the lock)."""
    cache.pop(key, None)
    cache[key] = value
    while len(cache) > most:
        del cache[next(iter(cache))]
    return value


class ToolExit(RuntimeError):
    """A tool tried to end the process; the model reads it as the tool failing."""


@dataclass(frozen=True)
class Deps:
    """What ``build_graph`` binds into the nodes; Python objects that never enter the state."""

    model: BaseChatModel
    tools: Mapping[str, BaseTool]
    settings: RunSettings
    """The variant's settings as built, one typed value (of the variant's class: what
    ``run_settings`` makes); a run's context may override the per-run ones."""
    view: View
    tool_descriptions: str
    token_counter: TokenCounterFn
    """Counts tokens for the turn records when the provider reports no usage."""
    context_counter: TokenCounterFn
    """Counts the prompt against the context window (the developer's, else ``token_counter``)."""
    caller: ModelCaller
    summarizer: ModelCaller
    """Writes compaction summaries, through the same retries and records as the agent."""
    extra_actions: tuple[str, ...] = ()
    store: BaseStore | None = None
    """Where notes live when they are not files."""
    model_factory: ModelFactory | None = None
    injected: Mapping[str, Injected] = field(default_factory=dict)
    """The tools' arguments the graph fills (``InjectedState``, ``ToolRuntime``...), by tool."""
    action_specs: tuple[tuple[str, str], ...] = ()
    """The variant's own actions with their descriptions (tool schemas in ``tool_calls``)."""
    call_params: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Every action with the names of its arguments (reading a native tool call)."""
    _callers: dict[tuple[str | None, str | None], ModelCaller] = field(default_factory=dict)
    _bindings: dict[tuple[str | None, str | None, Any, bool], dict[str, Any]] = field(
        default_factory=dict
    )
    _schemas: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)
    _grammars: dict[Any, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _settings_made: dict[int, tuple[Any, RunSettings]] = field(default_factory=dict)
    """The typed settings made from a run's stored settings, by the stored value's identity
    (the value held, so its identity is not reused): a node reads them several times a step."""
    variant: str = ""
    """The variant's name (the traces' ``gen_ai.agent.name``)."""

    def run_settings(self, state: Mapping[str, Any]) -> RunSettings:
        """The run's settings as one typed value: its stored settings over the built ones (a
        run started before a setting existed gets the built value). Made once per stored value
        (a state's values are never changed in place: a new one replaces them)."""
        stored = state.get("settings")
        made = self._settings_made.get(id(stored))
        if made is not None and made[0] is stored:
            return made[1]
        value = self.settings.over(stored or {})
        with self._lock:
            remembered(self._settings_made, id(stored), (stored, value), RUNS_REMEMBERED)
        return value

    def caller_for(self, settings: RunSettings) -> ModelCaller:
        """The built model's caller, or one for the run's ``model_name``/``base_url``."""
        name, url = settings.model_name, settings.base_url
        if not name and not url:
            return self.caller
        if self.model_factory is None:
            raise ValueError("this graph cannot switch models per run (no model factory)")
        with self._lock:
            caller = self._callers.pop((name, url), None)
            if caller is None:
                chosen = name or model_name(self.model) or "gpt-4o-mini"
                model = self.model_factory(chosen, url)
                caller = ModelCaller(model, chosen)
            return remembered(self._callers, (name, url), caller)

    def tool_schemas(self, settings: RunSettings) -> list[dict[str, Any]]:
        """Every action as a tool's JSON schema (the ``tool_calls`` format), for the run's
        notes limit; made once per limit."""
        limit = notes_limit(settings)
        with self._lock:
            found = self._schemas.get(limit)
        if found is None:
            found = tool_schemas(self.tools, self.injected, self.action_specs, limit)
            with self._lock:
                remembered(self._schemas, limit, found)
        return found

    def tool_binding(
        self, caller: ModelCaller, settings: RunSettings, strict: bool = False
    ) -> dict[str, Any]:
        """The call arguments that bind every action to the caller's model as a tool (the
        ``tool_calls`` format), made once per model, notes limit and strictness; ValueError for
        a model that cannot bind tools."""
        key = (settings.model_name, settings.base_url, notes_limit(settings), strict)
        with self._lock:
            found = self._bindings.get(key)
        if found is None:
            found = bound_arguments(caller.model, self.tool_schemas(settings), strict)
            with self._lock:
                remembered(self._bindings, key, found)
        return found

    def step_grammar(self, settings: RunSettings, forced: bool = False) -> str:
        """The GBNF grammar of one step of this run (``grammar.react_grammar``): its actions,
        its ``max_completion_tokens``, its notes limit, its answer schema when it has one;
        made once per those."""
        schema = settings.answer_schema
        cap, limit = settings.max_completion_tokens, notes_limit(settings)
        key = (forced, cap, limit, None if schema is None else repr(schema))
        with self._lock:
            found = self._grammars.get(key)
        if found is None:
            actions = action_arguments(self.tools, self.injected, self.action_specs, limit)
            found = react_grammar(
                actions, forced=forced, answer_schema=schema, max_completion_tokens=cap
            )
            with self._lock:
                remembered(self._grammars, key, found)
        return found

    def constraint(
        self, caller: ModelCaller, settings: RunSettings, forced: bool = False
    ) -> Constraint | None:
        """What constrains this run's model call (``constrained_decoding``): none when off; in
        the text format the step's grammar (the answer alone when ``forced``); in the
        ``tool_calls`` format the tools bound strict (refused when ``forced``): the format's."""
        if settings.constrained_decoding != "gbnf":
            return None
        return formats.of(settings).constraint(self, caller, settings, forced)

    def check_format(self, settings: RunSettings) -> None:
        """ValueError when the settings ask for the ``tool_calls`` format of a model that
        cannot bind tools, or for ``constrained_decoding`` of a model that cannot carry it (a
        run naming another model gets an OpenAI-compatible one, which can both)."""
        if settings.model_name or settings.base_url:
            return
        formats.of(settings).check_model(self, settings)

    @property
    def action_names(self) -> list[str]:
        """Every action the model may call: the tools and the variant's own actions."""
        return [*self.tools, *self.extra_actions]


def make_deps(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    settings: RunSettings,
    *,
    view: View = WHOLE,
    token_counter: TokenCounterFn | None = None,
    summarizer: BaseChatModel | None = None,
    extra_actions: Sequence[tuple[str, str]] = (),
    store: BaseStore | None = None,
    model_factory: ModelFactory | None = None,
    variant: str = "",
) -> Deps:
    """Check the developer's objects and bundle them; misuse raises TypeError/ValueError."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"model must be a langchain-core BaseChatModel, got {type(model).__name__}")
    if summarizer is not None and not isinstance(summarizer, BaseChatModel):
        raise TypeError(f"summarizer must be a BaseChatModel, got {type(summarizer).__name__}")
    if token_counter is not None and not callable(token_counter):
        raise TypeError("token_counter must be callable: token_counter(messages) -> int")
    if store is not None and not isinstance(store, BaseStore):
        raise TypeError(f"store must be a LangGraph BaseStore, got {type(store).__name__}")
    if isinstance(tools, BaseTool | str | bytes) or not isinstance(tools, Sequence):
        raise TypeError("tools must be a list of langchain-core BaseTool")
    reserved = {name.lower() for name, _ in extra_actions} | {prompts.FINISH_ACTION}
    by_name: dict[str, BaseTool] = {}
    injected: dict[str, Injected] = {}
    for tool in tools:
        if not isinstance(tool, BaseTool):
            raise TypeError(f"every tool must be a langchain-core BaseTool, got {tool!r}")
        if tool.name.lower() == prompts.FINISH_ACTION:
            raise ValueError("no tool may be named 'finish': Finish[answer] is how a model answers")
        if tool.name in by_name or tool.name.lower() in reserved:
            raise ValueError(f"two actions are named {tool.name!r}")
        found = injected_args(tool)  # ValueError for an argument nothing can fill
        if found:
            injected[tool.name] = found
        by_name[tool.name] = contained(tool)
    if getattr(model, "request_timeout", 0) is None:
        # ChatOpenAI waits forever by default; a hung provider would hang the run.
        logger.warning(
            "the model has no request timeout; set one (reactgraph.models.chat_model does)"
        )
    counter = TokenCounter(model_name(model))
    return Deps(
        model=model,
        tools=by_name,
        settings=settings,
        view=view,
        tool_descriptions=describe_tools(tools, extra_actions, injected),
        token_counter=counter,
        context_counter=token_counter or counter,
        caller=ModelCaller(model, model_name(model)),
        summarizer=ModelCaller(summarizer or model, model_name(summarizer or model)),
        extra_actions=tuple(name for name, _ in extra_actions),
        store=store,
        model_factory=model_factory,
        injected=injected,
        action_specs=tuple(extra_actions),
        call_params=action_parameters(by_name, injected, extra_actions),
        variant=variant,
    )
