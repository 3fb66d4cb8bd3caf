"""The loop's one extension seam: middleware, an ordered list of objects whose hooks every node
runs through, the loop's own features and the application's (LangChain's ``AgentMiddleware``,
adapted in ``reactgraph.nodes.loop.middleware.adapters``) alike.

A ``Middleware`` has LangChain's six hooks, in the effects style (``effects``): a hook returns
its value, or is a generator that yields effects and returns it, so one body serves ``invoke``
and ``ainvoke``.

- ``before_agent(state, scope)``: a new run, after ``start_run`` (not a resumed one);
- ``before_model`` / ``after_model``: around each model call of a turn (the forced answer too);
- ``wrap_model_call(request, call, scope)``: ``call(request)`` makes the call (a generator of
  effects returning a ``ModelResponse``); it may be called several times, or not at all;
- ``wrap_tool_call(request, call, scope)``: the same for one tool call (``ToolMessage``); the call
  raises the tool's own exception, a timeout included;
- ``after_agent(state, scope)``: once, when the run ends (any status; not at a pause).

and the loop's own, which the application's middleware has no use for:

- ``node_entered`` / ``node_failed``: around each node;
- ``settle(state, update, scope)``: each node's update, which it may change (the spend, a stop);
- ``observe(state, update, scope)``: each node's settled update, to record (the traces, the
  conversation), which it may add to;
- ``pauses(after, settings)``: whether the parsed Action waits for a person (the approval gate);
- ``refuses(after, settings)``: whether it will be refused without asking anyone (a tool's
  call limit), so that it is not put to a person first.

A middleware whose wrapper has nothing to do in a call (the grammar when the run asks for none,
the traces with no tracer provider) says so in ``wraps(hook, scope)``: the call then goes
straight past it, with no generator of its own, rather than passing through it.

The order is LangChain's: the first of the list is the outermost wrapper; ``before_*`` hooks
run in list order, ``after_*`` (``settle``, ``observe`` too) in reverse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from inspect import isgeneratorfunction
from types import GeneratorType
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from reactgraph.nodes.loop.middleware.scope import Body, Scope

if TYPE_CHECKING:
    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langchain_core.messages import ToolMessage
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from reactgraph.nodes.vocabulary.run_settings import RunSettings

ModelCall = Callable[["ModelRequest"], "Body[ModelResponse]"]
ToolCallFn = Callable[["ToolCallRequest"], "Body[ToolMessage]"]

HOOKS = (
    "before_agent",
    "before_model",
    "wrap_model_call",
    "after_model",
    "wrap_tool_call",
    "after_agent",
    "node_entered",
    "node_failed",
    "settle",
    "observe",
    "pauses",
    "refuses",
)
"""Every hook a middleware may have; the chain calls only the middleware that has each."""


class Middleware:
    """A middleware of the loop: override the hooks it needs (see the module's docstring); the
    others are never called."""

    @property
    def name(self) -> str:
        """Its name in errors and traces (the class's)."""
        return type(self).__name__

    def before_agent(self, state: Mapping[str, Any], scope: Scope) -> Any:
        """A new run's start: an update, or None (or a generator returning one)."""
        return None

    def before_model(self, state: Mapping[str, Any], scope: Scope) -> Any:
        """Before a turn's model call: an update, or None."""
        return None

    def wrap_model_call(self, request: ModelRequest, call: ModelCall, scope: Scope) -> Any:
        """The model call, through ``call``: a generator returning its ``ModelResponse``."""
        return (yield from call(request))

    def after_model(self, state: Mapping[str, Any], scope: Scope) -> Any:
        """After a turn's model call (``state["reply"]`` holds it): an update, or None."""
        return None

    def wrap_tool_call(self, request: ToolCallRequest, call: ToolCallFn, scope: Scope) -> Any:
        """One tool call, through ``call``: a generator returning its ``ToolMessage``."""
        return (yield from call(request))

    def after_agent(self, state: Mapping[str, Any], scope: Scope) -> Any:
        """The run's end: an update, or None."""
        return None

    def node_entered(self, scope: Scope) -> None:
        """Before a node's body."""

    def node_failed(self, scope: Scope, error: BaseException) -> None:
        """A node's body raised (an interrupt too)."""

    def settle(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        """A node's update, settled: returned as it is, or changed."""
        return update

    def observe(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        """A node's settled update, recorded: returned as it is, or with records added."""
        return update

    def pauses(self, after: Mapping[str, Any], settings: RunSettings) -> bool:
        """Whether the parsed Action waits for a decision before it runs."""
        return False

    def refuses(self, after: Mapping[str, Any], settings: RunSettings) -> bool:
        """Whether the parsed Action will be refused without asking anyone."""
        return False

    def wraps(self, hook: str, scope: Scope) -> bool:
        """Whether a call goes through this middleware's ``hook`` (``wrap_model_call`` or
        ``wrap_tool_call``); False passes it straight to the next handler, which is the same
        as a wrapper that only passes it through, at no cost. Asked at each actual call (an
        outer middleware's retry asks again), only of a middleware that overrides it."""
        return True


_CLASS_HOOKS: WeakKeyDictionary[type, tuple[str, ...]] = WeakKeyDictionary()


def _hooks(middleware: Middleware) -> tuple[str, ...]:
    """The hooks ``middleware`` has: those its class overrides (looked at once per class), or
    an adapter's, those of what it adapts."""
    claims = getattr(middleware, "has", None)
    if callable(claims):  # an adapter: the hooks of what it adapts
        return tuple(hook for hook in HOOKS if claims(hook))
    kind = type(middleware)
    found = _CLASS_HOOKS.get(kind)
    if found is None:
        found = tuple(
            hook
            for hook in HOOKS
            if getattr(kind, hook, None) not in (None, getattr(Middleware, hook))
        )
        _CLASS_HOOKS[kind] = found
    return found


def _value(result: Any) -> Body[Any]:
    """A hook's result as a body: its generator's, else the value itself."""
    if isinstance(result, GeneratorType):
        return (yield from result)
    return result


def _layer(
    wrap: Callable[..., Any],
    inner: Callable[[Any], Body[Any]],
    scope: Scope,
    body: bool,
    wraps: Callable[[str, Scope], bool] | None,
    hook: str,
) -> Callable[[Any], Body[Any]]:
    """One middleware's wrapper around ``inner``, as a handler (``body``: the wrapper is a
    generator function, whose call is the handler's body as it is). With ``wraps``, each call
    through it first asks whether it wraps that call, as the scope then stands (a ladder's
    rung, moved up by an earlier attempt of the same call, has settings of its own), and goes
    straight to ``inner`` when it does not. Closures of their own, one per layer and call: a
    handler that named itself (a recursive builder's) would make a reference cycle per call,
    which only the garbage collector frees, with the request, the scope and LangGraph's
    runtime held until it does (``tests/test_seam_garbage.py``)."""
    if wraps is None:
        if body:
            return lambda request: wrap(request, inner, scope)
        return lambda request: _value(wrap(request, inner, scope))
    if body:
        return lambda request: wrap(request, inner, scope) if wraps(hook, scope) else inner(request)
    return lambda request: (
        _value(wrap(request, inner, scope)) if wraps(hook, scope) else inner(request)
    )


Layers = tuple[tuple[Callable[..., Any], bool, Callable[[str, Scope], bool] | None], ...]


def _wraps_of(middleware: Middleware) -> Callable[[str, Scope], bool] | None:
    """The middleware's ``wraps``, when it has one of its own (None: it always wraps)."""
    own = getattr(type(middleware), "wraps", None)
    if own is None or own is Middleware.wraps:
        return None
    return middleware.wraps


def _wrapped(layers: Layers, hook: str, request: Any, scope: Scope, inner: Any) -> Body[Any]:
    """``request`` through the wrappers (``layers``, innermost first)."""
    handler = inner
    for wrap, body, wraps in layers:  # built inside out, the first outermost
        handler = _layer(wrap, handler, scope, body, wraps, hook)
    return (yield from handler(request))


class Chain:
    """The loop's middleware in order, each hook's list precomputed (a hook no middleware has
    costs nothing per call)."""

    def __init__(self, middleware: Sequence[Middleware]) -> None:
        self.middleware = tuple(middleware)
        every: dict[str, list[Middleware]] = {hook: [] for hook in HOOKS}
        loops: dict[str, list[Middleware]] = {hook: [] for hook in HOOKS}
        for m in self.middleware:
            ours = not getattr(m, "application", False)
            for hook in _hooks(m):
                every[hook].append(m)
                if ours:
                    loops[hook].append(m)
        self._with = {hook: tuple(every[hook]) for hook in HOOKS}
        self._own = {hook: tuple(loops[hook]) for hook in HOOKS}
        # The hooks each node runs, in their (reverse) order once; a hook only one middleware
        # has is that middleware's own, called directly (no loop, no call of the chain's).
        self._settle = self._with["settle"][::-1]
        self._observe = self._with["observe"][::-1]
        self._entered = self._with["node_entered"]
        for hook, found in (
            ("settle", self._settle),
            ("observe", self._observe),
            ("node_entered", self._entered),
        ):
            if len(found) == 1:
                setattr(self, hook, getattr(found[0], hook))
        # The wrappers of each call, innermost first (the loop's own alone too), each bound
        # once, with whether it is a generator function (its call is then the handler's body)
        # and the middleware's own ``wraps``, if it has one.
        self._layers = {
            (hook, own): tuple(
                (getattr(m, hook), isgeneratorfunction(getattr(m, hook)), _wraps_of(m))
                for m in reversed(found[hook])
            )
            for hook in ("wrap_model_call", "wrap_tool_call")
            for own, found in ((False, self._with), (True, self._own))
        }

    def having(self, hook: str) -> tuple[Middleware, ...]:
        """The middleware with ``hook``, in list order."""
        return self._with[hook]

    def _updates(self, hook: str, state: Mapping[str, Any], scope: Scope, order: Any) -> Body:
        merged: dict[str, Any] = {}
        for middleware in order(self._with[hook]):
            view = {**state, **merged} if merged else state
            update = yield from _value(getattr(middleware, hook)(view, scope))
            if update:
                merged.update(update)
        return merged

    def before_agent(self, state: Mapping[str, Any], scope: Scope) -> Body[dict[str, Any]]:
        """Every ``before_agent`` hook, in list order: their updates, merged."""
        return self._updates("before_agent", state, scope, tuple)

    def before_model(self, state: Mapping[str, Any], scope: Scope) -> Body[dict[str, Any]]:
        """Every ``before_model`` hook, in list order."""
        return self._updates("before_model", state, scope, tuple)

    def after_model(self, state: Mapping[str, Any], scope: Scope) -> Body[dict[str, Any]]:
        """Every ``after_model`` hook, in reverse order."""
        return self._updates("after_model", state, scope, reversed)

    def after_agent(self, state: Mapping[str, Any], scope: Scope) -> Body[dict[str, Any]]:
        """Every ``after_agent`` hook, in reverse order."""
        return self._updates("after_agent", state, scope, reversed)

    def model_call(
        self, request: ModelRequest, scope: Scope, send: ModelCall, own_only: bool = False
    ) -> Body[Any]:
        """The model call through every ``wrap_model_call``, the first outermost; ``send``
        makes it. ``own_only``: through the loop's own middleware alone (a summary's call: an
        application's middleware wraps the agent's calls, as in ``create_agent``)."""
        layers = self._layers["wrap_model_call", own_only]
        return _wrapped(layers, "wrap_model_call", request, scope, send)

    def tool_call(self, request: ToolCallRequest, scope: Scope, execute: ToolCallFn) -> Body:
        """The tool call through every ``wrap_tool_call``; ``execute`` runs the tool."""
        call = request.tool_call
        scope.asked[str(call.get("id"))] = (str(call.get("name")), call.get("args"))
        layers = self._layers["wrap_tool_call", False]
        return _wrapped(layers, "wrap_tool_call", request, scope, execute)

    def node_entered(self, scope: Scope) -> None:
        """Every ``node_entered`` hook."""
        for middleware in self._entered:
            middleware.node_entered(scope)

    def node_failed(self, scope: Scope, error: BaseException) -> None:
        """Every ``node_failed`` hook."""
        for middleware in reversed(self._with["node_failed"]):
            middleware.node_failed(scope, error)

    def settle(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        """The update through every ``settle`` hook (reverse order: the innermost first)."""
        for middleware in self._settle:
            update = middleware.settle(state, update, scope)
        return update

    def observe(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        """The settled update through every ``observe`` hook (reverse order)."""
        for middleware in self._observe:
            update = middleware.observe(state, update, scope)
        return update

    def pauses(self, after: Mapping[str, Any], settings: RunSettings) -> bool:
        """Whether the parsed Action waits for a person: some middleware holds it, and none
        refuses it unasked (a call past its limit is refused, never put to a person)."""
        if not any(m.pauses(after, settings) for m in self._with["pauses"]):
            return False
        return not any(m.refuses(after, settings) for m in self._with["refuses"])

    def names(self) -> list[str]:
        """The middleware's names, in order (for errors, docs and tests)."""
        return [m.name for m in self.middleware]
