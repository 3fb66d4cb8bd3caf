"""Where blocking calls run so that a deadline can be kept: reused daemon threads, a background
event loop for async-only tools called from sync code, and a cap on calls left hanging.

Python cannot kill a thread. A call that outlives its deadline is abandoned: it keeps its thread
until it returns, and a daemon thread never keeps the process from exiting. So that a tool which
always hangs cannot pile up threads, each key (a tool's name) may have at most
``MAX_ABANDONED`` abandoned calls; past that, ``Unavailable`` is raised instead of starting more.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import queue
import threading
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from reactgraph.tools.loopthread import LoopThread

logger = logging.getLogger(__name__)

MAX_ABANDONED = 8


class TimedOut(TimeoutError):
    """The call did not finish within its deadline; it was abandoned (or cancelled)."""

    seconds: float | None = None
    """The deadline it was given, in seconds, when the caller says."""


class Unavailable(Exception):
    """Too many earlier calls with this key are still hanging; no new one was started."""

    def __init__(self, key: str, hanging: int) -> None:
        super().__init__(f"{hanging} earlier calls of {key} are still running past their timeout")
        self.hanging = hanging


class _DaemonThreads(concurrent.futures.Executor):
    """Reused daemon worker threads; a new one starts whenever none is idle, so a hung call
    never makes another wait in a queue."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._work.put((future, fn, args, kwargs))
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1  # an idle worker will take it
        if spawn:
            threading.Thread(target=self._serve, name="reactgraph-worker", daemon=True).start()
        return future

    def _serve(self) -> None:
        while True:
            future, fn, args, kwargs = self._work.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:  # handed to the caller, who decides
                    future.set_exception(error)
            with self._lock:
                self._idle += 1


THREADS = _DaemonThreads()
# Async-only tools called from sync code run here, where a timeout can cancel them cleanly.
LOOP = LoopThread("reactgraph-async")
_hanging: Counter[str] = Counter()
_lock = threading.Lock()


def hanging(key: str) -> int:
    """How many abandoned calls with this key are still running."""
    with _lock:
        return _hanging[key]


def abandon(key: str, future: concurrent.futures.Future[Any] | asyncio.Future[Any]) -> None:
    """Count a call past its deadline as hanging until it ends by itself."""

    def ended(_: Any) -> None:
        with _lock:
            _hanging[key] -= 1

    with _lock:
        _hanging[key] += 1
    logger.warning("%s is still running past its timeout (%d such calls)", key, hanging(key))
    future.add_done_callback(ended)


def wait_for(
    future: concurrent.futures.Future[Any], timeout: float | None, key: str
) -> concurrent.futures.Future[Any]:
    """Wait for a future; ``TimedOut`` (after abandoning it) when the deadline passes. A real
    Ctrl-C interrupts the wait itself, so it is never mistaken for the call's own exception."""
    done, _ = concurrent.futures.wait([future], timeout)
    if not done:
        future.cancel()  # cancels a coroutine on the loop thread; a running thread goes on
        abandon(key, future)
        raise TimedOut(key)
    return future


def in_thread(
    fn: Callable[[], Any], timeout: float | None, key: str
) -> concurrent.futures.Future[Any]:
    """``fn()`` on a worker thread; the finished future (its ``result()`` re-raises what ``fn``
    raised), or ``TimedOut``/``Unavailable``."""
    check_capacity(key)
    context = contextvars.copy_context()  # callbacks and tracing see the caller's context
    return wait_for(THREADS.submit(context.run, fn), timeout, key)


def on_loop(
    coroutine: Coroutine[Any, Any, Any], timeout: float | None, key: str
) -> concurrent.futures.Future[Any]:
    """An async-only call from sync code, on the background loop; as ``in_thread``."""
    try:
        check_capacity(key)
    except Unavailable:
        coroutine.close()
        raise
    return wait_for(LOOP.submit(coroutine), timeout, key)


def check_capacity(key: str) -> None:
    """Raise ``Unavailable`` when this key has too many calls still hanging."""
    with _lock:
        if _hanging[key] >= MAX_ABANDONED:
            raise Unavailable(key, _hanging[key])
