"""Running a tool for the model: a hard timeout, errors as Observations, and truncation (the
input mapping, the output reading and the injected arguments are ``tool_io``'s). ``ToolCall``
is the effect, the only sync/async pair, around the I/O; the node that runs it is the loop's
(``reactgraph.nodes.loop.acting``)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from reactgraph.nodes.running import deadlines
from reactgraph.nodes.running.tool_io import as_text, tool_arguments
from reactgraph.nodes.vocabulary import prompts

__all__ = ["ToolCall", "ToolExit", "as_text", "failure_text", "tool_arguments", "truncate"]

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


class ToolExit(RuntimeError):
    """A tool tried to end the process (SystemExit, KeyboardInterrupt); the model reads it as
    the tool failing."""


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


def failure_text(name: str, error: BaseException, timeout: float) -> str:
    """The Observation of a tool call that raised (a timeout included)."""
    if isinstance(error, deadlines.TimedOut):
        timeout = error.seconds or timeout
        logger.warning("tool %s timed out after %.3g s", name, timeout)
        return prompts.TOOL_TIMEOUT.format(name=name, seconds=timeout)
    if isinstance(error, deadlines.Unavailable):
        return prompts.TOOL_UNAVAILABLE.format(name=name, hanging=error.hanging)
    if isinstance(error, ValueError) and _INT_TOO_LONG in str(error):
        # The tool answered, but its int cannot even be turned into its ToolMessage's text.
        return prompts.TOOL_UNPRINTABLE.format(kind="int")
    logger.warning("tool %s failed: %r", name, error)
    return prompts.TOOL_ERROR.format(name=name, error=str(error) or type(error).__name__)


@dataclass(frozen=True)
class ToolCall:
    """One tool call within ``timeout`` seconds: the tool's own result, or its own exception
    raised (``deadlines.TimedOut`` past the timeout, ``deadlines.Unavailable`` when too many
    earlier calls still hang, ``ToolExit`` for one that tried to end the process), so that a
    middleware's retry sees it. ``arguments`` is a LangChain ``ToolCall`` dict (or the raw input
    of a tool that takes only ``*args``)."""

    tool: BaseTool
    arguments: Any
    config: RunnableConfig
    timeout: float

    def _result(self, future: Any) -> Any:
        error = future.exception()
        if isinstance(error, Exception):
            raise error
        if error is not None:  # SystemExit or KeyboardInterrupt in the tool's thread
            raise ToolExit(str(error) or type(error).__name__)
        return future.result()

    def run(self) -> Any:
        key = f"tool {self.tool.name}"
        try:
            if has_sync_body(self.tool):
                call = lambda: self.tool.invoke(self.arguments, self.config)  # noqa: E731
                future = deadlines.in_thread(call, self.timeout, key)
            else:
                coroutine = self.tool.ainvoke(self.arguments, self.config)
                future = deadlines.on_loop(coroutine, self.timeout, key)
        except deadlines.TimedOut as error:
            error.seconds = self.timeout
            raise
        return self._result(future)

    async def arun(self) -> Any:
        key = f"tool {self.tool.name}"
        deadlines.check_capacity(key)
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
            timed_out = deadlines.TimedOut(f"tool {self.tool.name} over its {self.timeout:g} s")
            timed_out.seconds = self.timeout
            raise timed_out
        return self._result(task)
