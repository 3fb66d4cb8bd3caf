"""The storage faults a command reports: one line each, naming the database and what to do."""

from __future__ import annotations


class DatabaseError(RuntimeError):
    """The database cannot be opened or read; the message says which and why."""


class ThreadBusy(RuntimeError):
    """Another process is running this thread."""


class NoDatabase(DatabaseError):
    """A command that only reads was pointed at a database that does not exist (or is empty)."""
