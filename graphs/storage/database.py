"""Where runs survive a crash: one SQLite file (or a PostgreSQL database) holding the checkpoints
of every thread, the notes when they live in the store, and the record of each run."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from reactgraph.storage.address import DEFAULT_DB
from reactgraph.storage.backends import database_backend
from reactgraph.storage.errors import DatabaseError as DatabaseError
from reactgraph.storage.errors import NoDatabase as NoDatabase
from reactgraph.storage.faults import explain as explain
from reactgraph.storage.listing import RUNS as RUNS
from reactgraph.storage.listing import record_pages

# The thread lock's old home: these names stay importable from here.
from reactgraph.storage.locks import ThreadBusy as ThreadBusy
from reactgraph.storage.locks import thread_lock as thread_lock

ThreadStatus = Literal["unknown", "interrupted", "finished"]
RECORDS_PAGE = 500  # run records read at once by the listings (``threads``, ``prune --finished``)


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


@dataclass(frozen=True)
class RunRecord:
    """How a thread's run was started, so another process can rebuild its graph to resume."""

    thread_id: str
    question: str
    variant: str
    model: str
    base_url: str | None
    corpus: str | None
    settings: dict[str, Any]
    """The settings given when it started (the variant's defaults stand for the others)."""
    created: float
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What the command line chose besides the settings: ``notes_in_db``, ``mcp``,
    ``default_tools`` (see ``reactgraph.app.flags.RunOptions``)."""

    @classmethod
    def load(cls, store: BaseStore, thread_id: str) -> RunRecord | None:
        """The record of a thread, or None for a thread this database does not know."""
        item = store.get(RUNS, thread_id)
        return None if item is None else cls.from_value(item.value)

    @classmethod
    def from_value(cls, value: dict[str, Any]) -> RunRecord:
        """A stored record; fields a newer version added are ignored, so old code can read it."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in value.items() if k in known})

    def moved_to(self, model: str, base_url: str | None) -> RunRecord:
        """This record with the model (and server) a resumed run goes on with."""
        return dataclasses.replace(self, model=model, base_url=base_url)

    def save(self, store: BaseStore) -> None:
        """Write (or replace) this record."""
        store.put(RUNS, self.thread_id, dict(self.__dict__))

    @staticmethod
    def each(store: BaseStore, page: int | None = None) -> Iterator[RunRecord]:
        """Every recorded run, newest first (by when it started), read ``page`` records at a
        time, in time linear in their number: memory stays bounded however many there are. A
        record saved while this reads is never given twice and never makes another missed
        (``reactgraph.storage.listing``)."""
        for values in record_pages(store, page or RECORDS_PAGE):
            yield from (RunRecord.from_value(value) for value in values)

    @staticmethod
    def all(store: BaseStore) -> list[RunRecord]:
        """Every recorded run, newest first, as a list (``each`` reads them a page at a time)."""
        return sorted(RunRecord.each(store), key=lambda r: -r.created)


def new_record(
    thread_id: str,
    question: str,
    variant: str,
    model: str,
    base_url: str | None,
    corpus: str | None,
    settings: dict[str, Any],
    options: dict[str, Any] | None = None,
) -> RunRecord:
    """A record for a run starting now."""
    return RunRecord(
        thread_id, question, variant, model, base_url, corpus, settings, time.time(), options or {}
    )


def thread_status(graph: CompiledStateGraph, thread_id: str) -> ThreadStatus:
    """``reactgraph.storage.status.thread_status``: the one status every command reads."""
    from reactgraph.storage.status import thread_status as status

    return status(graph, thread_id)
