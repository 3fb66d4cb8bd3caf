"""Whose warning it is: a batch or an eval runs many questions at once in each worker, and a
warning logged while one of them runs (a tool timed out, a reply cut at its cap, a stuck run)
names that question, as ``question ID: ...``.

The question's name is a context variable set by the worker's runner for the run (each run is
an asyncio task of its own, and the threads a run starts copy its context: LangChain's and
LangGraph's executors, ``asyncio.to_thread``); every log record made while it is set starts
with it, whichever logger makes it."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Iterator
from typing import Any

_RUNNING: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "reactgraph_running_question", default=None
)
_installed = False
_lock = threading.Lock()


def install() -> None:
    """Name the running question in every log record of this process (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        made = logging.getLogRecordFactory()

        def named(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = made(*args, **kwargs)
            name = _RUNNING.get()
            if name is not None and isinstance(record.msg, str):
                # A literal prefix: a % in the name must not be read as a format field.
                prefix = name.replace("%", "%%") if record.args else name
                record.msg = f"{prefix}: {record.msg}"
            return record

        logging.setLogRecordFactory(named)
        _installed = True


@contextlib.contextmanager
def running(name: str | None) -> Iterator[None]:
    """While the block runs (in this task or thread, and what it starts), log records name
    ``name``; None names nothing."""
    token = _RUNNING.set(name)
    try:
        yield
    finally:
        _RUNNING.reset(token)
