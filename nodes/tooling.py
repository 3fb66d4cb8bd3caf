"""Running a tool for the model: input mapping, a hard timeout, errors as Observations, and
truncation."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import time
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from nodes import prompts
from nodes.deps import Deps
from nodes.state import State
from nodes.transcript import new_turn

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


# Sync tools run on worker threads so a hung tool costs its timeout and no more (Python cannot
# kill a thread; the worker is freed when the tool returns). Many workers, since hung ones stay.
_WORKERS = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="tool")


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
        future.cancel()  # still queued behind hung tools: never start it
        logger.warning("tool %s timed out after %.3g s", tool.name, timeout)
        return prompts.TOOL_TIMEOUT.format(name=tool.name, seconds=timeout)
    except Exception as error:
        logger.warning("tool %s failed: %r", tool.name, error)
        detail = str(error) or type(error).__name__
        return prompts.TOOL_ERROR.format(name=tool.name, error=detail)
    return _as_text(result) or "(no output)"


def run_tool(state: State, config: RunnableConfig, *, deps: Deps) -> dict[str, Any]:
    """Complete the turn: run the parsed action (or reject the reply) and record the Observation."""
    parsed = state["parsed"]
    reply = state["reply"]
    if parsed is None or reply is None:
        raise ValueError("run_tool needs a parsed reply in the state")
    settings = state["settings"]
    latency = None
    if parsed["kind"] == "action" and parsed["action"] in deps.tools:
        started = time.perf_counter()
        observation = call_tool(
            deps.tools[parsed["action"]],
            parsed["action_input"] or "",
            settings["tool_timeout"],
            config,
        )
        latency = time.perf_counter() - started
        kind = "action"
    else:
        observation = parsed["error"] or prompts.NO_ACTION.format(valid=", ".join(deps.tools))
        kind = "invalid"
    observation = truncate(observation, settings["max_observation_chars"])
    turn = new_turn(
        state, kind, reply=reply, parsed=parsed, observation=observation, tool_latency_s=latency
    )
    return {"turns": [turn]}
