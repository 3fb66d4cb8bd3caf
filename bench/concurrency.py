"""Many runs at once over HTTP: 100 runs of 5 turns, 200 ms per model call, the real
``ChatOpenAI`` against the local OpenAI-compatible server (its own process), side by side with
the prebuilt agent on the same client and server."""

from __future__ import annotations

import asyncio
import functools
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from common import local_server, prebuilt_agent, table, verdict

from reactgraph import build_graph
from reactgraph.batch import run_many, run_processes
from reactgraph.models import chat_model
from reactgraph.tools import calculator

LATENCY_S, TURNS, RUNS, WORKERS = 0.2, 5, 100, 2
MODEL = "gpt-4o-mini"


def http_graph(url: str, transport: str) -> Any:
    """reactgraph's transcript variant on ``ChatOpenAI`` (module level: workers rebuild it)."""
    model = chat_model(MODEL, base_url=url, transport=transport)  # type: ignore[arg-type]
    return build_graph("transcript", model=model, tools=[calculator])


def ours(url: str, transport: str) -> Callable[[int], Awaitable[None]]:
    graph = http_graph(url, transport)

    async def batch(count: int) -> None:
        questions = [f"q{i}" for i in range(count)]
        async for result in run_many(graph, questions, concurrency=count):
            assert result["status"] == "answered", result

    return batch


def prebuilt(url: str, transport: str) -> Callable[[int], Awaitable[None]]:
    model = chat_model(MODEL, base_url=url, transport=transport)  # type: ignore[arg-type]
    agent = prebuilt_agent(model, [calculator])

    async def batch(count: int) -> None:
        outs = await asyncio.gather(
            *(agent.ainvoke({"messages": [("user", f"q{i}")]}) for i in range(count))
        )
        assert all(out["messages"][-1].content == "done" for out in outs)

    return batch


def timed(make: Callable[[], Callable[[int], Awaitable[None]]], repeats: int) -> tuple:
    """Median wall of one run alone and of ``RUNS`` at once, in one event loop (a client's
    connection pool belongs to its loop), and this process's CPU per turn."""

    async def measure() -> tuple[float, float, float]:
        batch = make()

        async def wall(count: int) -> float:
            started = time.perf_counter()
            await batch(count)
            return time.perf_counter() - started

        await wall(2)  # warm imports and the connection pool
        singles = [await wall(1) for _ in range(3)]
        cpu = time.process_time()
        many = [await wall(RUNS) for _ in range(repeats)]
        cpu_per_turn = (time.process_time() - cpu) / (repeats * RUNS * TURNS)
        return statistics.median(singles), statistics.median(many), cpu_per_turn

    return asyncio.run(measure())


def in_workers(url: str, transport: str, repeats: int) -> tuple[float, float, float]:
    """``run_processes`` with ``WORKERS`` processes: the wall of the first batch in a process
    (its fork server starts then, importing what the workers need), the median wall of later
    batches (workers forked from the running server), both with the workers' start-up, and the
    median from the first run's start to the last run's end."""
    from reactgraph.app import leftovers

    leftovers.helpers()  # no fork server left from an earlier section: the first batch is cold
    build = functools.partial(http_graph, url, transport)
    totals, steady = [], []
    for _ in range(repeats + 1):
        started, spans = time.perf_counter(), []
        questions = [f"q{i}" for i in range(RUNS)]
        for result in run_processes(build, questions, workers=WORKERS, concurrency=RUNS):
            assert result["status"] == "answered", result
            now = time.perf_counter()
            spans.append((now - result["seconds"], now))
        totals.append(time.perf_counter() - started)
        steady.append(max(end for _, end in spans) - min(start for start, _ in spans))
    return totals[0], statistics.median(totals[1:]), statistics.median(steady)


def bench_concurrency(repeats: int) -> None:
    repeats = max(1, repeats // 2)
    rows, singles, walls = [], {}, {}
    with local_server(LATENCY_S, TURNS) as url:
        for name, make in (("reactgraph", ours), ("LangGraph prebuilt agent", prebuilt)):
            for transport in ("httpx", "aiohttp"):
                single, many, cpu = timed(functools.partial(make, url, transport), repeats)
                singles[name, transport], walls[name, transport] = single, many
                rows.append(
                    (
                        f"{name}, {transport}, 1 process",
                        f"{single:.2f}",
                        f"{many:.2f}",
                        f"{many / single:.2f}x",
                        f"{cpu * 1000:.1f}",
                    )
                )
        cold, warm, steady = in_workers(url, "aiohttp", repeats)
    single = singles["reactgraph", "aiohttp"]
    rows.append(
        (
            f"reactgraph, aiohttp, {WORKERS} worker processes",
            f"{single:.2f}",
            f"{steady:.2f} ({cold:.2f} with start-up in a first batch, {warm:.2f} in a later one)",
            f"{steady / single:.2f}x",
            "-",
        )
    )
    print(
        f"## Many runs at once: {RUNS} runs of {TURNS} turns, {LATENCY_S * 1000:.0f} ms per "
        "model call, ChatOpenAI over HTTP to the local server\n"
    )
    table(
        (
            "contender",
            "one run (s)",
            f"{RUNS} at once (s)",
            "at once / one",
            "client CPU per turn (ms)",
        ),
        rows,
    )
    anchor = min(walls["LangGraph prebuilt agent", t] for t in ("httpx", "aiohttp"))
    for label, wall in (
        ("1 process", walls["reactgraph", "aiohttp"]),
        (f"{WORKERS} workers, start-up included, first batch", cold),
        (f"{WORKERS} workers, start-up included, later batch", warm),
    ):
        print(
            f"- reactgraph, aiohttp, {label}: {wall / single:.2f}x one run (goal <= 2.5x: "
            f"{verdict(wall <= 2.5 * single)}); {wall / anchor:.2f}x the prebuilt agent's best "
            f"wall (goal <= 0.5x: {verdict(wall <= 0.5 * anchor)})"
        )
    print()
