"""A run followed live at the terminal (``ask``, ``resume``): its turns printed as they come;
before an Action that needs approval, the person asked (``approving``) and the run resumed with
their decision; a stop said in one line with how to go on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langgraph.types import Command
from rich.markup import escape

from reactgraph.app import approving
from reactgraph.app import console as out
from reactgraph.app.hints import resume_hint
from reactgraph.app.options import UsageError, db_stops
from reactgraph.graph import DURABILITY
from reactgraph.nodes.calling.providers import ModelCallError
from reactgraph.nodes.vocabulary.standing import AWAITING
from reactgraph.storage.backends import database_backend
from reactgraph.storage.database import DatabaseError, RunRecord, explain
from reactgraph.storage.locks import Lease


def start(graph: Any, payload: Any, thread: str) -> Iterator[Any]:
    """The run's stream of updates from ``payload`` (a new run's input, None to resume, or a
    ``Command`` with a decision). The graph checks it when the stream is made, before anything
    is stored: a question or a decision it refuses is the person's mistake."""
    config = {"configurable": {"thread_id": thread}}
    try:
        return graph.stream(payload, config, stream_mode="updates", durability=DURABILITY)
    except ValueError as error:
        raise UsageError(str(error)) from None


def stream_run(
    graph: Any, updates: Iterator[Any] | None, record: RunRecord, db: str, lease: Lease
) -> int:
    """Print each turn of a started run live (``updates``; None for a thread that waits for
    approval already); before an Action that needs approval, ask the person at the terminal
    and go on with their decision, or leave the thread waiting when nobody answers. Spent
    retries and a database fault leave it resumable and say how (Ctrl-C too:
    ``reactgraph.app.interrupts``). A lost lock stops the run at its next write."""
    config = {"configurable": {"thread_id": record.thread_id}}
    while True:
        if updates is not None:
            failed = print_updates(updates, record, db, lease)
            if failed is not None:
                return failed
        snapshot = graph.get_state(config)
        if not snapshot.interrupts:
            out.print_result(snapshot.values)
            return 0 if snapshot.values.get("status") == "answered" else 1
        request = snapshot.interrupts[0].value
        decision = approving.decide(request, snapshot.values)
        if decision is None:
            action = approving.pending_action(request, snapshot.values)
            out.console.print(
                f"\nStatus: [{out.STATUS_STYLE[AWAITING]}]{AWAITING}[/] ({escape(action)}). "
                f"Decide with:\n  {escape(resume_hint(record.thread_id, db))}"
            )
            return 1
        updates = start(graph, Command(resume=decision), record.thread_id)


def print_updates(updates: Iterator[Any], record: RunRecord, db: str, lease: Lease) -> int | None:
    """Print the turns of a stream of updates as they come; the exit code when the stream
    stopped on a fault (said in one line with how to go on), else None."""
    hint = resume_hint(record.thread_id, db)
    try:
        for turn in out.turns_in(updates):
            out.print_turn(turn)
    except ModelCallError as error:
        out.fail(f"{str(error).rstrip('.')}. The run is saved; resume it with: {hint}")
        return 1
    except db_stops() as error:
        text = str(error) if isinstance(error, DatabaseError) else explain(db, error)
        # A server that went away keeps every step it stored; a damaged file may not.
        after = f". The run is saved up to its last step; resume it with: {hint}"
        if lease.lost():
            # The writes go over the lock's connection: none could follow the lost lock.
            after = (
                f"; the lock on thread {record.thread_id} went with its connection, so the run "
                "stopped before writing again (another process may have taken the thread over)"
                f". The run is saved up to its last step; resume it with: {hint}"
            )
        out.fail(text + (after if database_backend(db).keeps_steps else ""))
        return 2
    return None
