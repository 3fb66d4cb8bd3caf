"""Many runs on every core: worker processes, each with its own event loop and its own graph.

One event loop on one core is the ceiling of ``run_many`` (the model client's CPU per request
adds up). Here ``workers`` processes each open a runner once (``open_runner``: picklable) and run
up to ``concurrency`` jobs at a time. The parent takes each job from its source (a list, or a
stream never all in memory) only when a worker has a slot free, and yields each result once. A
worker that dies loses only the jobs it held (each a result with an error); one that outlives
its parent ends. With one worker, everything runs in this process.

Workers are forked from multiprocessing's fork server, never from this process (which may hold
threads): the server is started once per process with the modules every worker imports already
imported (``PRELOADED``: the OpenAI client and langchain-openai are most of a worker's start), so
a worker starts in milliseconds rather than re-importing them, and a second batch in the same
process pays nothing for its start. A worker is given this process's environment as it is when
the worker starts (the server's own is that of its start). Where there is no fork server
(Windows), workers are spawned.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import multiprocessing
import os
import pickle
import queue
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from multiprocessing import connection
from typing import Any, cast

from reactgraph.app import interrupts, leftovers
from reactgraph.tools.loopthread import LoopThread

_POLL_S, _START_WAIT_S = 0.2, 30  # the second a bound against a start that hangs, not a timing
# Imported once by the fork server, before it forks any worker: what a worker needs for any
# batch (the CLI's recipes, ``run_processes``) and the model client most graphs build.
PRELOADED = (
    "__main__",
    "reactgraph.app.pool",
    "reactgraph.batch",
    "reactgraph.app.recipe",
    "langchain_openai",
)


@dataclass(frozen=True)
class Job:
    """One question to run, with the thread it runs on and what identifies it to the caller."""

    index: int
    question: str
    thread_id: str
    extra: Any = None
    name: str | None = None
    """How a warning logged during its run names it (``question ID``), if it has a name."""


Runner = Callable[[Job], Awaitable[dict[str, Any]]]
# Returns an async context manager yielding a Runner: built once per worker, closed at its end.
OpenRunner = Callable[[], contextlib.AbstractAsyncContextManager[Runner]]


def default_workers(jobs: int) -> int:
    """The number of cores, capped by the number of jobs."""
    return max(1, min(os.cpu_count() or 1, jobs))


def failed(job: Job, error: str) -> dict[str, Any]:
    """The result of a job that did not run to its end."""
    return {"index": job.index, "thread_id": job.thread_id, "error": error, "status": None}


async def _serve(open_runner: OpenRunner, take: Callable[[], Any], give: Any, slots: int) -> None:
    """Take jobs until there are none, run up to ``slots`` at once, give back each result."""
    async with open_runner() as run:
        free = asyncio.Semaphore(slots)
        running: set[asyncio.Task[None]] = set()

        async def one(job: Job) -> None:
            try:
                result = await run(job)
            except Exception as error:  # a runner's own fault must not stop the others
                result = failed(job, f"{type(error).__name__}: {error}")
            finally:
                free.release()
            give(("done", result))

        while True:
            await free.acquire()
            job = await take()
            if job is None:
                break
            task = asyncio.create_task(one(job))
            running.add(task)
            task.add_done_callback(running.discard)
        if running:
            await asyncio.gather(*running)


def _worker(
    open_runner: OpenRunner, jobs: Any, results: Any, slots: int, environ: dict[str, str]
) -> None:
    """A worker process: asks for each job on a pipe of its own, sends back each result on
    another (a shared queue's lock, taken by a worker killed mid-write, would hang the rest).
    ``environ``: its parent's environment when it was started."""

    async def take() -> Any:
        results.send(("want", None))
        return await asyncio.to_thread(jobs.recv)

    # SIGINT blocked from the start (``unreached``, and here again for a fork server started
    # elsewhere): it ends with its parent (a stop, a kill).
    interrupts.hold()
    if os.environ != environ:  # a fork server's own is as it was when it started
        os.environ.clear()
        os.environ.update(environ)
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_end_with, args=(parent.sentinel,), daemon=True).start()
    from reactgraph.app import telemetry

    telemetry.start()  # the command's export (--otel, OTEL_EXPORTER_OTLP_ENDPOINT), if any
    try:
        with contextlib.suppress(EOFError, BrokenPipeError, ConnectionResetError):
            try:
                asyncio.run(_serve(open_runner, take, results.send, slots))
            except Exception as error:  # its runner could not open (a database fault): the
                results.send(("error", _sendable(error)))  # parent's to say
    finally:
        telemetry.stop()


def _sendable(error: Exception) -> Exception:
    """``error`` as it can cross a pipe: itself when it pickles (``DatabaseError``), else a
    RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


def _end_with(sentinel: int) -> None:
    connection.wait([sentinel])  # readable once the parent is gone (multiprocessing's own)
    os._exit(1)


def check_counts(**counts: int) -> None:
    """ValueError unless each count (``workers``, ``concurrency``) is a whole number >= 1."""
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")


def job_count(jobs: Iterable[Job], total: int | None) -> int | None:
    """How many ``jobs`` there are: a collection's length, else ``total`` (None: unknown)."""
    return len(jobs) if isinstance(jobs, Sized) else total


def peeked(jobs: Iterable[Job]) -> Iterator[Job] | None:
    """``jobs`` as one iterator, its first job read already: None when there is none, so an
    empty source starts no worker."""
    source = iter(jobs)
    first = next(source, None)
    return None if first is None else itertools.chain([first], source)


def shares(workers: int, concurrency: int, total: int | None) -> tuple[int, int]:
    """The workers to start (no more than the ``total`` jobs, when their number is known) and
    the runs each holds at once: ``concurrency`` shared among them, rounded up."""
    if total is not None:
        workers = min(workers, max(1, total))
    return workers, max(1, -(-concurrency // workers))


def run_parallel(
    open_runner: OpenRunner,
    jobs: Iterable[Job],
    *,
    workers: int | None = None,
    concurrency: int = 8,
    total: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Run ``jobs`` in ``workers`` processes (default: the cores, capped by ``total``), with
    ``concurrency`` runs in flight in all; yield each result as its run ends. At most
    ``concurrency`` jobs are taken and not yet yielded. Ctrl-C stops every worker."""
    total = job_count(jobs, total)
    if workers is None:
        workers = default_workers(total) if total is not None else os.cpu_count() or 1
    check_counts(workers=workers, concurrency=concurrency)
    source = peeked(jobs)
    if source is None:
        return
    workers, slots = shares(workers, concurrency, total)
    if workers == 1:
        yield from _in_process(open_runner, source, slots)
        return
    context = _context()
    channels: dict[Any, _Channel] = {}
    started: list[Any] = []
    starting = threading.Lock()  # held while a worker starts, which a stop must end too

    def stop_all() -> None:
        """On Ctrl-C (this process is about to end): end the workers, a starting one too."""
        starting.acquire(timeout=_START_WAIT_S)  # never given back: no worker starts after
        _terminate(started)

    with interrupts.on_stop(stop_all):
        try:
            for _ in range(workers):
                jobs_in, jobs_out = context.Pipe(duplex=False)
                results_in, results_out = context.Pipe(duplex=False)
                process = context.Process(
                    target=_worker,
                    args=(open_runner, jobs_in, results_out, slots, dict(os.environ)),
                    daemon=True,
                )
                with starting, interrupts.unreached():  # a terminal's Ctrl-C is for the parent
                    process.start()
                    started.append(process)
                # The worker's ends, closed here: its exit (or death) reads as the pipe's end.
                jobs_in.close()
                results_out.close()
                channels[results_in] = _Channel(process, jobs_out)
            yield from _collect(channels, source)
        finally:
            _terminate(started)


def _context() -> Any:
    """The fork server's context (its preloads set while it has not started), else spawn's:
    never a fork of this process, which may hold threads."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOADED))  # read only when the server starts
    return context


def _terminate(processes: list[Any]) -> None:
    """Stop the workers still running (what they started first), and reap them."""
    for process in [p for p in processes if p.is_alive()]:
        leftovers.terminate_below(process.pid)
        process.terminate()
    for process in processes:
        process.join(5)


@dataclass
class _Channel:
    """A worker process, the pipe its jobs go down, and the jobs it holds (by index)."""

    process: Any
    jobs: Any
    held: dict[int, Job] = field(default_factory=dict)


def _in_process(open_runner: OpenRunner, jobs: Iterator[Job], slots: int) -> Iterator[dict]:
    """One worker: an event loop on a thread of this process, results handed over as they
    come. A job is taken (on the loop's thread) only when one of the ``slots`` is free and
    the caller has read the results of those before it, so a slow reader holds back the
    source rather than piling up results. Leaving early (Ctrl-C, or the caller stops reading)
    cancels the runs in flight."""
    results: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    unread = asyncio.Semaphore(slots)  # jobs taken whose results the caller has not read

    async def take() -> Job | None:
        await unread.acquire()
        return next(jobs, None)

    def ended(serving: concurrent.futures.Future[None]) -> None:
        error = None if serving.cancelled() else serving.exception()
        results.put(("end", None) if error is None else ("error", error))  # the reader raises it

    loop = LoopThread("reactgraph-runs")
    loop.submit(_serve(open_runner, take, results.put, slots)).add_done_callback(ended)
    try:
        while True:
            kind, item = results.get()
            if kind == "done":
                yield item
                loop.call_soon(unread.release)  # the next job may be taken
            elif kind == "error":
                raise item
            elif kind == "end":
                return
    finally:
        # The runs still in flight are cancelled; the loop's own clean-up (the model client's
        # pool closed by its async generator) runs after, never cancelled.
        loop.stop(30)


def _collect(channels: dict[Any, _Channel], jobs: Iterator[Job]) -> Iterator[dict]:
    """Hand out jobs as workers ask (a slot of theirs free), yield results as they come, until
    every worker is gone: one that ends (or is killed) closes its pipe; the jobs it held fail."""
    while channels:
        for reader in connection.wait(list(channels), timeout=_POLL_S):
            channel = channels[reader]
            try:
                kind, item = cast(Any, reader).recv()  # a worker's pipe end
            except (EOFError, OSError):
                interrupts.park_if_stopping()  # Ctrl-C ended it: not a failure of its runs
                del channels[reader]
                for index in sorted(channel.held):
                    why = "the worker process running it died"
                    yield failed(channel.held[index], f"WorkerDied: {why}")
                continue
            if kind == "error":
                raise item  # a worker could not start (its database): as in one process
            if kind == "want":
                job = next(jobs, None)
                with contextlib.suppress(OSError):  # it died since it asked: its EOF follows
                    channel.jobs.send(job)
                if job is not None:
                    channel.held[job.index] = job
            else:
                channel.held.pop(item["index"], None)
                yield item
    # Every worker is gone: no one will run what is left.
    for job in jobs:
        yield failed(job, "WorkerDied: no worker left")
