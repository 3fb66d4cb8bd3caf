"""Framework overhead per turn: an instant scripted model and an instant tool, so what is timed
is the framework (graph steps, prompt building, parsing, token accounting, tool dispatch)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from common import QUESTION, ToolCallingScript, echo, prebuilt_agent, react_replies, table, verdict
from langchain_core.messages import AIMessage

from reactgraph import build_graph
from reactgraph.scripted import ScriptedChatModel, tool_call_reply


def run_ours(turns: int, usage: bool = True) -> int:
    model = ScriptedChatModel(replies=react_replies(turns), report_usage=usage)
    graph = build_graph("transcript", model=model, tools=[echo], max_turns=turns + 1)
    out = graph.invoke({"question": QUESTION})
    assert out["status"] == "answered", out["status"]
    return len(model.calls)


def run_native(turns: int) -> int:
    """The same script as native tool calls (``action_format="tool_calls"``)."""
    calls = [tool_call_reply("echo", {"text": str(i)}, f"step {i}.", f"c{i}") for i in range(turns)]
    model = ScriptedChatModel(replies=[*calls, AIMessage("done")], report_usage=True)
    graph = build_graph(
        "transcript", model=model, tools=[echo], max_turns=turns + 1, action_format="tool_calls"
    )
    out = graph.invoke({"question": QUESTION})
    assert out["status"] == "answered", out["status"]
    return len(model.calls)


CLASSIC_PROMPT = """Answer the following questions as best you can. You have access to the \
following tools:

{tools}

Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [{tool_names}]
Action Input: the input to the action
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can repeat N times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question

Begin!

Question: {input}
Thought:{agent_scratchpad}"""


def run_classic(turns: int) -> int:
    from langchain_classic.agents import AgentExecutor, create_react_agent
    from langchain_core.prompts import PromptTemplate

    replies = [f" step {i}.\nAction: echo\nAction Input: {i}" for i in range(turns)]
    model = ScriptedChatModel(replies=[*replies, " I now know.\nFinal Answer: done"])
    agent = create_react_agent(model, [echo], PromptTemplate.from_template(CLASSIC_PROMPT))
    executor = AgentExecutor(agent=agent, tools=[echo], max_iterations=turns + 5)
    out = executor.invoke({"input": QUESTION})
    assert out["output"] == "done", out
    return len(model.calls)


def run_prebuilt(turns: int) -> int:
    model = ToolCallingScript(turns=turns)
    agent = prebuilt_agent(model, [echo])
    out = agent.invoke({"messages": [("user", QUESTION)]}, {"recursion_limit": 4 * turns + 10})
    assert out["messages"][-1].content == "done"
    return model._index


CONTENDERS: dict[str, Callable[[int], int]] = {
    "reactgraph transcript": run_ours,
    "reactgraph transcript, tiktoken counts": lambda turns: run_ours(turns, usage=False),
    "reactgraph transcript, tool_calls": run_native,
    "LangGraph prebuilt agent": run_prebuilt,
    "classic AgentExecutor": run_classic,
}


def per_turn(run: Callable[[int], int], turns: int) -> float:
    """Seconds per model call of one whole run."""
    started = time.perf_counter()
    calls = run(turns)
    return (time.perf_counter() - started) / calls


# Issue 38's goals: per turn, the text format at most 0.75x the prebuilt agent's overhead and
# the tool_calls format at most 1.0x, at 40 and at 200 turns.
TEXT_GOAL, TOOL_CALLS_GOAL = 0.75, 1.0


def bench_overhead(repeats: int) -> None:
    print("## Framework overhead per turn (instant scripted model, instant tool)\n")
    print("The model reports usage as providers do; the second row makes reactgraph count every")
    print("prompt with tiktoken instead (the anchors count nothing). Contenders take turns within")
    print(f"each of {repeats} rounds, so machine noise hits them alike; medians shown.\n")
    samples: dict[tuple[str, int], list[float]] = {}
    for run in CONTENDERS.values():
        run(3)  # warm imports and caches
    for _ in range(repeats):
        for name, run in CONTENDERS.items():
            for n in (40, 200):
                samples.setdefault((name, n), []).append(per_turn(run, n))
    ms = {key: statistics.median(values) * 1000 for key, values in samples.items()}
    rows = [(name, f"{ms[name, 40]:.2f}", f"{ms[name, 200]:.2f}") for name in CONTENDERS]
    table(("contender", "40 turns (ms/turn)", "200 turns (ms/turn)"), rows)
    for n in (40, 200):
        ratio = ms["reactgraph transcript", n] / ms["LangGraph prebuilt agent", n]
        native = ms["reactgraph transcript, tool_calls", n] / ms["LangGraph prebuilt agent", n]
        print(
            f"- {n} turns: reactgraph / prebuilt = {ratio:.2f}x (goal <= {TEXT_GOAL}x: "
            f"{verdict(ratio <= TEXT_GOAL)}), reactgraph tool_calls / prebuilt = {native:.2f}x "
            f"(goal <= {TOOL_CALLS_GOAL}x: {verdict(native <= TOOL_CALLS_GOAL)}), "
            f"reactgraph / classic = "
            f"{ms['reactgraph transcript', n] / ms['classic AgentExecutor', n]:.2f}x"
        )
    print()
