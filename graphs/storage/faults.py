"""Database faults as a person at the terminal needs them: one line that names the database
(never a password) and says what to do."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from reactgraph.storage.address import is_postgres


class DatabaseError(RuntimeError):
    """The database cannot be opened or read; the message says which and why."""


class NoDatabase(DatabaseError):
    """A command that only reads was pointed at a database that does not exist (or is empty)."""


def redact(db: str) -> str:
    """``db`` fit to print: a PostgreSQL URL without its password."""
    if not is_postgres(db):
        return db
    parts = urlsplit(db)
    if parts.password is None:
        return db
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


# Words of a fault in reaching the server (psycopg gives these no SQLSTATE).
_UNREACHABLE = (
    "connection",
    "could not connect",
    "could not translate host",
    "server closed",
    "timeout",
    "timed out",
)


def _postgres(where: str, state: str, text: str) -> str:
    """A PostgreSQL fault by its SQLSTATE class: the server is out of reach, or it refused."""
    lower = text.lower()
    if state == "3D000" or ("database" in lower and "does not exist" in lower):
        return f"the database {where} does not exist ({text}); create it (createdb), or fix the URL"
    if state.startswith("28") or "authentication failed" in lower:
        return f"the server refused the login to {where} ({text}); check the user and the password"
    if state == "53100" or "no space left" in lower:
        return (
            f"the database server of {where} is out of disk space ({text}); free some, then retry"
        )
    if state == "42501" or "permission denied" in lower:
        return (
            f"the database {where} refused this user ({text}); grant it the rights on the "
            "database, or use another user"
        )
    if state.startswith(("08", "57P")) or (not state and any(w in lower for w in _UNREACHABLE)):
        return f"the database {where} failed ({text}); check that the server is up and the URL"
    # Reached, and it answered with an error: a fault in the database, not in reaching it.
    return (
        f"the database {where} refused an operation ({text}); it was reached: see the "
        "server's log, then retry"
    )


def explain(db: str, error: BaseException) -> str:
    """A database fault in one line that names the database and says what to do."""
    text = " ".join(str(error).split()) or type(error).__name__
    lower = text.lower()
    if is_postgres(db):
        return _postgres(redact(db), getattr(error, "sqlstate", None) or "", text)
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
