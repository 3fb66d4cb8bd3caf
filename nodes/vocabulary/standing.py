"""The one decision of where a thread stands, from its latest ``StateSnapshot``: ``finished``,
``awaiting_approval`` (stopped before an Action for a person's decision: its task holds the
interrupt), ``interrupted`` or ``unknown``. Every command makes it through here (``threads``,
``show``, ``resume``, the batch and eval re-runs, ``prune``, ``run_many``/``run_processes``);
reading the snapshot, and a row that cannot be read, is ``reactgraph.storage.snapshots``.

A step's writes are stored task by task (``put_writes``) before the step's checkpoint. LangGraph
1.2 leaves out of ``StateSnapshot.next`` the tasks whose writes are stored already, so a process
killed between a task's writes and the next checkpoint leaves a thread whose ``next`` is empty
though a step is still due. ``StateSnapshot.tasks`` lists every task of the next step, written
or not: a thread is finished only when it has none. Resuming such a thread (``invoke(None)``)
applies the stored writes without running their tasks again, then goes on.
"""

from __future__ import annotations

from typing import Literal

from langgraph.types import StateSnapshot

from reactgraph.nodes.vocabulary.endings import AWAITING

__all__ = ["AWAITING", "ThreadStatus", "status_of"]

ThreadStatus = Literal["unknown", "interrupted", "awaiting_approval", "finished"]


def status_of(snapshot: StateSnapshot) -> ThreadStatus:
    """``awaiting_approval`` while the next step waits on an ``interrupt()`` (a person's
    decision), ``interrupted`` while it has any other task (its writes stored or not),
    ``finished`` when a checkpoint has no step due, ``unknown`` when there is no checkpoint."""
    if any(task.interrupts for task in snapshot.tasks):
        return "awaiting_approval"  # AWAITING
    if snapshot.tasks:
        return "interrupted"
    return "finished" if snapshot.values else "unknown"
