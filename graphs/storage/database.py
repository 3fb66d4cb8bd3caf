"""Where runs survive a crash: one SQLite file (or a PostgreSQL database) holding the checkpoints
of every thread, the notes when they live in the store, and the record of each run."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from reactgraph.storage.address import DEFAULT_DB
from reactgraph.storage.backends import database_backend
from reactgraph.storage.errors import DatabaseError as DatabaseError
from reactgraph.storage.errors import NoDatabase as NoDatabase
from reactgraph.storage.faults import explain as explain
from reactgraph.storage.listing import RUNS as RUNS

# The thread lock's old home: these names stay importable from here.
from reactgraph.storage.locks import ThreadBusy as ThreadBusy
from reactgraph.storage.locks import thread_lock as thread_lock

# The run record's old home: these names stay importable from here.
from reactgraph.storage.records import RECORDS_PAGE as RECORDS_PAGE
from reactgraph.storage.records import RecordDamaged as RecordDamaged
from reactgraph.storage.records import RunRecord as RunRecord
from reactgraph.storage.records import new_record as new_record

ThreadStatus = Literal["unknown", "interrupted", "awaiting_approval", "finished"]


@contextlib.contextmanager
def open_db(
    db: str = DEFAULT_DB, *, read_only: bool = False
) -> Iterator[tuple[BaseCheckpointSaver, BaseStore]]:
    """The checkpointer and the store of ``db``: a SQLite path or a postgresql:// URL (its
    backend's, ``reactgraph.storage.backends``).

    ``read_only`` (for commands that only read): a SQLite file is opened read-only and never
    created; a missing one raises ``NoDatabase``. Database faults, here or in the body (a
    damaged page read mid-run, a dropped server), raise ``DatabaseError`` with a one-line
    message naming the database and what to do."""
    with database_backend(db).open(db, read_only) as opened:
        yield opened


@contextlib.asynccontextmanager
async def aopen_db(db: str = DEFAULT_DB) -> AsyncIterator[tuple[BaseCheckpointSaver, BaseStore]]:
    """The async checkpointer and store of ``db`` (AsyncSqliteSaver or AsyncPostgresSaver)."""
    async with database_backend(db).aopen(db) as opened:
        yield opened


def thread_status(graph: CompiledStateGraph, thread_id: str) -> ThreadStatus:
    """``reactgraph.storage.snapshots.thread_status``: the one status every command reads."""
    from reactgraph.storage.snapshots import thread_status as status

    return status(graph, thread_id)
