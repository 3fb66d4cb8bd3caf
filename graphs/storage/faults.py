"""Database faults as a person at the terminal needs them: one line that names the database
(never a password) and says what to do, in each backend's own words."""

from __future__ import annotations

from reactgraph.storage.backends import database_backend
from reactgraph.storage.errors import DatabaseError as DatabaseError
from reactgraph.storage.errors import NoDatabase as NoDatabase


def explain(db: str, error: BaseException) -> str:
    """A database fault in one line that names the database and says what to do."""
    return database_backend(db).explain(db, error)
