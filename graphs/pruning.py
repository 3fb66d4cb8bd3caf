"""Keep only what ``show`` and ``resume`` need of a finished run: its final state.

A run keeps every step's checkpoint (for history and time travel): with deltas that is about
linear in the run, but a batch of a thousand long runs still leaves much behind. Pruning a
finished thread first writes one checkpoint holding a full copy of every delta-stored channel
(so nothing depends on older rows), with the run still finished, and only then deletes the
thread's older checkpoints and writes. A kill at any point leaves a readable thread.
"""

from __future__ import annotations

from typing import Any

from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Overwrite


class NotFinished(RuntimeError):
    """The thread has a step still due: pruning would take its resume away."""


def _snapshot(graph: CompiledStateGraph, config: dict[str, Any]) -> str:
    """Write the final state as one self-contained checkpoint; its id."""
    state = graph.get_state(config)
    if state.next:
        raise NotFinished(f"thread {config['configurable']['thread_id']} has not finished")
    delta = {name for name, ch in graph.channels.items() if isinstance(ch, DeltaChannel)}
    # An Overwrite of None would read back as "" (the channel's empty value): None is plain.
    values = {
        k: (Overwrite(v) if k in delta and v is not None else v) for k, v in state.values.items()
    }
    # As if the cap exit had written it: that node leads only to END, so the run stays finished.
    exit_node = "force_answer" if "force_answer" in graph.nodes else "stop_run"
    written = graph.update_state(config, values, as_node=exit_node)
    if graph.get_state(written).next:
        raise NotFinished("pruning would have made the run resumable again")
    return str(written["configurable"]["checkpoint_id"])


def _delete_older(saver: BaseCheckpointSaver, thread: str, keep: str) -> None:
    """Delete the thread's rows other than checkpoint ``keep`` (and the blobs it uses)."""
    connection: Any = saver.conn  # type: ignore[attr-defined]
    if is_postgres_saver(saver):
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_id <> %s",
                (thread, keep),
            )
            cursor.execute(
                "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND NOT EXISTS ("
                " SELECT 1 FROM checkpoints c WHERE c.thread_id = b.thread_id"
                " AND c.checkpoint_ns = b.checkpoint_ns AND c.checkpoint_id = %s"
                " AND c.checkpoint -> 'channel_versions' ->> b.channel = b.version)",
                (thread, keep),
            )
            cursor.execute(
                "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_id <> %s",
                (thread, keep),
            )
        return
    with saver.lock:  # type: ignore[attr-defined]
        connection.execute(
            "DELETE FROM writes WHERE thread_id = ? AND checkpoint_id <> ?", (thread, keep)
        )
        connection.execute(
            "DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id <> ?", (thread, keep)
        )
        connection.commit()


def is_postgres_saver(saver: BaseCheckpointSaver) -> bool:
    """Whether the saver keeps its checkpoints in PostgreSQL."""
    return type(saver).__module__.startswith("langgraph.checkpoint.postgres")


def prune_thread(graph: CompiledStateGraph, saver: BaseCheckpointSaver, thread: str) -> None:
    """Reduce a finished thread to its final state (``NotFinished`` if it has a step due).
    History and time travel for it end there; ``get_state``, ``show`` and a new run on the
    thread work as before."""
    config = {"configurable": {"thread_id": thread}}
    keep = _snapshot(graph, config)
    _delete_older(saver, thread, keep)
