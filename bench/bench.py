"""reactgraph's benchmark: framework overhead per turn, side by side with the anchors.

Run with ``make bench`` (or ``python bench/bench.py``). Every figure is measured in this one run
on this machine; nothing here is a test. The model and tools are instant, so what is timed is
the framework: graph steps, prompt building, parsing, token accounting and tool dispatch.
"""

from __future__ import annotations

import argparse
import functools
import logging
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import PrivateAttr

from reactgraph import build_graph
from reactgraph.scripted import ScriptedChatModel

QUESTION = "What do the echoes say?"


@tool
def echo(text: str) -> str:
    """Returns its input."""
    return f"echo {text}"


def react_replies(turns: int) -> list[str]:
    """The same script for every contender: ``turns`` actions, then a final answer."""
    replies = [f"Thought: step {i}.\nAction: echo[{i}]" for i in range(turns)]
    return [*replies, "Thought: I now have enough information.\nFinal Answer: done"]


def run_ours(turns: int, usage: bool = True) -> int:
    model = ScriptedChatModel(replies=react_replies(turns), report_usage=usage)
    graph = build_graph("transcript", model=model, tools=[echo], max_turns=turns + 1)
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


class ToolCallingScript(BaseChatModel):
    """The same script as tool calls, for the prebuilt tool-calling agent."""

    turns: int
    _index: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "tool-calling-script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingScript:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        index = self._index
        self._index += 1
        if index < self.turns:
            call = {"name": "echo", "args": {"text": str(index)}, "id": f"call-{index}"}
            message = AIMessage(f"step {index}.", tool_calls=[call])
        else:
            message = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=message)])


def run_prebuilt(turns: int) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent
    model = ToolCallingScript(turns=turns)
    agent = create_react_agent(model, [echo])
    out = agent.invoke({"messages": [("user", QUESTION)]}, {"recursion_limit": 4 * turns + 10})
    assert out["messages"][-1].content == "done"
    return model._index


CONTENDERS: dict[str, Callable[[int], int]] = {
    "reactgraph transcript": run_ours,
    "reactgraph transcript, tiktoken counts": lambda turns: run_ours(turns, usage=False),
    "LangGraph prebuilt agent": run_prebuilt,
    "classic AgentExecutor": run_classic,
}


def per_turn(run: Callable[[int], int], turns: int) -> float:
    """Seconds per model call of one whole run."""
    started = time.perf_counter()
    calls = run(turns)
    return (time.perf_counter() - started) / calls


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
    result = {key: statistics.median(values) for key, values in samples.items()}
    print("| contender | 40 turns (ms/turn) | 200 turns (ms/turn) |")
    print("| --- | --- | --- |")
    for name in CONTENDERS:
        print(f"| {name} | {result[name, 40] * 1000:.2f} | {result[name, 200] * 1000:.2f} |")
    print()
    for n in (40, 200):
        ours = result["reactgraph transcript", n]
        print(
            f"- {n} turns: reactgraph / prebuilt = "
            f"{ours / result['LangGraph prebuilt agent', n]:.2f}x (goal <= 0.7x), "
            f"reactgraph / classic = {ours / result['classic AgentExecutor', n]:.2f}x"
        )
    print()


@tool
def page(text: str) -> str:
    """Returns a 2,000-character page."""
    return (f"page {text}: " + "lorem ipsum dolor sit amet " * 80)[:2000]


SUMMARY = (
    "## Goal\nSummarise every page.\n## Facts found\n"
    + "\n".join(f"- page {i}: lorem ipsum (page[{i}])" for i in range(12))
    + "\n## Decisions made\nNone\n## Dead ends and errors\nNone\n## Next step\nRead on."
)
COMPACTION_WINDOW = 16_000


def long_run(variant: str, turns: int) -> dict[str, Any]:
    """A scripted run of ``turns`` turns over 2,000-character pages; returns the final state."""
    replies = []
    for i in range(turns):
        if variant == "notes" and i % 8 == 0:
            notes = "\n".join(f"- [x] page {j}: fact {j} (source: page[{j}])" for j in range(i))
            replies.append(f"Thought: record progress.\nAction: update_notes[{notes[:3900]}]")
        else:
            replies.append(f"Thought: read the next page.\nAction: page[{i}]")
    model = ScriptedChatModel(replies=[*replies, "Final Answer: done"])
    extra: dict[str, Any] = {}
    if variant == "compaction":
        extra = {
            "context_window": COMPACTION_WINDOW,
            "summarizer": ScriptedChatModel(replies=[SUMMARY] * turns),
        }
    graph = build_graph(
        variant, model=model, tools=[page], max_turns=turns, max_observation_chars=2000, **extra
    )
    return graph.invoke({"question": "Summarise every page."})


def prompt_tokens(out: dict[str, Any]) -> list[int]:
    return [turn["prompt_tokens"] for turn in out["turns"]]


def print_prompt_table(runs: dict[str, list[int]], marks: list[int]) -> None:
    print("| variant | " + " | ".join(f"call {m}" for m in marks) + " | largest |")
    print("| --- |" + " --- |" * (len(marks) + 1))
    for variant, prompts in runs.items():
        cells = " | ".join(str(prompts[m - 1]) for m in marks)
        print(f"| {variant} | {cells} | {max(prompts)} |")


def bench_prompt_tokens(repeats: int) -> None:
    print("## Prompt tokens per call, 40-turn scripted run, 2,000-character observations\n")
    runs = {v: prompt_tokens(long_run(v, 40)) for v in ("transcript", "notes")}
    print_prompt_table(runs, [1, 8, 9, 10, 20, 30, 40])
    transcript, notes = runs["transcript"], runs["notes"]
    print(
        f"\n- notes largest / transcript largest = {max(notes) / max(transcript):.2f} "
        "(goal <= 0.25)"
    )
    print(
        f"- notes after turn 8: {min(notes[8:])}..{max(notes[8:])} tokens (flat: bounded by "
        "the prompt, the notes limit and 8 turns)\n"
    )


def bench_compaction(repeats: int) -> None:
    import tiktoken

    from reactgraph.nodes import compaction

    print("## Compaction: the token check, and prompt tokens on a 60-turn run\n")
    timings: list[float] = []
    real = compaction.compact_history

    @functools.wraps(real)  # keeps the signature, so LangGraph still passes `config`
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = real(*args, **kwargs)
        timings.append(time.perf_counter() - started)
        return result

    encoding = tiktoken.get_encoding("cl100k_base")
    samples: dict[int, list[float]] = {5: [], 60: []}
    naive: dict[int, list[float]] = {5: [], 60: []}
    compaction.compact_history = timed
    try:
        for _ in range(repeats):
            timings.clear()
            model = ScriptedChatModel(
                replies=[f"Thought: next.\nAction: page[{i}]" for i in range(60)] + ["done"]
            )
            graph = build_graph(
                "compaction", model=model, tools=[page], max_turns=60, context_window=10_000_000
            )
            graph.invoke({"question": "Summarise every page."})
            for call in (5, 60):
                samples[call].append(timings[call - 1])
                text = "\n".join(str(m.content) for m in model.calls[call - 1]["messages"])
                started = time.perf_counter()
                encoding.encode(text, disallowed_special=())
                naive[call].append(time.perf_counter() - started)
    finally:
        compaction.compact_history = real
    check = {call: statistics.median(values) * 1e3 for call, values in samples.items()}
    recount = {call: statistics.median(values) * 1e3 for call, values in naive.items()}
    print("| check before call | cached check (ms) | re-counting the whole prompt (ms) |")
    print("| --- | --- | --- |")
    for call in (5, 60):
        print(f"| {call} | {check[call]:.3f} | {recount[call]:.3f} |")
    print(
        f"\n- turn 60 / turn 5: cached {check[60] / check[5]:.2f}x (goal <= 2x), "
        f"re-counting {recount[60] / recount[5]:.2f}x\n"
    )

    outs = {v: long_run(v, 60) for v in ("transcript", "notes", "compaction")}
    runs = {v: prompt_tokens(out) for v, out in outs.items()}
    print(
        f"Same 60-turn script; compaction with a {COMPACTION_WINDOW:,}-token window "
        f"(threshold {int(COMPACTION_WINDOW * 0.75):,}):\n"
    )
    print_prompt_table(runs, [1, 10, 20, 30, 40, 50, 60])
    records = outs["compaction"]["compactions"]
    under = all(tokens < COMPACTION_WINDOW * 0.75 for tokens in runs["compaction"])
    print(
        f"\n- compactions after turns {[r['turn'] for r in records]}, tokens "
        f"{[(r['tokens_before'], r['tokens_after']) for r in records]}"
    )
    print(f"- every compaction prompt under the threshold: {'yes' if under else 'NO'}\n")


LATENCY_S, BATCH_TURNS, BATCH_RUNS = 0.2, 5, 100


def batch_reply(messages: list[BaseMessage]) -> str:
    """Each conversation takes ``BATCH_TURNS - 1`` calculator actions, then answers."""
    done = sum(str(m.content).startswith("Observation:") for m in messages)
    if done >= BATCH_TURNS - 1:
        return "Thought: I now have enough information.\nFinal Answer: done"
    return f"Thought: step {done}.\nAction: calculator[{done}+1]"


async def time_batches(graph: Any, repeats: int) -> tuple[float, float]:
    """Median wall time of one run alone and of ``BATCH_RUNS`` runs at once (one event loop:
    an HTTP client's connection pool belongs to its loop)."""
    from reactgraph.batch import run_many

    async def batch(count: int) -> float:
        started = time.perf_counter()
        async for result in run_many(graph, [f"q{i}" for i in range(count)], concurrency=count):
            assert result["status"] == "answered", result
        return time.perf_counter() - started

    await batch(2)  # warm imports and clients
    singles = [await batch(1) for _ in range(3)]
    many = [await batch(BATCH_RUNS) for _ in range(max(1, repeats // 2))]
    return statistics.median(singles), statistics.median(many)


def bench_concurrency(repeats: int) -> None:
    import asyncio
    import subprocess
    import sys
    from pathlib import Path

    from reactgraph.models import chat_model
    from reactgraph.tools import calculator

    floor = BATCH_TURNS * LATENCY_S  # one run's model latency: its critical path
    rows = {}
    scripted = ScriptedChatModel(
        replies=[batch_reply] * 10_000, latency_s=LATENCY_S, report_usage=True
    )
    graph = build_graph("transcript", model=scripted, tools=[calculator])
    cpu = time.process_time()
    rows["graph alone (scripted async model)"] = asyncio.run(time_batches(graph, repeats))
    graph_cpu = time.process_time() - cpu
    # The server runs in its own process, as a real one would: it does not share our GIL.
    server = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("serve.py")),
            str(LATENCY_S),
            str(BATCH_TURNS),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stdout.readline().strip()
        http = build_graph(
            "transcript", model=chat_model("gpt-4o-mini", base_url=url), tools=[calculator]
        )
        cpu = time.process_time()
        rows["over HTTP (ChatOpenAI, local server)"] = asyncio.run(time_batches(http, repeats))
        http_cpu = time.process_time() - cpu
    finally:
        server.terminate()
        server.wait(10)
    turns = (2 + 3 + BATCH_RUNS * max(1, repeats // 2)) * BATCH_TURNS
    print(
        f"## Many runs at once: {BATCH_RUNS} concurrent runs of {BATCH_TURNS} turns, "
        f"{LATENCY_S * 1000:.0f} ms per model call, ainvoke\n"
    )
    print("| model | one run (s) | 100 at once (s) | batch / one | overhead of the batch |")
    print("| --- | --- | --- | --- | --- |")
    for name, (single, wall) in rows.items():
        print(
            f"| {name} | {single:.3f} | {wall:.3f} | {wall / single:.2f}x | "
            f"{wall - floor:.3f} s = {(wall - floor) / wall:.1%} of wall |"
        )
    print("\n- goals: batch within 1.5x of one run; overhead under 2% of wall")
    print(
        f"- CPU per turn in this process: graph alone {graph_cpu / turns * 1000:.2f} ms, "
        f"over HTTP {http_cpu / turns * 1000:.2f} ms\n"
    )


def turn_times(updates: Any, is_turn_end: Callable[[dict[str, Any]], bool]) -> list[float]:
    """Seconds each turn took, from a ``stream_mode="updates"`` iterator."""
    times, last = [], time.perf_counter()
    for update in updates:
        if is_turn_end(update):
            now = time.perf_counter()
            times.append(now - last)
            last = now
    return times


def growth_ours(folder: str, turns: int) -> list[float]:
    from reactgraph.persistence import open_db

    replies = [f"Thought: step {i}.\nAction: echo[{i}]" for i in range(turns)]
    model = ScriptedChatModel(replies=[*replies, "Final Answer: done"], report_usage=True)
    with open_db(f"{folder}/ours.sqlite") as (saver, _):
        graph = build_graph(
            "notes",
            model=model,
            tools=[echo],
            checkpointer=saver,
            max_turns=turns + 1,
            notes_dir=f"{folder}/notes",
        )
        updates = graph.stream(
            {"question": QUESTION}, {"configurable": {"thread_id": "g"}}, stream_mode="updates"
        )
        return turn_times(updates, lambda u: "run_tool" in u)


def growth_prebuilt(folder: str, turns: int) -> list[float]:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent
    saver = SqliteSaver(sqlite3.connect(f"{folder}/prebuilt.sqlite", check_same_thread=False))
    agent = create_react_agent(ToolCallingScript(turns=turns), [echo], checkpointer=saver)
    updates = agent.stream(
        {"messages": [("user", QUESTION)]},
        {"configurable": {"thread_id": "g"}, "recursion_limit": 4 * turns},
        stream_mode="updates",
    )
    return turn_times(updates, lambda u: "tools" in u)


def bench_growth(repeats: int) -> None:
    import tempfile

    print("## Growth with a checkpointer (SQLite file, sync durability for reactgraph)\n")
    print(
        "Milliseconds per turn around turn 20 (turns 16-25) and turn 200 (196-205) of one "
        "210-turn run, instant model and tool; medians.\n"
    )
    print("| contender | at turn 20 | at turn 200 | 200 / 20 | mean over 40 | mean over 200 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, run in (("reactgraph notes", growth_ours), ("LangGraph prebuilt", growth_prebuilt)):
        with tempfile.TemporaryDirectory() as folder:
            times = run(folder, 210)
        early = statistics.median(times[15:25]) * 1000
        late = statistics.median(times[195:205]) * 1000
        mean40 = statistics.mean(times[:40]) * 1000
        mean200 = statistics.mean(times[:200]) * 1000
        print(
            f"| {name} | {early:.2f} | {late:.2f} | {late / early:.2f}x | {mean40:.2f} | "
            f"{mean200:.2f} |"
        )
    print("\n- goal: reactgraph notes at turn 200 within 1.5x of turn 20\n")


SECTIONS = {
    "overhead": bench_overhead,
    "prompt-tokens": bench_prompt_tokens,
    "compaction": bench_compaction,
    "concurrency": bench_concurrency,
    "growth": bench_growth,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"any of: {', '.join(SECTIONS)} (default all)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    for section in args.sections or SECTIONS:
        SECTIONS[section](args.repeats)


if __name__ == "__main__":
    main()
