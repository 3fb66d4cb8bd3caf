"""The build-time objects every node needs (model, tools, token counter, view, own actions)."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from langgraph.store.base import BaseStore

from reactgraph.nodes.calling.binding import (
    action_arguments,
    action_parameters,
    bound_arguments,
    describe_tools,
    schema_name,
    tool_schemas,
)
from reactgraph.nodes.calling.grammar import react_grammar
from reactgraph.nodes.calling.providers import ModelCaller, model_name
from reactgraph.nodes.calling.tokens import TokenCounter
from reactgraph.nodes.loop import formats
from reactgraph.nodes.loop.middleware.seam import Chain
from reactgraph.nodes.running.injection import Injected, injected_args
from reactgraph.nodes.running.tool_runs import contained
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.bounded import remembered
from reactgraph.nodes.vocabulary.run_settings import RunSettings, notes_limit, parallel_cap
from reactgraph.nodes.vocabulary.view import WHOLE, View

logger = logging.getLogger(__name__)

TokenCounterFn = Callable[[Sequence[BaseMessage]], int]
ModelFactory = Callable[[str, str | None], BaseChatModel]


RUNS_REMEMBERED = 512
"""Runs whose typed settings a graph keeps made: more than the runs a batch has in flight (100
by default), each of which reads them several times a step (a smaller cache made them again
at nearly every read)."""


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
    _others: dict[int, tuple[BaseChatModel, ModelCaller]] = field(default_factory=dict)
    """Callers of the models a middleware asked for in place of the run's (a fallback)."""
    _bindings: dict[Any, tuple[BaseChatModel, dict[str, Any]]] = field(default_factory=dict)
    _schemas: dict[Any, list[dict[str, Any]]] = field(default_factory=dict)
    _described: dict[tuple[str, ...], str] = field(default_factory=dict)
    _offered: dict[Any, tuple[Any, ...]] = field(default_factory=dict)
    """What a request offers (``request_tools``), by notes limit: made once per limit."""
    _grammars: dict[Any, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _settings_made: dict[int, tuple[Any, RunSettings]] = field(default_factory=dict)
    """The typed settings made from a run's stored settings, by the stored value's identity
    (the value held, so its identity is not reused): a node reads them several times a step."""
    variant: str = ""
    """The variant's name (the traces' ``gen_ai.agent.name``)."""
    chain: Chain = field(default_factory=lambda: Chain(()))
    """The loop's middleware, in order (``reactgraph.assembly.loop_middleware``)."""

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

    def caller_of(self, model: BaseChatModel, settings: RunSettings) -> ModelCaller:
        """The caller of ``model``: the run's own, or one made for a model a middleware asked
        for instead (a fallback), kept while it is among the most recently used."""
        caller = self.caller_for(settings)
        if model is caller.model:
            return caller
        if not isinstance(model, BaseChatModel):
            raise TypeError(f"a middleware asked for a model that is no BaseChatModel: {model!r}")
        with self._lock:
            found = self._others.pop(id(model), None)
            if found is None or found[0] is not model:
                found = (model, ModelCaller(model, model_name(model)))
            return remembered(self._others, id(model), found)[1]

    def tool_schemas(
        self, settings: RunSettings, names: tuple[str, ...] | None = None
    ) -> list[dict[str, Any]]:
        """Every action as a tool's JSON schema (the ``tool_calls`` format), for the run's
        notes limit, or those of ``names`` alone (a middleware narrowed them); made once per
        limit and names."""
        key = (notes_limit(settings), names)
        with self._lock:
            found = self._schemas.get(key)
        if found is None:
            found = tool_schemas(self.tools, self.injected, self.action_specs, key[0])
            if names is not None:
                found = [schema for schema in found if schema_name(schema) in names]
            with self._lock:
                remembered(self._schemas, key, found)
        return found

    def tool_binding(
        self,
        caller: ModelCaller,
        settings: RunSettings,
        strict: bool = False,
        names: tuple[str, ...] | None = None,
    ) -> dict[str, Any]:
        """The call arguments that bind every action (or those of ``names``) to the caller's
        model as a tool (the ``tool_calls`` format), made once per model, notes limit,
        strictness and names; ValueError for a model that cannot bind tools."""
        key = (id(caller.model), notes_limit(settings), strict, names)
        with self._lock:
            found = self._bindings.get(key)
        if found is None or found[0] is not caller.model:
            schemas = self.tool_schemas(settings, names)
            found = (caller.model, bound_arguments(caller.model, schemas, strict))
            with self._lock:
                remembered(self._bindings, key, found)
        return found[1]

    def step_grammar(
        self, settings: RunSettings, forced: bool = False, names: tuple[str, ...] | None = None
    ) -> str:
        """The GBNF grammar of one step of this run (``grammar.react_grammar``): its actions
        (or those of ``names``), its ``max_completion_tokens``, its notes limit, its answer
        schema when it has one; made once per those."""
        schema = settings.answer_schema
        cap, limit = settings.max_completion_tokens, notes_limit(settings)
        calls = parallel_cap(settings)
        key = (forced, cap, limit, None if schema is None else repr(schema), names, calls)
        with self._lock:
            found = self._grammars.get(key)
        if found is None:
            actions = action_arguments(self.tools, self.injected, self.action_specs, limit)
            if names is not None:
                actions = {name: args for name, args in actions.items() if name in names}
            found = react_grammar(
                actions,
                forced=forced,
                answer_schema=schema,
                max_completion_tokens=cap,
                max_calls=calls,
            )
            with self._lock:
                remembered(self._grammars, key, found)
        return found

    def described(self, names: tuple[str, ...] | None = None) -> str:
        """The prompt's lines of every action, or of those of ``names`` alone."""
        if names is None:
            return self.tool_descriptions
        with self._lock:
            found = self._described.get(names)
        if found is None:
            tools = [tool for name, tool in self.tools.items() if name in names]
            extra = [spec for spec in self.action_specs if spec[0] in names]
            found = describe_tools(tools, extra, self.injected)
            with self._lock:
                remembered(self._described, names, found)
        return found

    def request_tools(self, settings: RunSettings) -> list[Any]:
        """What a model request offers the model (``ModelRequest.tools``): the tools, then the
        variant's own actions as their JSON schemas."""
        key = notes_limit(settings)
        with self._lock:
            found = self._offered.get(key)
        if found is None:
            schemas = self.tool_schemas(settings)
            own = [schema for schema in schemas if schema_name(schema) in self.extra_actions]
            found = (*self.tools.values(), *own)
            with self._lock:
                remembered(self._offered, key, found)
        return list(found)

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


MAX_TOOL_NAME_CHARS = 64
"""The longest tool name: OpenAI's limit for a function's name (``tool_calls``)."""
TOOL_NAME = re.compile(r"[A-Za-z](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?")
"""A tool name every action format and the grammar can call: an ASCII letter, then ASCII
letters, digits, ``_``, ``.`` and ``-``, not ending in ``.`` or ``-``. The text format's parser
reads a name that way (a leading ``_``, a quote or a trailing ``.`` it takes for markup around
the name; a space or a bracket ends it), and the grammar offers only names it reads back."""


def check_tool_name(name: str) -> None:
    """ValueError naming the tool, what a name may hold and a name that would do, for a name
    the model could not call in every action format (``TOOL_NAME``)."""
    if TOOL_NAME.fullmatch(name) and len(name) <= MAX_TOOL_NAME_CHARS:
        return
    words = re.sub(r"[^A-Za-z0-9_.\-]+", "_", name).strip("_.-")[:MAX_TOOL_NAME_CHARS]
    mended = words if words[:1].isalpha() else f"tool_{words}"[:MAX_TOOL_NAME_CHARS]
    mended = mended.rstrip(".-")
    rename = f" (e.g. {mended!r})" if words and TOOL_NAME.fullmatch(mended) else ""
    raise ValueError(
        f"tool {name[:80]!r} cannot be called by that name: a tool's name must be an ASCII "
        "letter followed by ASCII letters, digits, '_', '.' or '-' (not ending in '.' or '-'), "
        f"at most {MAX_TOOL_NAME_CHARS} characters; rename it{rename}"
    )


def _check_objects(model: Any, summarizer: Any, token_counter: Any, store: Any) -> None:
    """TypeError for a model, summarizer, token counter or store of the wrong kind."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"model must be a langchain-core BaseChatModel, got {type(model).__name__}")
    if summarizer is not None and not isinstance(summarizer, BaseChatModel):
        raise TypeError(f"summarizer must be a BaseChatModel, got {type(summarizer).__name__}")
    if token_counter is not None and not callable(token_counter):
        raise TypeError("token_counter must be callable: token_counter(messages) -> int")
    if store is not None and not isinstance(store, BaseStore):
        raise TypeError(f"store must be a LangGraph BaseStore, got {type(store).__name__}")


def _tools_by_name(
    tools: Any, extra_actions: Sequence[tuple[str, str]]
) -> tuple[dict[str, BaseTool], dict[str, Injected]]:
    """The tools by name, each contained (``contained``), and the injected arguments of those
    that have some; TypeError/ValueError for a list that is not of tools, or a name the model
    could not call or could not tell from another action's."""
    if isinstance(tools, BaseTool | str | bytes) or not isinstance(tools, Sequence):
        raise TypeError("tools must be a list of langchain-core BaseTool")
    reserved = {name.lower() for name, _ in extra_actions} | {prompts.FINISH_ACTION}
    by_name: dict[str, BaseTool] = {}
    injected: dict[str, Injected] = {}
    for tool in tools:
        if not isinstance(tool, BaseTool):
            raise TypeError(f"every tool must be a langchain-core BaseTool, got {tool!r}")
        check_tool_name(tool.name)
        if tool.name.lower() == prompts.FINISH_ACTION:
            raise ValueError("no tool may be named 'finish': Finish[answer] is how a model answers")
        if tool.name in by_name or tool.name.lower() in reserved:
            raise ValueError(f"two actions are named {tool.name!r}")
        found = injected_args(tool)  # ValueError for an argument nothing can fill
        if found:
            injected[tool.name] = found
        by_name[tool.name] = contained(tool)
    return by_name, injected


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
    _check_objects(model, summarizer, token_counter, store)
    by_name, injected = _tools_by_name(tools, extra_actions)
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
