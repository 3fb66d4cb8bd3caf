"""Running a tool for the model: input mapping, a hard timeout, errors as Observations, and
truncation."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import queue
import threading
import time
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from reactgraph.nodes import prompts
from reactgraph.nodes.deps import Deps
from reactgraph.nodes.state import State
from reactgraph.nodes.transcript import new_turn

logger = logging.getLogger(__name__)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with a visible marker saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + prompts.TRUNCATION_MARKER.format(cut=len(text) - limit, total=len(text))


def tool_arguments(tool: BaseTool, tool_input: str) -> str | dict[str, Any]:
    """The raw string for a one-argument tool; a JSON object for a tool with several.

    Raises ValueError with the text the model should read when the input does not fit.
    """
    keys = list(tool.args)
    if len(keys) <= 1:
        return tool_input
    try:
        value = json.loads(tool_input)
    except ValueError:
        problem = "the input is not valid JSON."
    else:
        if isinstance(value, dict):
            return value
        problem = f"got a JSON {type(value).__name__}."
    raise ValueError(
        prompts.TOOL_BAD_INPUT.format(name=tool.name, keys=", ".join(keys), problem=problem)
    )


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    content = getattr(result, "content", None)  # a ToolMessage or similar
    if isinstance(content, str):
        return content
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


class _DaemonThreads(concurrent.futures.Executor):
    """Reused daemon worker threads. A hung tool costs its timeout and no more: Python cannot
    kill a thread, but a daemon one never keeps the process from exiting (a ThreadPoolExecutor's
    threads would). A new worker starts whenever none is idle, so hung tools never queue work."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._work.put((future, fn, args, kwargs))
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1  # an idle worker will take it
        if spawn:
            threading.Thread(target=self._serve, name="tool", daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            future, fn, args, kwargs = self._work.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:
                    future.set_exception(error)
            with self._lock:
                self._idle += 1


_WORKERS = _DaemonThreads()


def _failure(tool: BaseTool, error: BaseException | None, timeout: float) -> str:
    if error is None:
        logger.warning("tool %s timed out after %.3g s", tool.name, timeout)
        return prompts.TOOL_TIMEOUT.format(name=tool.name, seconds=timeout)
    logger.warning("tool %s failed: %r", tool.name, error)
    return prompts.TOOL_ERROR.format(name=tool.name, error=str(error) or type(error).__name__)


def call_tool(tool: BaseTool, tool_input: str, timeout: float, config: RunnableConfig) -> str:
    """The tool's result as text; an error or a timeout comes back as its message, never raised."""
    try:
        arguments = tool_arguments(tool, tool_input)
    except ValueError as exc:
        return str(exc)
    future = _WORKERS.submit(tool.invoke, arguments, config)
    try:
        result = future.result(timeout)
    except concurrent.futures.TimeoutError:
        return _failure(tool, None, timeout)
    except Exception as error:
        return _failure(tool, error, timeout)
    return _as_text(result) or "(no output)"


def _is_async(tool: BaseTool) -> bool:
    """Whether the tool has its own async body (else ``ainvoke`` would park the sync one on the
    event loop's default executor, which the loop waits for when it closes)."""
    if hasattr(tool, "coroutine"):  # StructuredTool and Tool
        return tool.coroutine is not None
    return type(tool)._arun is not BaseTool._arun


async def acall_tool(
    tool: BaseTool, tool_input: str, timeout: float, config: RunnableConfig
) -> str:
    """The async twin of ``call_tool``: async tools are cancelled at the timeout; sync tools run
    on the worker threads, so they never block the event loop."""
    try:
        arguments = tool_arguments(tool, tool_input)
    except ValueError as exc:
        return str(exc)
    if _is_async(tool):
        call = tool.ainvoke(arguments, config)
    else:
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(_WORKERS, functools.partial(tool.invoke, arguments, config))
    try:
        result = await asyncio.wait_for(call, timeout)
    except TimeoutError:
        return _failure(tool, None, timeout)
    except Exception as error:
        return _failure(tool, error, timeout)
    return _as_text(result) or "(no output)"


def _complete_turn(
    state: State, deps: Deps, observation: str | None, latency: float | None
) -> dict[str, Any]:
    parsed, reply = state["parsed"], state["reply"]
    if parsed is None or reply is None:
        raise ValueError("run_tool needs a parsed reply in the state")
    kind = "invalid" if observation is None else "action"
    if observation is None:
        observation = parsed["error"] or prompts.NO_ACTION.format(valid=", ".join(deps.tools))
    observation = truncate(observation, state["settings"]["max_observation_chars"])
    turn = new_turn(
        state, kind, reply=reply, parsed=parsed, observation=observation, tool_latency_s=latency
    )
    return {"turns": [turn]}


def _tool_for(state: State, deps: Deps) -> BaseTool | None:
    parsed = state["parsed"]
    if parsed is None or parsed["kind"] != "action":
        return None
    return deps.tools.get(parsed["action"] or "")


def run_tool(state: State, config: RunnableConfig, *, deps: Deps) -> dict[str, Any]:
    """Complete the turn: run the parsed action (or reject the reply) and record the Observation."""
    tool = _tool_for(state, deps)
    if tool is None:
        return _complete_turn(state, deps, None, None)
    started = time.perf_counter()
    parsed = state["parsed"]
    observation = call_tool(
        tool, parsed["action_input"] or "", state["settings"]["tool_timeout"], config
    )
    return _complete_turn(state, deps, observation, time.perf_counter() - started)


async def arun_tool(state: State, config: RunnableConfig, *, deps: Deps) -> dict[str, Any]:
    """The async twin of ``run_tool``."""
    tool = _tool_for(state, deps)
    if tool is None:
        return _complete_turn(state, deps, None, None)
    started = time.perf_counter()
    parsed = state["parsed"]
    observation = await acall_tool(
        tool, parsed["action_input"] or "", state["settings"]["tool_timeout"], config
    )
    return _complete_turn(state, deps, observation, time.perf_counter() - started)
