"""Storage backends: one module per kind of database, behind one interface, chosen once by the
database's address (``database_backend(db)``). Nothing outside this package asks which kind it has.

A backend says what its addresses look like, opens the checkpointer and the store (sync and
async), holds thread locks, deletes a pruned thread's old rows, explains its faults in one line,
and gives the SQL that pages the run records (``reactgraph.storage.listing``). Adding a backend
is a module with a ``BACKEND`` value and one line in ``_MODULES``; the tests' ``db`` fixture
runs every storage test on every registered backend (``tests/test_backends.py`` checks that).

This module and the backends' module level import only the standard library: the command line's
parser and its Ctrl-C guard read addresses before LangGraph loads.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.store.base import BaseStore

    from reactgraph.storage.locks import Lease

Opened = tuple["BaseCheckpointSaver", "BaseStore"]
INDEX = "reactgraph_runs_by_start"
"""The index of ours on LangGraph's ``store`` table that pages the run records."""

# The registered backends, by module; the last one claims any address the others do not.
_MODULES = ("reactgraph.storage.backends.postgres", "reactgraph.storage.backends.sqlite")


class Dialect(Protocol):
    """How a backend's SQL reads LangGraph's ``store`` table, for the run-record listings."""

    param: str
    """The placeholder of a query parameter (``?``, ``%s``)."""
    start: str
    """A run record's start time (``created``) read from the stored JSON; 0 when it has none."""
    mark: str
    """A start time given back as a parameter."""
    shown: str
    """The start time as a page returns it, to be given back exactly (``start`` or a cast)."""
    table: str
    """The table as a page names it (SQLite: ``INDEXED BY`` the index)."""

    def cursor(self, store: BaseStore) -> AbstractContextManager[Any]:
        """A cursor of the store's own connection (LangGraph's internal ``_cursor``)."""
        ...

    def has_index(self, connection: Any) -> bool:
        """Whether the records' index exists, asked over a connection or a cursor."""
        ...

    def rows(self, cursor: Any, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The query's rows, as tuples."""
        ...

    def value(self, stored: Any) -> Any:
        """A row's stored value as the run records read it: JSON bytes, or a decoded value."""
        ...


class Backend(Protocol):
    """One kind of database."""

    name: str
    """Its short name (``sqlite``, ``postgres``): the tests' parameter ids."""
    shared: bool
    """Whether processes on several machines can use one database (a Ray cluster's nodes)."""
    keeps_steps: bool
    """Whether a fault mid-run (the server gone) keeps every step stored, so the run resumes."""
    dialect: Dialect

    def claims(self, db: str) -> bool:
        """Whether ``db`` is an address of this kind."""
        ...

    def address(self, db: str) -> str:
        """``db`` as another process or folder must be given it (a file made absolute)."""
        ...

    def shown(self, db: str) -> str:
        """``db`` fit to print (no password)."""
        ...

    def exists(self, db: str) -> bool:
        """Whether there may be runs there (a missing file has none; a server is asked later)."""
        ...

    def lock_place(self, db: str) -> str:
        """Where its thread locks live, for a message."""
        ...

    def faults(self) -> tuple[type[BaseException], ...]:
        """The exception types its driver raises, once that driver is imported (a driver not
        imported yet has raised nothing: asked when an exception is being handled, never up
        front, so a SQLite run never imports PostgreSQL's driver)."""
        ...

    def explain(self, db: str, error: BaseException) -> str:
        """A fault in one line that names the database and says what to do."""
        ...

    def open(self, db: str, read_only: bool) -> AbstractContextManager[Opened]:
        """The checkpointer and the store, set up (``read_only``: never create anything)."""
        ...

    def aopen(self, db: str) -> AbstractAsyncContextManager[Opened]:
        """The async checkpointer and store, set up."""
        ...

    def lock(self, db: str, thread_id: str) -> AbstractContextManager[Lease]:
        """Hold the thread for this process; ``ThreadBusy`` when another holds it."""
        ...

    def alock(self, db: str, thread_id: str, saver: Any) -> AbstractAsyncContextManager[Lease]:
        """``lock`` for async runs (the lease may carry a writer over the lock's connection)."""
        ...

    def delete_older(self, db: str, thread_id: str, keep: str) -> None:
        """Delete the thread's checkpoints and writes older than checkpoint ``keep``."""
        ...

    def compact(self, db: str) -> None:
        """Give freed space back (after pruning), where the database does not itself."""
        ...

    def owns(self, store: Any) -> bool:
        """Whether ``store`` is this backend's LangGraph store (its table readable in SQL)."""
        ...

    def quick_reader(self, db: str) -> Any | None:
        """A plain read-only DB-API connection to a database that has LangGraph's tables, for
        reads without LangGraph (the listings' summaries), or None: a backend without one, no
        database there, no tables, not a database (LangGraph's read then says which)."""
        ...


def registered() -> Sequence[Backend]:
    """Every backend, in the order they are asked to claim an address."""
    return [importlib.import_module(m).BACKEND for m in _MODULES]


def database_backend(db: str) -> Backend:
    """The backend of the address ``db``."""
    if not isinstance(db, str) or not db:
        raise ValueError(f"a database is a SQLite path or a postgresql:// URL, got {db!r}")
    return next(b for b in registered() if b.claims(db))


def backend_named(name: str) -> Backend:
    """The backend called ``name`` (``sqlite``, ``postgres``)."""
    for backend in registered():
        if backend.name == name:
            return backend
    raise ValueError(f"no storage backend named {name!r}")


def store_backend(store: Any) -> Backend | None:
    """The backend whose LangGraph store ``store`` is; None for another store (in memory...)."""
    return next((b for b in registered() if b.owns(store)), None)


def faults() -> tuple[type[BaseException], ...]:
    """Every registered driver's exception types, of the drivers imported so far (what a command
    catches mid-run: an ``except faults()`` clause is evaluated when an exception reaches it)."""
    return tuple(kind for backend in registered() for kind in backend.faults())
