"""Event loops and deadlines: async MCP calls run from sync code, and bounded in time.

The adapters' tools are async only, and MCP sessions belong to the event loop that opened them;
these helpers let the same tools serve sync callers, async callers and callers that are sync
code running under an event loop (a notebook, a sync tool called from async code).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from reactgraph.tools.loopthread import LoopThread
from reactgraph.tools.mcp.errors import describe, leaf, one_line

__all__ = ["Expired", "bounded", "cancelling", "check_positive", "run_sync", "within"]

T = TypeVar("T")


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run ``make()`` to completion on a new event loop: on this thread when it has no running
    loop, else on a helper thread (a sync call made from async code, a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(make))
    with LoopThread("mcp-sync") as loop:
        return loop.submit(_awaited(make)).result()


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    # asyncio.run wants a coroutine; ``make`` may return any awaitable.
    return await make()


def cancelling() -> bool:
    """Whether the current task is being cancelled (by a caller's timeout, say)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class Expired(TimeoutError):
    """``within``'s deadline passed before the call answered."""


async def within(make: Callable[[], Awaitable[T]], timeout: float | None) -> T:
    """``await make()`` within ``timeout`` seconds (None: no bound). The one deadline of every MCP
    wait: its expiry raises ``Expired``; a caller's own cancellation stays a cancellation even
    when the SDK's task groups wrap it in an ExceptionGroup; any other failure is raised as is."""
    try:
        async with asyncio.timeout(timeout) as deadline:
            try:
                return await make()
            except BaseException:
                if cancelling():
                    raise asyncio.CancelledError from None
                raise
    except asyncio.CancelledError:
        raise
    except BaseException:
        if deadline.expired():
            raise Expired from None
        raise


async def bounded(make: Callable[[], Awaitable[T]], timeout: float | None, label: str) -> T:
    """``await make()`` within ``timeout``; a failure or the timeout as a one-line ValueError."""
    try:
        return await within(make, timeout)
    except Expired:
        raise ValueError(
            one_line(f"{label}: no answer to the handshake within {timeout:g} s")
        ) from None
    except Exception as exc:
        raise ValueError(one_line(f"{label}: {describe(leaf(exc))}")) from None


def check_positive(value: float | None, what: str) -> None:
    """ValueError unless ``value`` is None or a positive, finite number of seconds."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number of seconds or None, got {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")
