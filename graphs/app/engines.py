"""Which engine runs a batch's jobs: the worker processes of this machine (the default), or a
Ray cluster. Both take the same ``open_runner`` and ``Job``s and give back the same results, so
what calls them (``batch``, ``eval``, ``run_processes``) never learns which one ran."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the pool is loaded when it runs: the command line's parser needs only ENGINES
    from reactgraph.app.pool import Job, OpenRunner

Engine = Literal["local", "ray"]
ENGINES: tuple[Engine, ...] = ("local", "ray")


class EngineError(RuntimeError):
    """The engine cannot run these jobs (no Ray cluster at the address, a SQLite file on a
    cluster of several nodes); the message says why and what to do."""


@dataclass
class Flight:
    """How many jobs are in flight now, kept by the engine (for a progress bar)."""

    running: int = 0


def check_engine(engine: Any, address: Any = None) -> None:
    """ValueError for an unknown engine, or an address without Ray; ImportError without Ray."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if address is not None and engine != "ray":
        raise ValueError("address is the Ray cluster's: it needs engine='ray'")
    if address is not None and not isinstance(address, str):
        raise TypeError("address must be a str, like 'ray://head:10001' or 'auto'")
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        raise ImportError("engine='ray' needs Ray: pip install 'reactgraph[ray]'")


def run_jobs(
    open_runner: OpenRunner,
    jobs: Iterable[Job],
    *,
    workers: int | None = None,
    concurrency: int = 8,
    engine: Engine = "local",
    address: str | None = None,
    db: str | None = None,
    flight: Flight | None = None,
    total: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Each job's result as its run ends, from ``engine``: "local" (``reactgraph.app.pool``) or
    "ray" (``reactgraph.app.rayengine``, on the cluster at ``address``). ``jobs`` may be a
    stream, with ``total`` its length when known: either engine takes a job only when it has a
    slot for it. ``db`` is the database the runner keeps its runs in (a Ray cluster of several
    nodes refuses a SQLite file)."""
    check_engine(engine, address)
    if engine == "ray":
        from reactgraph.app.rayengine import run_ray

        return run_ray(
            open_runner,
            jobs,
            workers=workers,
            concurrency=concurrency,
            address=address,
            db=db,
            flight=flight,
            total=total,
        )
    from reactgraph.app.pool import job_count, run_parallel

    total = job_count(jobs, total)
    results = run_parallel(open_runner, jobs, workers=workers, concurrency=concurrency, total=total)
    if flight is None or total is None:
        return results
    return _counted(results, total, workers, concurrency, flight)


def _counted(
    results: Iterator[dict[str, Any]],
    total: int,
    workers: int | None,
    concurrency: int,
    flight: Flight,
) -> Iterator[dict[str, Any]]:
    """The pool's results, with its jobs in flight: each worker asks for a job whenever a slot
    of its own is free, so every slot holds one while any of the ``total`` jobs waits."""
    from reactgraph.app.pool import default_workers

    count = max(1, min(workers or default_workers(total), total))
    slots = count * math.ceil(concurrency / count)
    left = total
    flight.running = min(slots, left)
    for result in results:
        left -= 1
        flight.running = min(slots, left)
        yield result
