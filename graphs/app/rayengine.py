"""The Ray engine: the same jobs and runner as the process pool, on a Ray cluster.

One async actor per worker slot opens the runner once (``open_runner``, as in
``reactgraph.app.pool``) and runs up to its share of ``concurrency`` jobs at a time. This process,
the driver, takes the jobs one by one from an iterable (a file of a million questions is never
all in memory, nor in Ray's object store), keeps at most ``concurrency`` in flight, and yields
each result as it comes: the caller stays the one reader, and the one writer of any results.

The actors (``reactgraph.app.rayactors``) are spread over the nodes by a placement group, so a
cluster of two nodes runs on both, whatever each node has heard of the other yet.

Faults: a node that dies takes its actors with it. Ray places their bundles again on the nodes
that live and restarts them there (``max_restarts=-1``), and the driver sends each job they
held again, to an actor that answers (the same one once restarted, or another). The job's
runner resumes the thread from its last checkpoint; its thread lock keeps a job from ever
running twice at once, so a job sent again while the dead process's lock lingers waits for it.
Each job gives exactly one result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from reactgraph.app import interrupts
from reactgraph.app.pool import (
    Job,
    OpenRunner,
    check_counts,
    failed,
    job_count,
    peeked,
    shares,
)
from reactgraph.app.rayactors import check_shared, cluster_workers, connected, spawn, stop

logger = logging.getLogger(__name__)

_POLL_S = 0.5
ATTEMPTS = 5
"""How many times a job is sent to an actor that dies under it before it fails."""
LOCK_WAIT_S = 120.0
"""How long a job sent again waits for the lock its dead holder's session still has."""
_PING_AGAIN_S = 1.0


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


def run_ray(
    open_runner: OpenRunner,
    jobs: Iterable[Job],
    *,
    address: str | None = None,
    db: str | None = None,
    workers: int | None = None,
    concurrency: int = 8,
    total: int | None = None,
    flight: Any = None,
) -> Iterator[dict[str, Any]]:
    """Run ``jobs`` on the Ray cluster at ``address`` (else ``RAY_ADDRESS``, else a local one:
    ``rayactors.connected``), on ``workers`` actors (default: the cluster's CPUs; capped by
    the number of jobs when known: their length, or ``total``), ``concurrency`` in flight in
    all; yield each result as its run ends. ``db`` is where the runner keeps its runs, checked
    against the cluster; ``flight.running`` is kept at the number of jobs in flight, for a
    progress bar."""
    check_counts(workers=workers or 1, concurrency=concurrency)
    source = peeked(jobs)
    if source is None:
        return
    with connected(address) as ray:
        check_shared(ray, db)
        count = workers or cluster_workers(ray)
        count, slots = shares(count, concurrency, job_count(jobs, total))
        group, actors = spawn(ray, open_runner, count, slots)
        state = _State([_Actor(a) for a in actors], slots)
        try:
            yield from _drive(ray, state, source, flight)
        finally:
            stop(ray, [a.handle for a in state.actors], [a.up for a in state.actors], group)


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


def _top_up(ray: Any, state: _State, jobs: Iterator[Job], more: bool) -> bool:
    """Send the jobs to send again, then (while ``more``) new ones from ``jobs``, until no
    actor has a free slot; whether ``jobs`` may still have more."""
    while state.again and _send(ray, state, state.again[0]):
        state.again.pop(0)
    while more and not state.again:
        job = next(jobs, None)
        if job is None:
            return False
        if not _send(ray, state, sent := _Sent(job, state.actors[0])):
            state.again.append(sent)
    return more


def _ready(ray: Any, state: _State) -> list[Any]:
    """The refs done within a poll: jobs' results and down actors' pings (empty after a
    short sleep when nothing is in flight: every actor down and not yet pinged again)."""
    _ping(ray, state.actors)
    refs = list(state.sent) + [a.ping for a in state.actors if a.ping is not None]
    if not refs:
        time.sleep(_PING_AGAIN_S / 4)
        return []
    ready, _ = ray.wait(refs, num_returns=1, timeout=_POLL_S)
    if ready:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
    return list(ready)


def _drive(ray: Any, state: _State, jobs: Iterator[Job], flight: Any) -> Iterator[dict]:
    more = True
    while True:
        more = _top_up(ray, state, jobs, more)
        if flight is not None:
            flight.running = len(state.sent)
        if not state.sent and not state.again and not more:
            return
        for ref in _ready(ray, state):
            if ref not in state.sent:
                _pinged(ray, state.actors, ref)
            elif (result := _finish(ray, state, ref)) is not None:
                yield result


def _finish(ray: Any, state: _State, ref: Any) -> dict[str, Any] | None:
    """The job's result, or None when it was sent again (its actor died under it)."""
    sent = state.sent.pop(ref)
    sent.actor.held -= 1
    try:
        result, node = ray.get(ref)
    except (ray.exceptions.RayActorError, ray.exceptions.RaySystemError) as error:
        interrupts.park_if_stopping()  # Ctrl-C ended it: not a failure of its run
        if sent.actor.up:
            sent.actor.up, sent.actor.ping_at = False, time.monotonic()
        sent.attempt += 1
        if sent.attempt >= ATTEMPTS:
            return failed(sent.job, f"WorkerDied: its Ray actor died {ATTEMPTS} times ({error})")
        logger.warning("job %s sent again: its Ray actor died (%s)", sent.job.index, error)
        state.again.append(sent)
        return None
    except ray.exceptions.RayError as error:
        interrupts.park_if_stopping()
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
