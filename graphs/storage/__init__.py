"""Where runs are kept, for the app and for Python users alike: ``open_db``/``aopen_db`` (SQLite or
PostgreSQL), the run records, thread locks and the lease-checked saver, thread status, pruning,
compression and database faults.

The names below load LangGraph's checkpointers when first used, so a module that only needs
``reactgraph.storage.address`` (the command line's parser) imports none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reactgraph.storage.database import (
        DatabaseError,
        RunRecord,
        aopen_db,
        open_db,
        thread_status,
    )

__all__ = ["DatabaseError", "RunRecord", "aopen_db", "open_db", "thread_status"]


def __getattr__(name: str) -> Any:
    """The names of ``reactgraph.storage.database``, imported on first use."""
    if name not in __all__:
        raise AttributeError(f"module 'reactgraph.storage' has no attribute {name!r}")
    value = getattr(importlib.import_module("reactgraph.storage.database"), name)
    globals()[name] = value
    return value
