"""Parallel tool calls (``parallel_tool_calls``): the wall time of one turn whose reply calls
1, 3 or 8 independent tools of 1 second each, for reactgraph with the setting on (text and
tool_calls formats, ``invoke`` and ``ainvoke``, sync and async tools) against LangGraph's
prebuilt agent's ``ToolNode`` on the same script, and against the setting off, which makes the
same calls one a turn (N turns). The goal: a turn of N such calls takes about
1 second with the setting on (not N), as the prebuilt agent's does.

``python bench/parallel_calls.py``. The BFCL ``parallel`` categories with the real SmolLM2 are
not measured here (see the report).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from common import prebuilt_agent, table, verdict
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool

from reactgraph import build_graph
from reactgraph.scripted import ScriptedChatModel

SECONDS = 1.0
COUNTS = (1, 3, 8)


def sleeper(kind: str) -> StructuredTool:
    """A tool that takes ``SECONDS``: a sync body (a worker thread), or an async one (a task)."""

    def nap(text: str) -> str:
        time.sleep(SECONDS)
        return f"slept {text}"

    async def anap(text: str) -> str:
        await asyncio.sleep(SECONDS)
        return f"slept {text}"

    if kind == "sync":
        return StructuredTool.from_function(nap, name="nap", description="Sleeps a second.")
    return StructuredTool.from_function(coroutine=anap, name="nap", description="Sleeps a second.")


def calls(count: int, first: int = 0) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[
            {"name": "nap", "args": {"text": str(i)}, "id": f"c{i}", "type": "tool_call"}
            for i in range(first, first + count)
        ],
    )


def text_calls(count: int, first: int = 0) -> str:
    lines = (f"Action: nap[{i}]" for i in range(first, first + count))
    return "Thought: all at once.\n" + "\n".join(lines)


def timed(run: Any) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def reactgraph_turn(count: int, fmt: str, on: bool, kind: str, mode: str) -> float:
    """On: one reply of ``count`` calls. Off: the seed's way to the same calls, one a turn."""
    if on:
        replies: list[Any] = [calls(count) if fmt == "tool_calls" else text_calls(count)]
    else:
        replies = [calls(1, i) if fmt == "tool_calls" else text_calls(1, i) for i in range(count)]
    model = ScriptedChatModel(replies=[*replies, "Final Answer: done"])
    graph = build_graph(
        "transcript",
        model=model,
        tools=[sleeper(kind)],
        action_format=fmt,
        parallel_tool_calls=on,
        max_parallel_calls=8,
        tool_timeout=30,
    )
    question = {"question": "Nap."}
    if mode == "invoke":
        return timed(lambda: graph.invoke(question))
    return timed(lambda: asyncio.run(graph.ainvoke(question)))


def prebuilt_turn(count: int, kind: str, mode: str) -> float:
    model = ScriptedChatModel(replies=[calls(count), AIMessage("done")])
    agent = prebuilt_agent(model, [sleeper(kind)])
    question = {"messages": [("user", "Nap.")]}
    if mode == "invoke":
        return timed(lambda: agent.invoke(question))
    return timed(lambda: asyncio.run(agent.ainvoke(question)))


def main() -> None:
    rows = []
    met = True
    for kind, mode in (("sync", "invoke"), ("sync", "ainvoke"), ("async", "ainvoke")):
        for count in COUNTS:
            anchor = prebuilt_turn(count, kind, mode)
            off = reactgraph_turn(count, "tool_calls", False, kind, mode)
            on_calls = reactgraph_turn(count, "tool_calls", True, kind, mode)
            on_text = reactgraph_turn(count, "text", True, kind, mode)
            ok = max(on_calls, on_text) < SECONDS + 0.5
            met = met and ok
            rows.append(
                [
                    f"{kind} tools, {mode}",
                    count,
                    f"{anchor:.2f} s",
                    f"{off:.2f} s",
                    f"{on_calls:.2f} s",
                    f"{on_text:.2f} s",
                    verdict(ok),
                ]
            )
    table(
        [
            "tools, run",
            "calls in the reply",
            "prebuilt ToolNode",
            "reactgraph off: one call a turn",
            "on, tool_calls",
            "on, text",
            "about 1 s when on",
        ],
        rows,
    )
    print("Goal (a turn of N independent 1-second calls takes about 1 s when on):", verdict(met))


if __name__ == "__main__":
    main()
