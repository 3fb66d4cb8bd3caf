"""Database faults as a person at the terminal needs them: one line that names the database
(never a password) and says what to do."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def _is_postgres(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def redact(db: str) -> str:
    """``db`` fit to print: a PostgreSQL URL without its password."""
    if not _is_postgres(db):
        return db
    parts = urlsplit(db)
    if parts.password is None:
        return db
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def explain(db: str, error: BaseException) -> str:
    """A database fault in one line that names the database and says what to do."""
    text = " ".join(str(error).split()) or type(error).__name__
    lower = text.lower()
    if _is_postgres(db):
        return f"the database {redact(db)} failed ({text}); check that the server is up and the URL"
    if "not a database" in lower:
        return (
            f"cannot open the database {db}: it is not a SQLite database or its header is damaged "
            f"({text}); restore it from a backup, or pass another --db"
        )
    if "malformed" in lower or "corrupt" in lower:
        return (
            f"the database {db} is damaged ({text}); restore it from a backup, or pass another --db"
        )
    if "readonly" in lower or "read-only" in lower or "permission" in lower:
        return (
            f"the database {db} cannot be written ({text}); make the file and its folder writable "
            "(and not immutable: chattr -i), or pass another --db"
        )
    if "unable to open" in lower:
        return (
            f"cannot open the database {db} ({text}); check that its folder exists and can be "
            "written, or pass another --db"
        )
    if "locked" in lower or "busy" in lower:
        return f"the database {db} is locked by another process ({text}); try again later"
    return f"cannot use the database {db} ({text}); check the file, or pass another --db"
