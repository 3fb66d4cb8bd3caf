"""The Ray engine's side of the cluster: connecting to it (or starting a local Ray), the
actors that run the jobs (``Slot``), and where they are placed. The driver that feeds them is
``reactgraph.app.rayengine``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from reactgraph.app.engines import EngineError
from reactgraph.app.pool import Job, OpenRunner, failed
from reactgraph.storage.backends import database_backend

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
                from reactgraph.app import telemetry

                telemetry.start()  # the driver's export settings came in its runtime_env
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
            from reactgraph.app import telemetry

            await asyncio.to_thread(telemetry.stop)


def cluster_workers(ray: Any) -> int:
    """The cluster's CPUs."""
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def check_shared(ray: Any, db: str | None) -> None:
    """``EngineError`` for a database only one machine can use (a SQLite file) on a cluster of
    more than one node."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    if db and not database_backend(db).shared and len(nodes) > 1:
        raise EngineError(
            f"the runs cannot be kept in the SQLite file {db} on a Ray cluster of {len(nodes)} "
            "nodes: each node would have a file of its own; pass --db postgresql://..."
        )


def exported_env() -> dict[str, Any]:
    """``ray.init``'s runtime_env carrying the trace export's variables to the actors, so their
    runs join the traces (the runs' own trace context is in their checkpoints)."""
    names = [n for n in os.environ if n.startswith("OTEL_") or n == "REACTGRAPH_OTEL"]
    if not names:
        return {}
    return {"runtime_env": {"env_vars": {name: os.environ[name] for name in names}}}


@contextlib.contextmanager
def connected(address: str | None) -> Iterator[Any]:
    """Ray, connected: to ``address``, else to ``RAY_ADDRESS``, else a local Ray started now
    and stopped after (a Ray this process had already joined is left as it was)."""
    import ray

    if ray.is_initialized():
        yield ray
        return
    address = address or os.environ.get("RAY_ADDRESS") or None
    local: dict[str, Any] = (
        {} if address else {"include_dashboard": False, "_node_ip_address": "127.0.0.1"}
    )
    try:
        # Actors' output stays in the nodes' logs: this process's stdout is the command's.
        # "local" starts a Ray of this run's own, never joining one already running here.
        ray.init(
            address=address or "local",
            log_to_driver=False,
            logging_level=logging.ERROR,
            **exported_env(),
            **local,
        )
    except Exception as error:  # Ray raises plain Exceptions here (a start-up that timed out)
        where = f"reach the Ray cluster at {address}" if address else "start a local Ray"
        raise EngineError(f"cannot {where}: {error}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def spawn(ray: Any, open_runner: OpenRunner, count: int, slots: int) -> tuple[Any, list[Any]]:
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


def stop(ray: Any, actors: list[Any], up: list[bool], group: Any) -> None:
    """Close the runner (its database connections) of each actor that is ``up``, then end
    every actor and free their placement group."""
    from ray.util import remove_placement_group

    closing = [actor.close.remote() for actor, answers in zip(actors, up, strict=True) if answers]
    with contextlib.suppress(Exception):
        ray.wait(closing, num_returns=len(closing), timeout=30)
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
    with contextlib.suppress(Exception):
        remove_placement_group(group)
