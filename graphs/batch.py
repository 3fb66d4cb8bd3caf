"""Many questions at once: bounded concurrency over ``ainvoke``, results as each run ends."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from reactgraph.nodes.vocabulary.standing import AWAITING, status_of

if TYPE_CHECKING:
    from reactgraph.app.engines import Engine
    from reactgraph.app.pool import Job


class BatchResult(TypedDict):
    """One question's outcome; ``error`` is set (and ``status`` None) when the run raised."""

    index: int
    question: str
    thread_id: str
    answer: str | None
    structured_answer: Any
    """The answer as the JSON value that matched the run's answer schema; None without one."""
    status: str | None
    turns: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    error: str | None
    total_tokens: int
    """Prompt plus completion tokens of every model call (summaries and forced answer too)."""
    cost: float | None
    """Their cost at the run's ``token_prices``; None without prices."""
    cache_read_tokens: int
    """Of the prompt tokens, those the provider read from its prefix cache."""
    tool_calls: dict[str, int]
    """Tool name to the calls of it that ran."""
    budget: dict[str, Any] | None
    """Which run budget ended the run (``budget_exhausted``), and what was spent; else None."""
    escalations: NotRequired[list[dict[str, Any]]]
    """A run with a model ladder (``escalate_to``): where it moved up (turn, models, reason);
    absent without a ladder."""
    by_model: NotRequired[dict[str, Any]]
    """A run with a model ladder: its tokens and cost by model (``usage["by_model"]``)."""


def _status_of(state: Mapping[str, Any]) -> str | None:
    """A final state's ``status``; ``awaiting_approval`` for a run stopped at an interrupt."""
    return state.get("status") or (AWAITING if state.get("__interrupt__") else None)


def _tokens(usage: Mapping[str, Any], turns: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """A run's prompt and completion tokens: its ``usage``, else the sum over its turns."""
    prompt = usage.get("prompt_tokens", sum(t["prompt_tokens"] for t in turns))
    completion = usage.get("completion_tokens", sum(t["completion_tokens"] for t in turns))
    return prompt, completion


def result_of(
    index: int,
    question: str,
    thread_id: str,
    out: dict[str, Any] | None,
    seconds: float,
    error: BaseException | None,
) -> BatchResult:
    """A run's outcome from its final state (``out``), or from the error that stopped it; a
    run stopped for a person's approval (``__interrupt__``) is ``awaiting_approval``."""
    state = out or {}
    turns = state.get("turns") or []
    usage = state.get("usage") or {}
    prompt, completion = _tokens(usage, turns)
    result = BatchResult(
        index=index,
        question=question,
        thread_id=thread_id,
        answer=state.get("answer"),
        structured_answer=state.get("structured_answer"),
        status=_status_of(state),
        turns=len(turns),
        prompt_tokens=prompt,
        completion_tokens=completion,
        seconds=round(seconds, 3),
        error=None if error is None else f"{type(error).__name__}: {error}",
        total_tokens=prompt + completion,
        cost=usage.get("cost"),
        cache_read_tokens=int(usage.get("cache_read_tokens") or 0),
        tool_calls=dict(usage.get("tool_calls") or {}),
        budget=state.get("budget") or None,
    )
    if "by_model" in usage:  # a model ladder: where the run moved up, and each model's spend
        result["escalations"] = list(state.get("escalations") or [])
        result["by_model"] = dict(usage["by_model"])
    return result


async def run_one(
    graph: CompiledStateGraph, index: int, question: str, thread_id: str
) -> BatchResult:
    """One question on its own thread; a run that raises gives a result with ``error`` set.
    A thread a killed run of this same question left interrupted is resumed, not started again
    (with a checkpointer; ``reactgraph.nodes.vocabulary.standing`` decides)."""
    started = time.perf_counter()
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    try:
        payload: dict[str, Any] | None = {"question": question}
        if graph.checkpointer:
            state = await graph.aget_state(config)
            stopped = status_of(state) in ("interrupted", AWAITING)
            if stopped and state.values.get("question") == question:
                payload = None
        out = await graph.ainvoke(payload, config)
    except Exception as error:
        return result_of(index, question, thread_id, None, time.perf_counter() - started, error)
    return result_of(index, question, thread_id, out, time.perf_counter() - started, None)


async def run_many(
    graph: CompiledStateGraph,
    questions: Iterable[str],
    *,
    concurrency: int = 8,
    thread_prefix: str | None = None,
) -> AsyncIterator[BatchResult]:
    """Run every question with at most ``concurrency`` runs in flight; yield each result as its
    run ends. A run that raises yields a result with ``error`` set; the others go on. Each run
    gets its own thread id, ``<prefix>-<index>`` (the prefix is fresh unless given)."""
    check_concurrency(concurrency)
    prefix = thread_prefix or uuid.uuid4().hex[:12]
    slots = asyncio.Semaphore(concurrency)

    async def one(index: int, question: str) -> BatchResult:
        async with slots:
            return await run_one(graph, index, question, f"{prefix}-{index}")

    tasks = [asyncio.create_task(one(i, q)) for i, q in enumerate(questions)]
    try:
        for finished in asyncio.as_completed(tasks):
            yield await finished
    finally:
        for task in tasks:
            task.cancel()


def check_concurrency(concurrency: Any) -> None:
    """TypeError/ValueError unless ``concurrency`` is a whole number >= 1."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise TypeError("concurrency must be an int")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")


def run_processes(
    build: Callable[[], Any],
    questions: Sequence[str],
    *,
    workers: int | None = None,
    concurrency: int = 8,
    thread_prefix: str | None = None,
    engine: Engine = "local",
    address: str | None = None,
) -> Iterator[BatchResult]:
    """``run_many`` on every core: the questions shared out among ``workers`` processes (default:
    the cores, capped by the questions), ``concurrency`` runs in flight in all; each result
    yielded as its run ends, in this process. ``build`` makes each worker's graph: a picklable
    zero-argument callable (a module-level function, or a ``functools.partial`` of one)
    returning a graph, or an async context manager yielding one (to open an async
    checkpointer in the worker). A worker that dies gives its runs in flight an ``error``.
    ``engine="ray"`` runs them on a Ray cluster instead (``address``, default ``RAY_ADDRESS``,
    else a local Ray for this call), a worker being an actor there; the results are the same."""
    # The app's engines, loaded when used.
    from reactgraph.app.engines import check_engine, run_jobs
    from reactgraph.app.pool import Job

    check_concurrency(concurrency)
    check_engine(engine, address)
    prefix = thread_prefix or uuid.uuid4().hex[:12]
    jobs = [Job(i, q, f"{prefix}-{i}") for i, q in enumerate(questions)]
    runner = functools.partial(_graph_runner, build)
    results = run_jobs(
        runner, jobs, workers=workers, concurrency=concurrency, engine=engine, address=address
    )
    for result in results:
        if "question" in result:
            yield result  # type: ignore[misc]
        else:  # a job its worker never finished
            yield result_of(
                result["index"],
                questions[result["index"]],
                result["thread_id"],
                None,
                0.0,
                RuntimeError(result["error"]),
            )


@contextlib.asynccontextmanager
async def _graph_runner(build: Callable[[], Any]) -> AsyncIterator[Callable[[Job], Any]]:
    made = build()
    if hasattr(made, "__aenter__"):
        async with made as graph:
            yield functools.partial(_run_job, graph)
    else:
        yield functools.partial(_run_job, made)


async def _run_job(graph: Any, job: Job) -> BatchResult:
    return await run_one(graph, job.index, job.question, job.thread_id)


def run_batch(
    graph: CompiledStateGraph, questions: Iterable[str], *, concurrency: int = 8
) -> list[BatchResult]:
    """``run_many`` from sync code: every result, in the order of the questions."""

    async def collect() -> list[BatchResult]:
        return [result async for result in run_many(graph, questions, concurrency=concurrency)]

    return sorted(asyncio.run(collect()), key=lambda result: result["index"])
