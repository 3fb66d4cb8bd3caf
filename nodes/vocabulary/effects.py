"""One body per node, run by a sync or an async shell.

A node body that does I/O is a generator: it yields an effect (a model call, a tool call, a
pause, a notes read) and receives its result, or has its exception thrown in. ``drive`` performs
effects synchronously for ``invoke``; ``adrive`` awaits them for ``ainvoke``. Every decision lives
in the body, once, so the two paths cannot drift: the only sync/async pairs are the effects'
own ``run``/``arun`` shells around the I/O.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Effect(Protocol):
    """Something a node body needs done outside itself."""

    def run(self) -> Any:
        """Do it, blocking."""
        ...

    async def arun(self) -> Any:
        """Do it on the running event loop."""
        ...


Body = Generator[Effect, Any, T]


def drive(body: Body[T]) -> T:
    """Run a body to its result, performing each effect synchronously. An effect's exception
    is thrown into the body; anything else (an interrupt of the process, a task cancelled)
    closes the body first, so its ``finally`` blocks run here, not when it is collected."""
    try:
        effect = next(body)
    except StopIteration as done:
        return done.value
    return _drive_from(body, effect)


def _drive_from(body: Body[T], effect: Effect) -> T:
    """``drive``, from the body's first effect (already yielded)."""
    try:
        while True:
            try:
                result = effect.run()
            except Exception as error:
                effect = body.throw(error)
            except BaseException:
                body.close()
                raise
            else:
                effect = body.send(result)
    except StopIteration as done:
        return done.value


async def adrive(body: Body[T]) -> T:
    """Run a body to its result, awaiting each effect (as ``drive`` does)."""
    try:
        effect = next(body)
    except StopIteration as done:
        return done.value
    return await _adrive_from(body, effect)


async def _adrive_from(body: Body[T], effect: Effect) -> T:
    """``adrive``, from the body's first effect (already yielded)."""
    try:
        while True:
            try:
                result = await effect.arun()
            except Exception as error:
                effect = body.throw(error)
            except BaseException:
                body.close()
                raise
            else:
                effect = body.send(result)
    except StopIteration as done:
        return done.value


@dataclass(frozen=True)
class Pause:
    """Wait before trying again (a retry's backoff)."""

    seconds: float

    def run(self) -> None:
        time.sleep(self.seconds)

    async def arun(self) -> None:
        await asyncio.sleep(self.seconds)


@dataclass(frozen=True)
class Blocking:
    """A short blocking call (a file or store read or write): run inline by the sync shell, on
    a thread by the async one so the event loop never waits on a disk or a database."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()

    def run(self) -> Any:
        return self.fn(*self.args)

    async def arun(self) -> Any:
        return await asyncio.to_thread(self.fn, *self.args)


@dataclass(frozen=True)
class Together:
    """Several bodies run at once (the calls of one reply, ``parallel_tool_calls``). Each is
    first advanced to its first effect here, one after another in their order, so what a body
    does before its first effect (a check, a count) happens in that order; then the rest of
    each runs concurrently: the sync shell drives each on a thread of its own, in a copy of
    the caller's context, the async shell each as a task. The result is every body's result
    in order, or, once all have ended, the first exception (in their order) raised."""

    bodies: tuple[Body[Any], ...]

    def _started(self) -> list[tuple[bool, Any]]:
        """Each body advanced to its first effect: (True, its first effect), or (False, its
        outcome: the result it returned, or the exception it raised, before any effect)."""
        started: list[tuple[bool, Any]] = []
        for body in self.bodies:
            try:
                started.append((True, next(body)))
            except StopIteration as done:
                started.append((False, _Returned(done.value)))
            except Exception as error:
                started.append((False, error))
        return started

    def run(self) -> list[Any]:
        started = self._started()
        outcomes: list[Any] = [value for _, value in started]
        running = [i for i, (going, _) in enumerate(started) if going]
        if running:
            with ThreadPoolExecutor(len(running), thread_name_prefix="reactgraph-call") as pool:
                futures = {
                    i: pool.submit(
                        contextvars.copy_context().run,
                        _drive_from,
                        self.bodies[i],
                        started[i][1],
                    )
                    for i in running
                }
                for i, future in futures.items():
                    error = future.exception()
                    outcomes[i] = error if error is not None else _Returned(future.result())
        return _results(outcomes)

    async def arun(self) -> list[Any]:
        started = self._started()
        outcomes: list[Any] = [value for _, value in started]
        running = [i for i, (going, _) in enumerate(started) if going]
        done = await asyncio.gather(
            *(_adrive_from(self.bodies[i], started[i][1]) for i in running),
            return_exceptions=True,
        )
        for i, outcome in zip(running, done, strict=True):
            outcomes[i] = outcome if isinstance(outcome, BaseException) else _Returned(outcome)
        return _results(outcomes)


@dataclass(frozen=True)
class _Returned:
    """A body's result (told apart from an exception it raised)."""

    value: Any


def _results(outcomes: list[Any]) -> list[Any]:
    """The bodies' results in order, or the first exception among their outcomes raised."""
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return [outcome.value for outcome in outcomes]
