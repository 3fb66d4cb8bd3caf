"""Keep only what ``show`` and ``resume`` need of a finished run: its final state.

A run keeps every step's checkpoint (for history and time travel): with deltas that is about
linear in the run, but a batch of a thousand long runs still leaves much behind. Pruning a
finished thread first writes one checkpoint holding a full copy of every delta-stored channel
(so nothing depends on older rows), with the run still finished, and only then deletes the
thread's older checkpoints and writes. A kill at any point leaves a readable thread.
"""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Overwrite

from reactgraph.storage.backends import database_backend
from reactgraph.storage.snapshots import read_thread, status_of


class NotFinished(RuntimeError):
    """The thread has a step still due: pruning would take its resume away."""


def _snapshot(graph: CompiledStateGraph, config: RunnableConfig) -> str:
    """Write the final state as one self-contained checkpoint; its id."""
    thread = config["configurable"]["thread_id"]
    status, values = read_thread(graph, thread)
    if status != "finished":
        raise NotFinished(f"thread {thread} has not finished")
    delta = {name for name, ch in graph.channels.items() if isinstance(ch, DeltaChannel)}
    # An Overwrite of None would read back as "" (the channel's empty value): None is plain.
    values = {k: (Overwrite(v) if k in delta and v is not None else v) for k, v in values.items()}
    # As if the cap exit had written it: that node leads only to END, so the run stays finished.
    exit_node = "force_answer" if "force_answer" in graph.nodes else "stop_run"
    written = graph.update_state(config, values, as_node=exit_node)
    if status_of(graph.get_state(written)) != "finished":
        raise NotFinished("pruning would have made the run resumable again")
    return str(written["configurable"]["checkpoint_id"])


def _delete_older(db: str, thread: str, keep: str) -> None:
    """Delete the thread's checkpoints and writes older than checkpoint ``keep`` (and the blobs
    no checkpoint left uses), on a connection of its own: the run's may be async, or busy.
    Checkpoint ids sort by time, so ``keep`` and anything newer (another prune's own snapshot,
    say) always stay: two prunes of one thread at once leave its newest checkpoint."""
    database_backend(db).delete_older(db, thread, keep)


def prune_thread(graph: CompiledStateGraph, db: str, thread: str) -> None:
    """Reduce a finished thread of ``db`` (the graph's checkpointer's database) to its final
    state; ``NotFinished`` if it has a step due. History and time travel for it end there;
    ``get_state``, ``show`` and a new run on the thread work as before."""
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    keep = _snapshot(graph, config)
    _delete_older(db, thread, keep)


def vacuum(db: str) -> None:
    """Give the database's freed space back to the disk, where it does not do so itself (a
    SQLite file's pages)."""
    database_backend(db).compact(db)
