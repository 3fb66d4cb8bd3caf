"""``reactgraph prune``: finished threads reduced to their final state
(``reactgraph.storage.pruning``), each under its lock. What cannot be pruned safely is kept whole
with a one-line warning, and the others are pruned: a thread another process is running, a
thread with a step due, and a damaged thread (its checkpoint or its run record unreadable)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from reactgraph.app import console as out
from reactgraph.app.flags import UsageError
from reactgraph.app.options import held
from reactgraph.app.viewing import known, load_record, reader
from reactgraph.storage.database import open_db
from reactgraph.storage.locks import ThreadBusy, lease_saver
from reactgraph.storage.pruning import prune_thread, vacuum
from reactgraph.storage.records import RecordDamaged, RunRecord
from reactgraph.storage.snapshots import ThreadDamaged, thread_status
from reactgraph.storage.summaries import save_summary


def cmd_prune(args: argparse.Namespace) -> int:
    """Reduce finished threads to their final state; one that cannot be is kept whole."""
    if not args.threads and not args.finished:
        raise UsageError("name the threads to prune, or pass --finished for every finished one")
    pruned = skipped = 0
    with open_db(args.db) as (saver, store):
        for record in _named(args, store) if args.threads else RunRecord.each(store):
            if _prune_one(args, saver, store, record):
                pruned += 1
            else:
                skipped += 1
    if pruned:
        vacuum(args.db)
    out.console.print(f"pruned {pruned} finished thread(s); {skipped} not finished, kept whole")
    return 0


def _named(args: argparse.Namespace, store: Any) -> Iterator[RunRecord | RecordDamaged]:
    """The records of the threads named: an unknown one is the person's mistake."""
    for thread in args.threads:
        try:
            yield load_record(store, thread, args.db)
        except RecordDamaged as damaged:
            yield damaged


def _prune_one(
    args: argparse.Namespace, saver: Any, store: Any, record: RunRecord | RecordDamaged
) -> bool:
    """Prune one thread while holding its lock; whether it was pruned."""
    thread = record.thread_id
    try:
        if isinstance(record, RecordDamaged):
            raise record
        variant = known(record).variant
        with held(args.db, thread) as lease:
            # Written under this lease (its saver carries no lock of its own to take again).
            graph = reader(variant, lease_saver(saver, lease))
            if thread_status(graph, thread) != "finished":
                if args.threads:
                    out.warn(f"thread {thread} has not finished; kept whole")
                return False
            prune_thread(graph, args.db, thread)
            # Its final state is a new checkpoint: the summary `threads` reads follows it.
            save_summary(graph, store, thread, args.db)
            return True
    except ThreadBusy:
        out.warn(f"thread {thread} is running in another process; kept whole")
    except (ThreadDamaged, RecordDamaged) as damaged:
        out.warn(f"{damaged}; kept whole")
    return False
