"""A node's run as its middleware share it (``Scope``): the state it started from, its
config, the run's settings, the graph's objects, what it spent (``Ledger``) and by when its
calls must end; the node shell makes it current for the node's body. Beside it, what a
middleware answers or raises with: a call refused in the tool's place, a run ended
(``EndRun``), a misuse (``MiddlewareError``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from langgraph.errors import GraphBubbleUp
from langgraph.runtime import get_runtime

from reactgraph.nodes.calling.providers import model_name, model_url
from reactgraph.nodes.calling.tokens import count_tokens, read_usage
from reactgraph.nodes.loop.formats import Deps as FormatDeps
from reactgraph.nodes.vocabulary.effects import Effect
from reactgraph.nodes.vocabulary.state import ModelUsage

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from reactgraph.nodes.vocabulary.run_settings import RunSettings

T = TypeVar("T")
Body = Generator[Effect, Any, T]


class Deps(FormatDeps, Protocol):
    """What a middleware may ask of the graph it runs in (the loop's ``Deps`` is one)."""

    @property
    def tools(self) -> Mapping[str, Any]:
        """The graph's tools by name."""
        ...

    @property
    def token_counter(self) -> Callable[[Sequence[Any]], int]:
        """Counts a prompt's tokens when the provider reports no usage."""
        ...

    def run_settings(self, state: Mapping[str, Any]) -> RunSettings:
        """The run's settings."""
        ...


def cost_of(
    prompt: int, completion: int, prices: tuple[float, ...] | None, cached: int = 0
) -> float | None:
    """The cost of tokens at prices per million prompt, completion and cached prompt tokens
    (``token_prices``; without a third, cached tokens cost the input price); None without
    prices. ``cached``: of the ``prompt`` tokens, those read from the provider's cache."""
    if prices is None:
        return None
    cached = min(max(cached, 0), prompt)
    cached_price = prices[2] if len(prices) > 2 else prices[0]
    return ((prompt - cached) * prices[0] + cached * cached_price + completion * prices[1]) / (
        1_000_000
    )


@dataclass(slots=True, init=False)
class Ledger:
    """What one node's run spent: every model call made (a middleware's retries and fallbacks,
    its own calls to a model too) and every tool call that started."""

    prompt_tokens: int
    completion_tokens: int
    cache_read_tokens: int
    """Of the prompt tokens, those the provider read from its prefix cache."""
    model_calls: int
    tool_calls: dict[str, int]
    cost: float | None
    """The calls' cost, each at the prices in force when it was made (None: none priced)."""
    by_model: dict[str, list[Any]]
    """By the name a middleware gave the model called (``Scope.calling``): prompt and
    completion tokens, calls, cost (None: not priced). Calls of no such name are not in it."""

    def __init__(self) -> None:
        # Every field starts here (one is made for every node's run).
        self.prompt_tokens = self.completion_tokens = self.cache_read_tokens = 0
        self.model_calls = 0
        self.tool_calls = {}
        self.cost = None
        self.by_model = {}

    def model_call(
        self,
        prompt: int,
        completion: int,
        cached: int = 0,
        model: str | None = None,
        prices: tuple[float, ...] | None = None,
    ) -> None:
        """One model call's tokens (``cached``: of its prompt's, those read from the provider's
        prefix cache); ``model``: the name of the model called (``Scope.calling``), ``prices``:
        ``token_prices`` then in force."""
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cache_read_tokens += cached
        self.model_calls += 1
        cost = cost_of(prompt, completion, prices, cached)
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        if model is not None:
            entry = self.by_model.setdefault(model, [0, 0, 0, None])
            entry[0] += prompt
            entry[1] += completion
            entry[2] += 1
            if cost is not None:
                entry[3] = (entry[3] or 0.0) + cost

    def tool_call(self, name: str) -> None:
        """One call of the tool ``name`` started."""
        self.tool_calls[name] = self.tool_calls.get(name, 0) + 1

    def split(self, before: Mapping[str, ModelUsage]) -> dict[str, ModelUsage]:
        """A run's spend by model (``usage["by_model"]``) with what these calls added."""
        split = {name: ModelUsage(**entry) for name, entry in before.items()}
        for name, (prompt, completion, calls, cost) in self.by_model.items():
            entry = split.setdefault(
                name, ModelUsage(prompt_tokens=0, completion_tokens=0, calls=0, cost=None)
            )
            entry["prompt_tokens"] += prompt
            entry["completion_tokens"] += completion
            entry["calls"] += calls
            if cost is not None:
                entry["cost"] = (entry["cost"] or 0.0) + cost
        return split


@dataclass(slots=True, init=False)
class Scope:
    """One node's run, as its middleware share it: the node, the state it started from, its
    config, the run's settings, the graph's objects, what it spent, and by when its calls must
    end (``deadline``, ``time.monotonic()``: a budget's time left; None when unbounded). Made
    for every node's run: slotted, and given only its first five fields (its ``__init__``
    starts the others empty), which keeps it cheap."""

    node: str
    state: Mapping[str, Any]
    config: RunnableConfig
    settings: RunSettings
    deps: Deps
    ledger: Ledger
    started: float
    """When the node's run began (``time.monotonic()``)."""
    deadline: float | None
    purpose: str
    """What the node's model call is for: ``turn``, ``forced`` or ``summary``."""
    on_retry: list[Callable[[int, BaseException, float], None]]
    """Told of each retry of the model call in flight (the traces' chat span)."""
    seconds: float
    """The node's wall time, once its body is done (what ``settle`` counts)."""
    counted: dict[int, tuple[Any, tuple[int, int, str]]]
    """Each reply's tokens, counted once (the budgets, the traces and the turn record ask)."""
    chat_notes: list[str]
    """What a middleware has the chat view show after this node's messages (a budget's
    warning, which the model reads inside an Observation that chat clients fold away)."""
    lost_calls: dict[int, tuple[Any, int]]
    """By reply: the earlier sendings of its call a kill hid (counted with it)."""
    calling: str | None
    """The name a middleware gave the model of the call in flight (the model ladder's rung),
    by which the spend is split (``Ledger.by_model``); None: not split."""
    marks: dict[str, Any]
    """What a middleware keeps between its hooks for this node's run (what a call decided
    that its ``settle`` then writes), under keys of its own."""
    asked: dict[str, tuple[str, Any]]
    """By call id: each tool call as the node made it (name, arguments), before any
    middleware changed it (what a person's decision was given on)."""

    def __init__(
        self,
        node: str,
        state: Mapping[str, Any],
        config: RunnableConfig,
        settings: RunSettings,
        deps: Deps,
    ) -> None:
        # Every field but the first five starts here (one is made for every node's run).
        self.node = node
        self.state = state
        self.config = config
        self.settings = settings
        self.deps = deps
        self.ledger = Ledger()
        self.started = time.monotonic()
        self.deadline = self.calling = None
        self.purpose = "turn"
        self.on_retry = []
        self.seconds = 0.0
        self.counted = {}
        self.chat_notes = []
        self.lost_calls = {}
        self.marks = {}
        self.asked = {}

    def lost(self, message: Any, calls: int, prompt: int) -> None:
        """``calls`` earlier sendings of the call that ``message`` answers were lost to a kill:
        they count with it, at ``prompt`` tokens each (its turn's record says how many)."""
        self.lost_calls[id(message)] = (message, calls)
        found = self.counted.get(id(message))
        if found is not None and found[0] is message:
            p, c, source = found[1]
            self.counted[id(message)] = (message, (p + calls * prompt, c, source))

    def lost_of(self, message: Any) -> int:
        """The earlier sendings a kill hid of the call ``message`` answers (0: none)."""
        found = self.lost_calls.get(id(message))
        return found[1] if found is not None and found[0] is message else 0

    def tokens(
        self, prompt: Callable[[], Sequence[Any]], message: Any, model: Any = None
    ) -> tuple[int, int, str]:
        """A model call's prompt and completion tokens and where they came from: the
        provider's usage when it reports a sound one, else the graph's token counter over the
        messages ``prompt()`` gives (made only then: a long transcript's list is not copied
        for a provider that reports its usage; a usage that cannot be right is said once per
        server: ``model``'s)."""
        found = self.counted.get(id(message))
        if found is not None and found[0] is message:
            return found[1]
        usage = read_usage(message)
        if isinstance(usage, tuple):
            value: tuple[int, int, str] = (*usage, "usage")
        else:
            server = None if model is None else model_url(model) or model_name(model)
            value = count_tokens(self.deps.token_counter, list(prompt()), message, server)
        self.counted[id(message)] = (message, value)
        return value

    def time_left(self) -> float | None:
        """Seconds left before ``deadline`` (None: none)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def retried(self, attempt: int, error: BaseException, delay: float) -> None:
        """Tell the listeners of a retry of the model call."""
        for listener in self.on_retry:
            listener(attempt, error, delay)


NOT_RUN = "reactgraph_not_run"
"""A ``ToolMessage``'s ``response_metadata`` key a middleware sets when it answered in the
tool's place and the tool did not run (a call past its limit, a call refused): the turn then
records no tool time, and the call counts against no limit."""


def refused_call(request: Any, text: str) -> Any:
    """The ``ToolMessage`` a middleware answers a tool call with in the tool's place, the tool
    not run (``NOT_RUN``): ``text`` is the call's Observation."""
    from langchain_core.messages import ToolMessage

    call = request.tool_call
    failed: Any = "error"  # ToolMessage's status of a failed call
    return ToolMessage(
        text,
        tool_call_id=str(call.get("id")),
        name=str(call.get("name")),
        status=failed,
        response_metadata={NOT_RUN: True},
    )


class MiddlewareError(ValueError):
    """A middleware was misused (a hook returned what the loop cannot take): raised out of
    the run, never turned into an Observation."""


class EndRun(GraphBubbleUp):
    """Raised by a middleware to end the run before its node's work (a budget spent before a
    model call): the node's update is ``update`` (its ``status`` says why). It is LangGraph's
    ``GraphBubbleUp``, which LangChain's middleware lets through (a fallback, a retry), as it
    does an interrupt; the node shell catches it."""

    def __init__(self, update: Mapping[str, Any]) -> None:
        super().__init__(str(update.get("status")))
        self.update = dict(update)


_CURRENT: ContextVar[Scope | None] = ContextVar("reactgraph_scope", default=None)


def entered(scope: Scope) -> Any:
    """Make ``scope`` the running node's (``current`` finds it); returns the token that
    ``left`` takes."""
    return _CURRENT.set(scope)


def left(token: Any) -> None:
    """The node's run is over: its scope is no longer current (a body finished in another
    context, an interrupted one collected later, leaves that context's as it was)."""
    try:
        _CURRENT.reset(token)
    except ValueError:
        _CURRENT.set(None)


def current(state: Mapping[str, Any], config: RunnableConfig, deps: Any, node: str = "") -> Scope:
    """The running node's scope, or one of its own for a body run outside a graph's node
    (a node body's test)."""
    found = _CURRENT.get()
    if found is not None and found.state is state:
        return found
    return Scope(node, state, config, deps.run_settings(state), deps)


def runtime_of() -> Any:
    """LangGraph's runtime of the running graph (None outside one: a node's own test)."""
    try:
        return get_runtime()
    except RuntimeError:
        return None
