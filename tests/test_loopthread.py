"""``LoopThread``, the one event loop on a thread: it runs coroutines handed to it from sync code
and gives back what they return or raise; ``stop()`` cancels what is left and ends the thread,
and a coroutine that will not end holds it up no longer than its timeout."""

from __future__ import annotations

import asyncio
import threading

import pytest

from reactgraph.tools.loopthread import LoopThread

WAIT_S = 30  # only a broken helper waits this long


def threads_named(name: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == name]


def test_it_starts_runs_a_coroutine_and_stops() -> None:
    loop = LoopThread("test-loop")
    assert threads_named("test-loop") == []  # nothing runs before it is used

    async def where() -> str:
        await asyncio.sleep(0)
        return threading.current_thread().name

    assert loop.submit(where()).result(WAIT_S) == "test-loop"
    (thread,) = threads_named("test-loop")
    called = threading.Event()
    loop.call_soon(lambda: threading.current_thread() is thread and called.set())
    assert called.wait(WAIT_S)  # on the loop's thread
    assert thread.daemon and thread is not threading.current_thread()
    assert loop.stop(WAIT_S) and not thread.is_alive() and loop.stopped
    assert loop.stop(WAIT_S)  # again: nothing more to do
    loop.call_soon(pytest.fail, "called after the stop")  # nothing happens
    late = where()
    with pytest.raises(RuntimeError, match="stopped"):
        loop.submit(late)
    assert late.cr_frame is None  # closed, so never "never awaited"


def test_a_context_manager_and_a_loop_never_started() -> None:
    assert LoopThread("never").stop(0)
    with LoopThread("test-with") as loop:
        assert loop.submit(asyncio.sleep(0, "ok")).result(WAIT_S) == "ok"
    assert threads_named("test-with") == []


def test_what_a_coroutine_raises_comes_back_and_the_loop_goes_on() -> None:
    async def fail(error: BaseException) -> None:
        raise error

    with LoopThread("test-errors") as loop:
        with pytest.raises(ValueError, match="bad input"):
            loop.submit(fail(ValueError("bad input"))).result(WAIT_S)
        with pytest.raises(SystemExit):  # it stops run_forever: the loop starts again
            loop.submit(fail(SystemExit(3))).result(WAIT_S)
        assert loop.submit(asyncio.sleep(0, "still here")).result(WAIT_S) == "still here"


def test_stop_cancels_a_coroutine_that_waits_forever() -> None:
    loop = LoopThread("test-hung")
    started = threading.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    future = loop.submit(forever())
    assert started.wait(WAIT_S)
    assert loop.stop(WAIT_S)
    assert future.cancelled() and threads_named("test-hung") == []


def test_a_coroutine_that_refuses_to_end_does_not_block_stop() -> None:
    loop = LoopThread("test-stubborn")
    started, cancelled = threading.Event(), threading.Event()
    gates: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def stubborn() -> str:
        gate = asyncio.Event()
        gates.append((asyncio.get_running_loop(), gate))
        started.set()
        while not gate.is_set():
            try:
                await gate.wait()
            except asyncio.CancelledError:
                cancelled.set()  # ignored: it goes on waiting
        return "released"

    future = loop.submit(stubborn())
    assert started.wait(WAIT_S)
    assert not loop.stop(0)  # returns at once; the thread is left to end by itself
    assert cancelled.wait(WAIT_S)
    (thread,) = threads_named("test-stubborn")
    assert thread.daemon and thread.is_alive()  # a daemon thread never keeps the process up
    running, gate = gates[0]
    running.call_soon_threadsafe(gate.set)
    assert loop.stop(WAIT_S) and not thread.is_alive()
    assert future.result(WAIT_S) == "released"
