"""Many runs on every core: worker processes, each with its own event loop and its own graph.

One event loop on one core is the ceiling of ``run_many``: the model client's CPU per request
(the OpenAI SDK's request building, the connection pool) adds up over hundreds of runs. Here
``workers`` processes each build the graph once (``build`` must be picklable: a module-level
function, or a ``functools.partial`` of one) and run up to ``concurrency`` questions at a time.
The parent hands out questions as workers ask for them and yields each result as it comes, so
one reader (the caller) sees every result exactly once. A worker that dies loses only the
questions it was running; each is reported with an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import queue
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from reactgraph.batch import BatchResult, result_of, run_one

# The graph builder: returns a graph, or an async context manager that yields one (to open an
# async checkpointer in the worker, say).
Build = Callable[[], Any]
_POLL_S = 0.2


@dataclass(frozen=True)
class Job:
    """One question to run, with the thread it runs on."""

    index: int
    question: str
    thread_id: str


def default_workers(questions: int) -> int:
    """The number of cores, capped by the number of questions."""
    return max(1, min(os.cpu_count() or 1, questions))


@contextlib.asynccontextmanager
async def _opened(build: Build) -> AsyncIterator[Any]:
    made = build()
    if hasattr(made, "__aenter__"):
        async with made as graph:
            yield graph
    else:
        yield made


async def _serve(build: Build, jobs: Any, results: Any, concurrency: int) -> None:
    """A worker's loop: take jobs until the sentinel, run up to ``concurrency`` at once."""
    async with _opened(build) as graph:
        slots = asyncio.Semaphore(concurrency)
        running: set[asyncio.Task[None]] = set()

        async def one(job: Job) -> None:
            try:
                results.put(("done", await run_one(graph, job.index, job.question, job.thread_id)))
            finally:
                slots.release()

        while True:
            await slots.acquire()
            job = await asyncio.to_thread(jobs.get)
            if job is None:
                break
            results.put(("start", job.index))
            task = asyncio.create_task(one(job))
            running.add(task)
            task.add_done_callback(running.discard)
        if running:
            await asyncio.gather(*running)


def _worker(build: Build, jobs: Any, results: Any, concurrency: int) -> None:
    with contextlib.suppress(KeyboardInterrupt):  # the parent reports the interruption
        asyncio.run(_serve(build, jobs, results, concurrency))


def run_parallel(
    build: Build,
    questions: Sequence[str],
    *,
    thread_ids: Sequence[str],
    workers: int | None = None,
    concurrency: int = 8,
) -> Iterator[BatchResult]:
    """Run ``questions[i]`` on thread ``thread_ids[i]`` in ``workers`` processes (default: the
    cores, capped by the questions), ``concurrency`` at a time in each; yield results as runs
    end. Ctrl-C stops every worker; what was yielded before is kept."""
    if len(thread_ids) != len(questions):
        raise ValueError("thread_ids must give one thread per question")
    if workers is None:
        workers = default_workers(len(questions))
    for name, value in (("workers", workers), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    if not questions:
        return
    context = multiprocessing.get_context("spawn")  # never fork a process holding threads
    jobs, results = context.Queue(), context.Queue()
    for index, (question, thread) in enumerate(zip(questions, thread_ids, strict=True)):
        jobs.put(Job(index, question, thread))
    processes = [
        context.Process(target=_worker, args=(build, jobs, results, concurrency), daemon=True)
        for _ in range(min(workers, len(questions)))
    ]
    for process in processes:
        jobs.put(None)
        process.start()
    try:
        yield from _collect(processes, results, questions, thread_ids)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(5)


def _collect(
    processes: list[Any], results: Any, questions: Sequence[str], thread_ids: Sequence[str]
) -> Iterator[BatchResult]:
    pending, started = set(range(len(questions))), set()
    while pending:
        try:
            kind, item = results.get(timeout=_POLL_S)
        except queue.Empty:
            if any(p.is_alive() for p in processes):
                continue
            # Every worker is gone: what they held is lost, and no one will run the rest.
            for index in sorted(pending):
                error = RuntimeError(
                    "the worker process running it died"
                    if index in started
                    else "no worker was left to run it"
                )
                yield result_of(index, questions[index], thread_ids[index], None, 0.0, error)
            return
        if kind == "start":
            started.add(item)
        else:
            pending.discard(item["index"])
            yield item
