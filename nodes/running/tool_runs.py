"""Running a tool for the model: a hard timeout, errors as Observations, and truncation (the
input mapping, the output reading and the injected arguments are ``tool_io``'s).
``run_tool`` is one body; ``ToolCall`` is the only sync/async pair, around the I/O.

Delivery is at least once: a run killed after a tool returned but before the step's checkpoint
was written runs that call again when resumed. Each call's config therefore carries an
idempotency key (``configurable["idempotency_key"]``: thread, run and turn) that stays the same
across resumes, so a tool with side effects can recognise a repeat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.runtime import get_runtime

from reactgraph.nodes.calling import deadlines
from reactgraph.nodes.features import tracing
from reactgraph.nodes.features.budgets import over_limit, remaining_seconds
from reactgraph.nodes.loop import prompts
from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.loop.effects import Effect
from reactgraph.nodes.loop.state import State, TurnKind
from reactgraph.nodes.loop.storable import storable
from reactgraph.nodes.loop.transcript import new_turn
from reactgraph.nodes.running.tool_io import as_text, call_arguments, fill, outcome, tool_arguments

__all__ = ["ToolCall", "as_text", "run_tool", "tool_arguments", "truncate"]

logger = logging.getLogger(__name__)

# An async tool that blocks the event loop cannot be interrupted; past its timeout by this
# much, the lateness is reported as such.
_LOOP_BLOCKED_S = 0.5
# Python's message when an int has more digits than it will print.
_INT_TOO_LONG = "integer string conversion"


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + prompts.TRUNCATION_MARKER.format(cut=len(text) - limit, total=len(text))


def has_sync_body(tool: BaseTool) -> bool:
    """Whether ``tool.invoke`` works: async-only tools (MCP's, say) have only a coroutine."""
    if hasattr(tool, "func") and hasattr(tool, "coroutine"):  # StructuredTool and Tool
        return tool.func is not None
    return type(tool)._run is not BaseTool._run


def has_async_body(tool: BaseTool) -> bool:
    """Whether the tool has its own async body (else ``ainvoke`` would park the sync one on the
    event loop's default executor, which the loop waits for when it closes)."""
    if hasattr(tool, "coroutine"):
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


@dataclass(frozen=True)
class ToolCall:
    """One tool call within ``timeout`` seconds: its Observation (the result, or the error, as
    text) and its artifact. ``arguments`` is a LangChain ``ToolCall`` dict (or the raw input of a
    tool that takes only ``*args``)."""

    tool: BaseTool
    arguments: Any
    config: RunnableConfig
    timeout: float

    def _failure(self, error: BaseException | None) -> str:
        name = self.tool.name
        tracing.tool_failed(self.config, "timeout" if error is None else type(error).__qualname__)
        if error is None:
            logger.warning("tool %s timed out after %.3g s", name, self.timeout)
            return prompts.TOOL_TIMEOUT.format(name=name, seconds=self.timeout)
        if isinstance(error, deadlines.Unavailable):
            return prompts.TOOL_UNAVAILABLE.format(name=name, hanging=error.hanging)
        if isinstance(error, ValueError) and _INT_TOO_LONG in str(error):
            # The tool answered, but its int cannot even be turned into its ToolMessage's text.
            return prompts.TOOL_UNPRINTABLE.format(kind="int")
        logger.warning("tool %s failed: %r", name, error)
        return prompts.TOOL_ERROR.format(name=name, error=str(error) or type(error).__name__)

    def _result(self, future: Any) -> tuple[str, Any]:
        error = future.exception()
        if error is not None:
            return self._failure(error), None
        return outcome(self.tool.name, future.result())

    def run(self) -> tuple[str, Any]:
        key = f"tool {self.tool.name}"
        try:
            if has_sync_body(self.tool):
                call = lambda: self.tool.invoke(self.arguments, self.config)  # noqa: E731
                future = deadlines.in_thread(call, self.timeout, key)
            else:
                coroutine = self.tool.ainvoke(self.arguments, self.config)
                future = deadlines.on_loop(coroutine, self.timeout, key)
        except deadlines.TimedOut:
            return self._failure(None), None
        except deadlines.Unavailable as error:
            return self._failure(error), None
        return self._result(future)

    async def arun(self) -> tuple[str, Any]:
        key = f"tool {self.tool.name}"
        try:
            deadlines.check_capacity(key)
        except deadlines.Unavailable as error:
            return self._failure(error), None
        if has_async_body(self.tool):
            task: Any = asyncio.ensure_future(self.tool.ainvoke(self.arguments, self.config))
            running: Any = task
        else:
            # Sync tools run on the worker threads, never on the loop or its default executor.
            call = lambda: self.tool.invoke(self.arguments, self.config)  # noqa: E731
            running = deadlines.THREADS.submit(call)
            task = asyncio.wrap_future(running)
        started = time.perf_counter()
        # Not wait_for: it waits for a cancelled task to finish, which a tool that swallows
        # CancelledError never does. The Observation is the timeout, whatever the tool does.
        done, _ = await asyncio.wait({task}, timeout=self.timeout)
        late = time.perf_counter() - started - self.timeout
        if late > _LOOP_BLOCKED_S:
            logger.warning(
                "tool %s blocked the event loop for %.1f s past its timeout: an async tool that "
                "blocks the loop cannot be interrupted; make it await, or give it a sync body",
                self.tool.name,
                late,
            )
        if not done or late > _LOOP_BLOCKED_S:
            task.cancel()
            running.cancel()
            if not running.done():
                deadlines.abandon(key, running)
            return self._failure(None), None
        return self._result(task)


def run_tool(
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """Complete the turn: run the parsed action (or reject the reply) and record the Observation
    (and the tool's artifact, if it gave one)."""
    parsed, reply = state["parsed"], state["reply"]
    if parsed is None or reply is None:
        raise ValueError("run_tool needs a parsed reply in the state")
    tool = deps.tools.get(parsed["action"] or "") if parsed["kind"] == "action" else None
    latency = artifact = None
    settings = deps.run_settings(state)
    kind: TurnKind
    limit = over_limit(state, settings, tool.name) if tool is not None else None
    if tool is None:
        kind = "invalid"
        observation = parsed["error"] or prompts.NO_ACTION.format(valid=", ".join(deps.tools))
    elif limit is not None:
        kind = "action"  # an Action refused, as a person's refusal is: it did not run
        observation = prompts.TOOL_LIMIT_REACHED.format(name=tool.name, limit=limit)
        logger.info("%s not run: its limit of %d call(s) is reached", tool.name, limit)
    else:
        kind = "action"
        injected = deps.injected.get(tool.name)
        hidden = injected.hidden if injected else frozenset()
        started = time.perf_counter()
        own_config = tool_config(state, config)
        try:
            if parsed.get("args") is not None:  # a native tool call: its arguments as sent
                arguments = call_arguments(tool, parsed["args"] or {}, hidden)
            else:
                arguments = tool_arguments(tool, parsed["action_input"] or "", hidden)
            tool_call = tool_call_for(state, own_config, deps, tool, arguments)
        except ValueError as error:
            observation = str(error)
        else:
            # A tool never runs past the run's time budget: its timeout is what is left of it.
            left = remaining_seconds(state, settings)
            timeout = settings.tool_timeout if left is None else min(settings.tool_timeout, left)
            call = ToolCall(tool, tool_call, own_config, max(timeout, 0.001))
            observation, artifact = yield call
            latency = time.perf_counter() - started
    observation = truncate(storable(observation), settings.max_observation_chars)
    turn = new_turn(
        state,
        kind,
        reply=reply,
        parsed=parsed,
        observation=observation,
        tool_latency_s=latency,
        artifact=artifact,
    )
    return {"turns": [turn]}


def tool_call_for(
    state: State,
    config: RunnableConfig,
    deps: Deps,
    tool: BaseTool,
    arguments: dict[str, Any] | str,
) -> dict[str, Any] | str:
    """The LangChain ``ToolCall`` for the tool, its injected arguments filled (its id is the
    call's idempotency key); a tool that takes only ``*args`` is called with the raw input.

    Raises ValueError with the Observation when the injected arguments cannot be filled.
    """
    if isinstance(arguments, str):
        return arguments
    call_id = idempotency_key(state)
    injected = deps.injected.get(tool.name)
    if injected:
        try:
            runtime = get_runtime()
        except RuntimeError:  # called outside a graph (a node body's own test)
            runtime = None
        try:
            arguments = fill(
                injected,
                arguments,
                state=state,
                config=config,
                runtime=runtime,
                call_id=call_id,
                tools=list(deps.tools.values()),
            )
        except (KeyError, ValueError) as error:
            raise ValueError(prompts.TOOL_ERROR.format(name=tool.name, error=str(error))) from None
    return {"name": tool.name, "args": arguments, "id": call_id, "type": "tool_call"}


def idempotency_key(state: State) -> str:
    """The same on every attempt of this turn's call: thread, run, turn."""
    turn = len(state.get("turns") or []) + 1
    return f"{state.get('thread_id')}/{state.get('run', 1)}/{turn}"


def tool_config(state: State, config: RunnableConfig) -> RunnableConfig:
    """The config a tool call gets: the run's, plus a key that is the same on every attempt of
    this call (thread, run, turn), for tools that must not act twice."""
    key = idempotency_key(state)
    configurable = {**(config.get("configurable") or {}), "idempotency_key": key}
    metadata = {**(config.get("metadata") or {}), "idempotency_key": key}
    return {**config, "configurable": configurable, "metadata": metadata}
