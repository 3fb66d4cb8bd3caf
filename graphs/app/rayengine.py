"""The Ray engine: the same jobs and runner as the process pool, on a Ray cluster.

One async actor per worker slot opens the runner once (``open_runner``, as in
``reactgraph.app.pool``) and runs up to its share of ``concurrency`` jobs at a time. This process,
the driver, takes the jobs one by one from an iterable (a file of a million questions is never
all in memory, nor in Ray's object store), keeps at most ``concurrency`` in flight, and yields
each result as it comes: the caller stays the one reader, and the one writer of any results.

The actors are spread over the nodes by a placement group (``_spawn``), so a cluster of two
nodes runs on both, whatever each node has heard of the other yet.

Faults: a node that dies takes its actors with it. Ray places their bundles again on the nodes
that live and restarts them there (``max_restarts=-1``), and the driver sends each job they
held again, to an actor that answers (the same one once restarted, or another). The job's
runner resumes the thread from its last checkpoint; its thread lock keeps a job from ever
running twice at once, so a job sent again while the dead process's lock lingers waits for it.
Each job gives exactly one result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from reactgraph.app.engines import EngineError
from reactgraph.app.pool import Job, OpenRunner, failed, job_count
from reactgraph.storage.locks import is_postgres

logger = logging.getLogger(__name__)

_POLL_S = 0.5
ATTEMPTS = 5
"""How many times a job is sent to an actor that dies under it before it fails."""
LOCK_WAIT_S = 120.0
"""How long a job sent again waits for the lock its dead holder's session still has."""
_PING_AGAIN_S = 1.0
SHARE = 0.001
"""The CPU each actor reserves (a bundle of the placement group must ask for something)."""
PLACE_WAIT_S = 120.0
"""How long the actors' placement group may take to be placed."""


class Slot:
    """An actor: one worker slot. Its runner is opened on its first call (again after a
    restart, which runs ``__init__`` anew) and closed by ``close``."""

    def __init__(self, open_runner: OpenRunner) -> None:
        self._open_runner = open_runner
        self._stack: contextlib.AsyncExitStack | None = None
        self._run: Any = None
        self._opening: asyncio.Lock | None = None

    async def _runner(self) -> Any:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._run is None:
                stack = contextlib.AsyncExitStack()
                self._run = await stack.enter_async_context(self._open_runner())
                self._stack = stack
        return self._run

    async def ready(self) -> str:
        """The node this actor lives on, once its runner is open."""
        import ray

        await self._runner()
        return ray.get_runtime_context().get_node_id()

    async def run(self, job: Job, lock_wait: float) -> tuple[dict[str, Any], str]:
        """The job's result and this actor's node. With ``lock_wait``, a thread still locked
        (by a dead process whose session has not ended yet) is tried again until then."""
        import ray

        node = ray.get_runtime_context().get_node_id()
        deadline = time.monotonic() + lock_wait
        while True:
            try:
                result = await (await self._runner())(job)
            except Exception as error:  # a runner's own fault must not stop the others
                result = failed(job, f"{type(error).__name__}: {error}")
            busy = str(result.get("error") or "").startswith("ThreadBusy")
            if not busy or time.monotonic() >= deadline:
                return result, node
            await asyncio.sleep(1.0)

    async def close(self) -> None:
        if self._stack is not None:
            stack, self._stack, self._run = self._stack, None, None
            await stack.aclose()


@dataclass
class _Actor:
    """An actor, whether it answers now, and the jobs it holds."""

    handle: Any
    up: bool = True
    held: int = 0
    ping: Any = None
    ping_at: float = 0.0


@dataclass
class _Sent:
    job: Job
    actor: _Actor
    attempt: int = 0


@dataclass
class _State:
    actors: list[_Actor]
    slots: int
    sent: dict[Any, _Sent] = field(default_factory=dict)
    again: list[_Sent] = field(default_factory=list)


def cluster_workers(ray: Any) -> int:
    """The cluster's CPUs."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def check_shared(ray: Any, db: str | None) -> None:
    """``EngineError`` for a SQLite file on a cluster of more than one node."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    if db and not is_postgres(db) and len(nodes) > 1:
        raise EngineError(
            f"the runs cannot be kept in the SQLite file {db} on a Ray cluster of {len(nodes)} "
            "nodes: each node would have a file of its own; pass --db postgresql://..."
        )


@contextlib.contextmanager
def connected(address: str | None) -> Iterator[Any]:
    """Ray, connected: to ``address``, else to ``RAY_ADDRESS``, else a local Ray started now
    and stopped after (a Ray this process had already joined is left as it was)."""
    import ray

    if ray.is_initialized():
        yield ray
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    local = {} if address else {"include_dashboard": False, "_node_ip_address": "127.0.0.1"}
    try:
        # Actors' output stays in the nodes' logs: this process's stdout is the command's.
        # "local" starts a Ray of this run's own, never joining one already running here.
        ray.init(
            address=address or "local",
            log_to_driver=False,
            logging_level=logging.ERROR,
            **local,
        )
    except Exception as error:  # Ray raises plain Exceptions here (a start-up that timed out)
        where = f"reach the Ray cluster at {address}" if address else "start a local Ray"
        raise EngineError(f"cannot {where}: {error}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def run_ray(
    open_runner: OpenRunner,
    jobs: Iterable[Job],
    *,
    workers: int | None = None,
    concurrency: int = 8,
    address: str | None = None,
    db: str | None = None,
    flight: Any = None,
    total: int | None = None,
) -> Iterator[dict[str, Any]]:
    """Run ``jobs`` on ``workers`` actors (default: the cluster's CPUs; capped by the number of
    jobs when known: their length, or ``total``), ``concurrency`` in flight in all; yield each
    result as its run ends. ``db`` is where the runner keeps its runs, checked against the
    cluster; ``flight.running`` is kept at the number of jobs in flight, for a progress bar."""
    for name, value in (("workers", workers or 1), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
    source = iter(jobs)
    first = next(source, None)
    if first is None:
        return
    with connected(address) as ray:
        check_shared(ray, db)
        count = workers or cluster_workers(ray)
        total = job_count(jobs, total)
        if total is not None:
            count = min(count, max(1, total))
        slots = max(1, math.ceil(concurrency / count))
        group, actors = _spawn(ray, open_runner, count, slots)
        state = _State([_Actor(a) for a in actors], slots)
        try:
            yield from _drive(ray, state, _chain(first, source), flight)
        finally:
            _stop(ray, state.actors, group)


def _spawn(ray: Any, open_runner: OpenRunner, count: int, slots: int) -> tuple[Any, list[Any]]:
    """A placement group of ``count`` bundles spread over the nodes (Ray's SPREAD: one per node
    before any node gets a second), and an actor in each. A bundle is ``SHARE`` of a CPU: its
    runs wait on the model, and ``count`` is what matches the cores. The group is placed by
    Ray's control store, which knows every node that has joined, so the spread does not hang on
    what any one node has heard yet. A node that dies loses its bundles: Ray places them again
    on the nodes that live, and restarts their actors there."""
    from ray.util import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group = placement_group([{"CPU": SHARE}] * count, strategy="SPREAD")
    if not group.wait(PLACE_WAIT_S):
        remove_placement_group(group)
        raise EngineError(
            f"the Ray cluster found no room for {count} actors of {SHARE} CPU each in "
            f"{PLACE_WAIT_S:.0f} s; pass fewer --workers, or free some CPU"
        )
    slot = ray.remote(Slot)
    actors = [
        slot.options(
            max_restarts=-1,
            max_task_retries=0,
            max_concurrency=slots + 2,
            num_cpus=SHARE,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                group, placement_group_bundle_index=i
            ),
        ).remote(open_runner)
        for i in range(count)
    ]
    return group, actors


def _chain(first: Job, rest: Iterator[Job]) -> Iterator[Job]:
    yield first
    yield from rest


def _send(ray: Any, state: _State, sent: _Sent) -> bool:
    """Give the job to the up actor holding fewest; False when none has a free slot."""
    free = [a for a in state.actors if a.up and a.held < state.slots]
    if not free:
        return False
    sent.actor = min(free, key=lambda a: a.held)
    sent.actor.held += 1
    wait = LOCK_WAIT_S if sent.attempt else 0.0
    state.sent[sent.actor.handle.run.remote(sent.job, wait)] = sent
    return True


def _drive(ray: Any, state: _State, jobs: Iterator[Job], flight: Any) -> Iterator[dict]:
    more = True
    while True:
        while state.again and _send(ray, state, state.again[0]):
            state.again.pop(0)
        while more and not state.again:
            job = next(jobs, None)
            if job is None:
                more = False
            elif not _send(ray, state, sent := _Sent(job, state.actors[0])):
                state.again.append(sent)
                break
        if flight is not None:
            flight.running = len(state.sent)
        if not state.sent and not state.again and not more:
            return
        _ping(ray, state.actors)
        refs = list(state.sent) + [a.ping for a in state.actors if a.ping is not None]
        if not refs:  # every actor is down and not yet pinged again
            time.sleep(_PING_AGAIN_S / 4)
            continue
        ready, _ = ray.wait(refs, num_returns=1, timeout=_POLL_S)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            if ref in state.sent:
                result = _finish(ray, state, ref)
                if result is not None:
                    yield result
            else:
                _pinged(ray, state.actors, ref)


def _finish(ray: Any, state: _State, ref: Any) -> dict[str, Any] | None:
    """The job's result, or None when it was sent again (its actor died under it)."""
    sent = state.sent.pop(ref)
    sent.actor.held -= 1
    try:
        result, node = ray.get(ref)
    except (ray.exceptions.RayActorError, ray.exceptions.RaySystemError) as error:
        if sent.actor.up:
            sent.actor.up, sent.actor.ping_at = False, time.monotonic()
        sent.attempt += 1
        if sent.attempt >= ATTEMPTS:
            return failed(sent.job, f"WorkerDied: its Ray actor died {ATTEMPTS} times ({error})")
        logger.warning("job %s sent again: its Ray actor died (%s)", sent.job.index, error)
        state.again.append(sent)
        return None
    except ray.exceptions.RayError as error:
        return failed(sent.job, f"{type(error).__name__}: {error}")
    logger.debug("job %s ran on node %s", sent.job.index, node)
    return result


def _ping(ray: Any, actors: list[_Actor]) -> None:
    """Ask each down actor, once a second, whether it is back."""
    now = time.monotonic()
    for actor in actors:
        if not actor.up and actor.ping is None and now >= actor.ping_at:
            actor.ping = actor.handle.ready.remote()


def _pinged(ray: Any, actors: list[_Actor], ref: Any) -> None:
    actor = next(a for a in actors if a.ping == ref)
    actor.ping = None
    try:
        node = ray.get(ref)
    except ray.exceptions.RayError:
        actor.ping_at = time.monotonic() + _PING_AGAIN_S
        return
    logger.info("a Ray actor is back, on node %s", node)
    actor.up = True


def _stop(ray: Any, actors: list[_Actor], group: Any) -> None:
    """Close each actor's runner (its database connections), then end the actors and free
    their placement group."""
    from ray.util import remove_placement_group

    closing = [a.handle.close.remote() for a in actors if a.up]
    with contextlib.suppress(Exception):
        ray.wait(closing, num_returns=len(closing), timeout=30)
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor.handle, no_restart=True)
    with contextlib.suppress(Exception):
        remove_placement_group(group)
