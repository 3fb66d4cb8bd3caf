"""Where runs are kept, for the app and for Python users alike: ``open_db``/``aopen_db`` (SQLite or
PostgreSQL), the run records, thread locks and the lease-checked saver, thread status, pruning,
compression and database faults."""

from __future__ import annotations

from reactgraph.storage.database import DatabaseError, RunRecord, aopen_db, open_db, thread_status

__all__ = ["DatabaseError", "RunRecord", "aopen_db", "open_db", "thread_status"]
