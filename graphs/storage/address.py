"""Where the runs are: the default database, and whether a name is a PostgreSQL URL or a SQLite
file. No imports, so the command line's parser can show the default without loading storage."""

from __future__ import annotations

DEFAULT_DB = "runs/reactgraph.sqlite"


def is_postgres(db: str) -> bool:
    """Whether ``db`` names a PostgreSQL database rather than a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))
