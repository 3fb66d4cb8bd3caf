"""The node shell: a node body with its sync and async drivers (``invoke`` drives its effects
blocking, ``ainvoke`` awaits them), run through the loop's middleware, and, when the node has
several exits, its router.

Each node's run is one generator, whatever the node: its scope made current (``seam``), the
middleware told it entered, the body, then its update settled (the spend, a stop), its chat view
derived, and recorded (the traces, the conversation); a run that ended there runs the
``after_agent`` hooks. The router then runs in the same step, on the state as the update leaves
it (``Command(update, goto)``), which spares LangGraph a superstep of edge evaluation per node.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from types import GeneratorType
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.types import Command

from reactgraph.nodes.chatview.chat import chat_update
from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.loop.middleware.scope import EndRun, Scope, entered, left
from reactgraph.nodes.vocabulary.effects import Effect, adrive, drive
from reactgraph.nodes.vocabulary.reducers import after
from reactgraph.nodes.vocabulary.state import State

Router = Callable[[Mapping[str, Any]], str]
# A node body: (state, config, deps) -> a partial update, or a generator of effects returning one.
Body = Callable[[State, Any, Deps], Any]


class Node(Runnable[State, Any]):
    """A node body with its sync and async shells and, when it has several exits, its router."""

    def __init__(self, name: str, body: Body, deps: Deps, route: Router | None = None) -> None:
        self.name = name
        self._node = name  # ``name`` as Runnable types it may be None
        self._body, self._deps, self._route = body, deps, route

    @property
    def deps(self) -> Deps:
        """What the node's body is given: the graph's tools, model and settings."""
        return self._deps

    def _run(self, state: State, config: RunnableConfig) -> Generator[Effect, Any, Any]:
        deps = self._deps
        chain = deps.chain
        started = time.perf_counter()  # the node's wall time counts toward max_run_seconds
        scope = Scope(self._node, state, config, deps.run_settings(state), deps)
        token = entered(scope)
        try:
            chain.node_entered(scope)
            try:
                result = self._body(state, config, deps)
                update = (yield from result) if isinstance(result, GeneratorType) else result
            except EndRun as ended:
                update = ended.update
            scope.seconds = time.perf_counter() - started
            if "settings" in update:  # a run's start: its own settings from here on
                scope.settings = deps.run_settings({**state, **update})
            update = chain.settle(state, update, scope)
            chat = chat_update(state, update, deps.tools, scope.chat_notes)
            if chat:
                update = {**update, "messages": chat}
            update = chain.observe(state, update, scope)
            if update.get("status") and not state.get("status"):
                ending = yield from chain.after_agent(after(state, update), scope)
                if ending:
                    update = {**update, **ending}
        except BaseException as error:
            chain.node_failed(scope, error)
            raise
        finally:
            left(token)
        if self._route is None:
            return update
        return Command(update=update, goto=self._route(after(state, update)))

    def invoke(self, input: State, config: RunnableConfig | None = None, **_: Any) -> Any:
        return drive(self._run(input, config or {}))

    async def ainvoke(self, input: State, config: RunnableConfig | None = None, **_: Any) -> Any:
        return await adrive(self._run(input, config or {}))
