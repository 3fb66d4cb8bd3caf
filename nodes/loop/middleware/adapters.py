"""LangChain's own middleware in the loop: an ``AgentMiddleware`` (LangChain's twenty, or an
application's subclass, or one a decorator made) adapted to the seam (``seam.Middleware``).

Each of its hooks runs as an effect (``Hooked``, ``Wrapped``), the only sync/async pair: under
``invoke`` its sync hook, under ``ainvoke`` its async one (a ``before_*``/``after_*`` hook
written only sync serves both, as in ``create_agent``; a ``wrap_*`` hook written only one way
runs the other way on a thread, where ``create_agent`` would raise ``NotImplementedError``).
The handler a ``wrap_*`` hook is given runs the rest of the chain, so every call it makes goes
through the loop's own middleware: the grammar, the approval check, the limits and budgets, the
traces. A model call it makes itself (a tool selector's) is counted against the run's budget.

What reactgraph's state does not have is refused when the graph is built (``check``), with a
ValueError naming the middleware and the hook: a state schema of its own, a hook that jumps
(``can_jump_to``), and LangChain's middleware known to edit ``state["messages"]``. At run time a
hook's update must write nothing (the loop's state is the loop's: a prompt is changed through
``wrap_model_call``'s ``request.override``), else ValueError naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_type_hints

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.runnables.config import var_child_runnable_config

from reactgraph.nodes.loop.middleware.scope import Body, MiddlewareError, Scope, runtime_of
from reactgraph.nodes.loop.middleware.seam import Middleware
from reactgraph.nodes.vocabulary.effects import adrive, drive

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.runnables import RunnableConfig

STATE_HOOKS = ("before_agent", "before_model", "after_model", "after_agent")
WRAP_HOOKS = ("wrap_model_call", "wrap_tool_call")
_AGENT_KEYS = {"messages", "jump_to", "structured_response"}
# LangChain's middleware whose state hooks edit state["messages"] to change what the model
# sees (reactgraph renders its prompt from its turns: such an edit would be lost), and why.
EDITS_MESSAGES = {
    "SummarizationMiddleware": (
        "before_model",
        "it replaces state['messages'] with a summary; reactgraph's compaction variants "
        "summarize the history themselves",
    ),
    "PIIMiddleware": (
        "before_model",
        "it rewrites state['messages']; redact in wrap_model_call (request.override(messages="
        "...)) and wrap_tool_call instead",
    ),
    "HumanInTheLoopMiddleware": (
        "after_model",
        "it interrupts and rewrites state['messages']; reactgraph's approve setting asks a "
        "person before an Action runs",
    ),
}


def _own(middleware: Any, hook: str) -> bool:
    """Whether its class defines ``hook`` (LangChain's test in ``create_agent``)."""
    from langchain.agents.middleware import AgentMiddleware

    return getattr(type(middleware), hook) is not getattr(AgentMiddleware, hook)


def hooks_of(middleware: Any) -> list[str]:
    """The hooks it has (sync or async), by their sync names."""
    return [
        hook
        for hook in (*STATE_HOOKS, *WRAP_HOOKS)
        if _own(middleware, hook) or _own(middleware, f"a{hook}")
    ]


def check(middleware: Sequence[Any]) -> list[LangChainMiddleware]:
    """The application's middleware, adapted; TypeError for what is no ``AgentMiddleware``,
    ValueError for one reactgraph cannot run (naming it and the hook)."""
    try:
        from langchain.agents.middleware import AgentMiddleware
    except ImportError as error:  # pragma: no cover - langchain is a dependency
        raise TypeError("middleware needs LangChain v1 (pip install 'langchain>=1')") from error
    if isinstance(middleware, AgentMiddleware) or not isinstance(middleware, Sequence):
        raise TypeError("middleware must be a list of langchain AgentMiddleware objects")
    adapted, names = [], set()
    for given in middleware:
        if not isinstance(given, AgentMiddleware):
            raise TypeError(
                f"every middleware must be a langchain.agents.middleware.AgentMiddleware, got "
                f"{type(given).__name__}"
            )
        name = given.name
        if name in names:
            raise ValueError(f"two middleware are named {name!r}: give each its own instance")
        names.add(name)
        _check_one(given)
        adapted.append(LangChainMiddleware(given))
    return adapted


def _check_one(middleware: AgentMiddleware) -> None:
    name, hooks = middleware.name, hooks_of(middleware)
    refused = EDITS_MESSAGES.get(type(middleware).__name__)
    if refused is not None and type(middleware).__module__.startswith("langchain."):
        raise ValueError(f"middleware {name} cannot run here: its {refused[0]} hook {refused[1]}")
    own = set(_fields(middleware.state_schema)) - _AGENT_KEYS
    if own:
        where = ", ".join(hooks) or "its hooks"
        raise ValueError(
            f"middleware {name} needs state reactgraph does not have ({', '.join(sorted(own))}, "
            f"in its state_schema) for {where}: keep what it counts in the middleware object, "
            f"or outside the graph"
        )
    for hook in STATE_HOOKS:
        for method in (hook, f"a{hook}"):
            jumps = getattr(getattr(middleware, method, None), "__can_jump_to__", None)
            if jumps:
                raise ValueError(
                    f"middleware {name}'s {hook} hook jumps ({', '.join(jumps)}): reactgraph's "
                    f"loop routes itself (a final answer, the turn cap, stuck, a budget end the "
                    f"run); raise an error to stop a run"
                )


def _fields(schema: Any) -> list[str]:
    try:
        return list(get_type_hints(schema))
    except Exception:  # an annotation that cannot be resolved: its declared names
        return list(getattr(schema, "__annotations__", {}))


class SpendCounter(BaseCallbackHandler):
    """Counts the model calls a middleware makes itself (its own model's, a tool selector's)
    into the node's ledger: the provider's usage, else the prompt's and the reply's characters
    over four. The loop's own calls pass their own callbacks, so they never reach it."""

    run_inline = True

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self._prompts: dict[Any, int] = {}

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        chars = sum(len(str(getattr(m, "content", m))) for batch in messages for m in batch)
        self._prompts[kwargs.get("run_id")] = max(1, chars // 4)

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        prompt = self._prompts.pop(kwargs.get("run_id"), 0)
        completion, usage = 0, None
        for generations in getattr(response, "generations", None) or []:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None) or usage
                completion += len(str(getattr(message, "content", "") or "")) // 4
        if usage:
            prompt = _count(usage.get("input_tokens"), prompt)
            completion = _count(usage.get("output_tokens"), completion)
        self.scope.ledger.model_call(prompt, completion)

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        self.scope.ledger.model_call(self._prompts.pop(kwargs.get("run_id"), 0), 0)


def _count(value: Any, estimate: int) -> int:
    return value if isinstance(value, int) and 0 <= value < 2**53 else estimate


def counted(config: RunnableConfig, scope: Scope) -> RunnableConfig:
    """``config`` with a ``SpendCounter`` among its callbacks."""
    counter = SpendCounter(scope)
    callbacks = config.get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(counter, inherit=True)
        return {**config, "callbacks": manager}
    return {**config, "callbacks": [*(callbacks or []), counter]}


@dataclass(frozen=True)
class Hooked:
    """One ``before_*``/``after_*`` hook of an application's middleware: its update."""

    middleware: AgentMiddleware
    hook: str
    state: Mapping[str, Any]
    config: RunnableConfig

    def run(self) -> Any:
        if not _own(self.middleware, self.hook):
            raise NotImplementedError(
                f"middleware {self.middleware.name} has only an async {self.hook} hook; run the "
                f"graph with ainvoke/astream, or give it a sync {self.hook}"
            )
        with config_context(self.config):
            return getattr(self.middleware, self.hook)(self.state, runtime_of())

    async def arun(self) -> Any:
        if _own(self.middleware, f"a{self.hook}"):
            method = getattr(self.middleware, f"a{self.hook}")
            with config_context(self.config):
                return await method(self.state, runtime_of())
        return self.run()


@dataclass(frozen=True)
class Wrapped:
    """One ``wrap_model_call``/``wrap_tool_call`` of an application's middleware around the
    rest of the chain (``inner``: a request to its body), with its own model calls counted."""

    middleware: AgentMiddleware
    hook: str
    request: Any
    inner: Callable[[Any], Body[Any]]
    config: RunnableConfig

    def run(self) -> Any:
        sync = getattr(self.middleware, self.hook)
        if not _own(self.middleware, self.hook):  # only async: on a loop of its own
            return _on_loop(self._arun_async())
        with config_context(self.config):
            return sync(self.request, lambda request: drive(self.inner(request)))

    async def _arun_async(self) -> Any:
        method = getattr(self.middleware, f"a{self.hook}")

        async def handler(request: Any) -> Any:
            return await adrive(self.inner(request))

        with config_context(self.config):
            return await method(self.request, handler)

    async def arun(self) -> Any:
        if _own(self.middleware, f"a{self.hook}"):
            return await self._arun_async()
        # Only sync: on a worker thread, its handler running the chain back on this loop.
        loop = asyncio.get_running_loop()

        def handler(request: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(adrive(self.inner(request)), loop)
            return future.result()

        sync = getattr(self.middleware, self.hook)
        call = functools.partial(_in_context, self.config, sync, self.request, handler)
        return await asyncio.to_thread(call)


@contextlib.contextmanager
def config_context(config: RunnableConfig) -> Iterator[None]:
    """``config`` as LangChain's current one while the block runs (a runnable called with no
    config of its own, a middleware's own model, takes its callbacks)."""
    token = var_child_runnable_config.set(config)
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def _in_context(config: RunnableConfig, fn: Callable[..., Any], *args: Any) -> Any:
    with config_context(config):
        return fn(*args)


def _on_loop(coroutine: Awaitable[Any]) -> Any:
    """Run a coroutine to its end from sync code, on a loop of its own thread."""
    from reactgraph.tools.loopthread import LoopThread

    with LoopThread("reactgraph-middleware") as runner:
        return runner.submit(coroutine).result()  # type: ignore[arg-type]


class LangChainMiddleware(Middleware):
    """An application's ``AgentMiddleware`` as a middleware of the loop."""

    application = True
    """An application's: it wraps the agent's model calls, not a summary's."""

    def __init__(self, middleware: AgentMiddleware) -> None:
        self.wrapped = middleware
        self._hooks = frozenset(hooks_of(middleware))

    @property
    def name(self) -> str:
        return str(self.wrapped.name)

    def has(self, hook: str) -> bool:
        """Whether the adapted middleware has ``hook`` (only those are the chain's: the others
        cost nothing per call)."""
        return hook in self._hooks

    def _state_hook(self, hook: str, state: Mapping[str, Any], scope: Scope) -> Body[None]:
        update = yield Hooked(self.wrapped, hook, state, scope.config)
        return refused_update(self.name, hook, update)

    def before_agent(self, state: Mapping[str, Any], scope: Scope) -> Any:
        return self._state_hook("before_agent", state, scope)

    def before_model(self, state: Mapping[str, Any], scope: Scope) -> Any:
        return self._state_hook("before_model", state, scope)

    def after_model(self, state: Mapping[str, Any], scope: Scope) -> Any:
        return self._state_hook("after_model", state, scope)

    def after_agent(self, state: Mapping[str, Any], scope: Scope) -> Any:
        return self._state_hook("after_agent", state, scope)

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        result = yield Wrapped(
            self.wrapped, "wrap_model_call", request, call, counted(scope.config, scope)
        )
        return model_response(self.name, result)

    def wrap_tool_call(self, request: Any, call: Any, scope: Scope) -> Any:
        result = yield Wrapped(self.wrapped, "wrap_tool_call", request, call, scope.config)
        return tool_message(self.name, result)


def refused_update(name: str, hook: str, update: Any) -> None:
    """None; ValueError for an update a hook of an application's middleware returned: the
    loop's state is written only by the loop."""
    if update is None or (isinstance(update, Mapping) and not update):
        return None
    from langgraph.types import Command

    what = "a Command" if isinstance(update, Command) else f"an update of {_keys(update)}"
    raise MiddlewareError(
        f"middleware {name}'s {hook} hook returned {what}: reactgraph's state is written only "
        f"by its loop; change what the model receives in wrap_model_call (request.override), "
        f"and keep your own records outside the state"
    )


def _keys(update: Any) -> str:
    if isinstance(update, Mapping):
        return ", ".join(sorted(map(str, update))[:5])
    return type(update).__name__


def model_response(name: str, result: Any) -> Any:
    """A ``wrap_model_call``'s result as a ``ModelResponse`` (an ``AIMessage`` alone is one);
    ValueError for a Command with a state update in it."""
    from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
    from langchain_core.messages import AIMessage

    if isinstance(result, AIMessage):
        return ModelResponse(result=[result])
    if isinstance(result, ExtendedModelResponse):
        command = result.command
        if command is not None:
            refused_update(name, "wrap_model_call", command.update or None)
        return result.model_response
    if hasattr(result, "model_response") and hasattr(result, "commands"):  # a composed one
        for command in result.commands:
            refused_update(name, "wrap_model_call", command.update or None)
        return result.model_response
    if isinstance(result, ModelResponse):
        return result
    raise MiddlewareError(
        f"middleware {name}'s wrap_model_call returned {type(result).__name__}: return the "
        f"handler's ModelResponse, a ModelResponse or an AIMessage"
    )


def tool_message(name: str, result: Any) -> Any:
    """A ``wrap_tool_call``'s result: a ``ToolMessage`` (its content is the Observation);
    ValueError for a Command (the loop's state is the loop's)."""
    from langchain_core.messages import ToolMessage

    if isinstance(result, ToolMessage):
        return result
    from langgraph.types import Command

    if isinstance(result, Command):
        refused_update(name, "wrap_tool_call", result)
    raise MiddlewareError(
        f"middleware {name}'s wrap_tool_call returned {type(result).__name__}: return the "
        f"handler's ToolMessage, or a ToolMessage of its own"
    )
