"""Framework overhead per turn: an instant scripted model and an instant tool, so what is timed
is the framework (graph steps, prompt building, parsing, token accounting, tool dispatch)."""

from __future__ import annotations

import concurrent.futures
import operator
import re
import statistics
import time
from collections.abc import Callable
from typing import Annotated, Any, NotRequired, TypedDict

from common import QUESTION, echo, prebuilt_agent, react_replies, table, verdict
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from reactgraph import build_graph
from reactgraph.scripted import ScriptedChatModel, tool_call_reply

# A provider's usage costs its client nothing: a number in the reply. The scripted model's own
# estimate (``report_usage``) sums the prompt's characters, a cost that grows with the transcript
# and that the anchors' models do not pay (0.15 ms a turn at 200 turns), so the model reports a
# fixed usage: the framework's accounting runs as with any provider.
USAGE = (800, 20)


def scripted(replies: list[Any], usage: bool = True) -> ScriptedChatModel:
    """The scripted model with a fixed usage (an earlier tree's, for ``before_after.py``, may
    know only its own estimate)."""
    if not usage:
        return ScriptedChatModel(replies=replies)
    if "fixed_usage" not in ScriptedChatModel.model_fields:
        return ScriptedChatModel(replies=replies, report_usage=True)
    return ScriptedChatModel(replies=replies, fixed_usage=USAGE)


def run_ours(turns: int, usage: bool = True) -> int:
    model = scripted(react_replies(turns), usage)
    graph = build_graph("transcript", model=model, tools=[echo], max_turns=turns + 1)
    out = graph.invoke({"question": QUESTION})
    assert out["status"] == "answered", out["status"]
    return len(model.calls)


def tool_calling_model(turns: int) -> ScriptedChatModel:
    """The same script as native tool calls, for reactgraph's tool_calls format and for the
    prebuilt agent alike: one model class, so no contender's model costs less per call (its
    tools bound as ``ChatOpenAI`` binds them, so every call carries their schemas)."""
    calls = [tool_call_reply("echo", {"text": str(i)}, f"step {i}.", f"c{i}") for i in range(turns)]
    return scripted([*calls, AIMessage("done")])


def run_native(turns: int) -> int:
    """The same script as native tool calls (``action_format="tool_calls"``)."""
    model = tool_calling_model(turns)
    graph = build_graph(
        "transcript", model=model, tools=[echo], max_turns=turns + 1, action_format="tool_calls"
    )
    out = graph.invoke({"question": QUESTION})
    assert out["status"] == "answered", out["status"]
    return len(model.calls)


class FloorState(TypedDict):
    """The floor's state: the prompt's messages, the parsed action, the answer."""

    messages: Annotated[list[BaseMessage], operator.add]
    action: NotRequired[tuple[str, str]]
    answer: NotRequired[str]


_FLOOR_READ = re.compile(r"Action: (\w+)\[(.*)\]|Final Answer: (.*)", re.S)
_FLOOR_THREAD = concurrent.futures.ThreadPoolExecutor(1)  # reused, as reactgraph's are


def floor_graph(model: ScriptedChatModel) -> Any:
    """The thinnest text-format loop on LangGraph with reactgraph's three nodes a turn: the
    model's call, a parse, the tool on a reused worker thread with a timeout. None of the
    product's features: not a contender, but what the graph alone costs."""

    def call_model(state: FloorState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"], config)]}

    def parse_reply(state: FloorState) -> Command[Any]:
        found = _FLOOR_READ.search(str(state["messages"][-1].content))
        if found is None or found[3] is not None:
            return Command(update={"answer": found[3] if found else ""}, goto=END)
        return Command(update={"action": (found[1], found[2])}, goto="run_tool")

    def run_tool(state: FloorState, config: RunnableConfig) -> dict[str, Any]:
        _, text = state["action"]
        observed = _FLOOR_THREAD.submit(echo.invoke, {"text": text}, config).result(60)
        return {"messages": [HumanMessage(f"Observation: {observed}")]}

    builder = StateGraph(FloorState)
    builder.add_node("call_model", call_model)
    builder.add_node("parse_reply", parse_reply, destinations=("run_tool", END))
    builder.add_node("run_tool", run_tool)
    builder.add_edge(START, "call_model")
    builder.add_edge("call_model", "parse_reply")
    builder.add_edge("run_tool", "call_model")
    return builder.compile()


def run_floor(turns: int) -> int:
    model = scripted(react_replies(turns))
    graph = floor_graph(model)
    out = graph.invoke({"messages": [HumanMessage(QUESTION)]}, {"recursion_limit": 4 * turns + 10})
    assert out["answer"] == "done", out.get("answer")
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
    model = tool_calling_model(turns)
    agent = prebuilt_agent(model, [echo])
    out = agent.invoke({"messages": [("user", QUESTION)]}, {"recursion_limit": 4 * turns + 10})
    assert out["messages"][-1].content == "done"
    return len(model.calls)


FLOOR = "floor: LangGraph and the three nodes alone"
CONTENDERS: dict[str, Callable[[int], int]] = {
    "reactgraph transcript": run_ours,
    "reactgraph transcript, tiktoken counts": lambda turns: run_ours(turns, usage=False),
    "reactgraph transcript, tool_calls": run_native,
    "LangGraph prebuilt agent": run_prebuilt,
    "classic AgentExecutor": run_classic,
    FLOOR: run_floor,
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
    print("The model reports a fixed usage, as a provider's costs its client nothing; the second")
    print("row makes reactgraph count every prompt with tiktoken instead (the anchors count")
    print("nothing). The floor is not a contender: LangGraph with reactgraph's three nodes a turn")
    print("and none of its features, what the graph alone costs. Contenders take turns within")
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
            f"{ms['reactgraph transcript', n] / ms['classic AgentExecutor', n]:.2f}x; "
            f"the floor / prebuilt = {ms[FLOOR, n] / ms['LangGraph prebuilt agent', n]:.2f}x"
        )
    print()
