"""``LoopThread``: one event loop on a daemon thread of its own, the one helper wherever sync code
needs a loop beside it. Coroutines are handed to it from any thread and come back as
``concurrent.futures.Future``s, which carry their result or what they raised.

Its users: MCP sessions (``tools.mcp.sessions``, a loop that holds the sessions), an async call
made from code already under a loop (``tools.mcp.loops.run_sync``), async-only tools called
from sync code under a deadline (``nodes.calling.deadlines``), and the worker pool's one-process
case (``reactgraph.app.pool``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """An event loop on a daemon thread named ``name``, started by ``start()`` or the first
    ``submit()``. ``stop()`` ends it as ``asyncio.run`` ends its loop: what still runs is
    cancelled and awaited, the async generators and the default executor are shut down, the
    loop is closed. A daemon thread never keeps the process from exiting, so a coroutine that
    hangs (one that ignores its cancellation, or blocks the loop) holds up ``stop()`` for its
    ``timeout`` at the most. A ``SystemExit`` or ``KeyboardInterrupt`` raised by a coroutine
    goes to its future; the loop goes on. Also a context manager: ``with LoopThread(...)``
    starts it and stops it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._lock = threading.Lock()  # orders the submissions before the stop

    @property
    def stopped(self) -> bool:
        """Whether ``stop()`` was called: the loop takes no more coroutines."""
        return self._stopping

    def start(self) -> LoopThread:
        """Start the loop and its thread, unless started already; RuntimeError once stopped."""
        with self._lock:
            self._start()
        return self

    def _start(self) -> asyncio.AbstractEventLoop:
        if self._stopping:
            raise RuntimeError(f"the {self.name} event loop is stopped")
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._serve, args=(self._loop,), name=self.name, daemon=True
            )
            self._thread.start()
        return self._loop

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coroutine`` on the loop (starting it if need be). Cancelling the future cancels
        the coroutine. RuntimeError once stopped (the coroutine is closed, never run)."""
        with self._lock:
            try:
                loop = self._start()
            except RuntimeError:
                coroutine.close()
                raise
            return asyncio.run_coroutine_threadsafe(coroutine, loop)

    def call_soon(self, callback: Callable[..., object], *args: Any) -> None:
        """Call ``callback(*args)`` on the loop's thread, soon; nothing once stopped."""
        with self._lock:
            if not self._stopping and self._loop is not None:
                self._loop.call_soon_threadsafe(callback, *args)

    def stop(self, timeout: float | None = 10) -> bool:
        """End the loop (see the class) and wait ``timeout`` seconds at the most (None: until it
        has ended); whether it ended. Called again, it only waits. Not from the loop's thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            if thread is not None and thread is threading.current_thread():
                raise RuntimeError(f"the {self.name} event loop cannot stop itself")
            first, self._stopping = not self._stopping, True
            if loop is None or thread is None:
                return True
            if first:  # once: a second stop would cut its clean-up short
                loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        return not thread.is_alive()

    def __enter__(self) -> LoopThread:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self._stopping:
            try:
                loop.run_forever()
            except BaseException as error:  # a coroutine's SystemExit: its future has it
                logger.warning("%r on the %s event loop; it goes on", error, self.name)
        try:
            _finish(loop)
        except BaseException as error:  # the loop is closed all the same
            logger.warning("the %s event loop did not end cleanly: %r", self.name, error)
        finally:
            loop.close()


def _finish(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does after its coroutine: cancel what is left and wait for it, close
    the async generators, then the default executor."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
