"""One body per node, run by a sync or an async shell.

A node body that does I/O is a generator: it yields an effect (a model call, a tool call, a
pause, a notes read) and receives its result, or has its exception thrown in. ``drive`` performs
effects synchronously for ``invoke``; ``adrive`` awaits them for ``ainvoke``. Every decision lives
in the body, once, so the two paths cannot drift: the only sync/async pairs are the effects'
own ``run``/``arun`` shells around the I/O.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
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
    """Run a body to its result, performing each effect synchronously."""
    try:
        effect = next(body)
        while True:
            try:
                result = effect.run()
            except Exception as error:
                effect = body.throw(error)
            else:
                effect = body.send(result)
    except StopIteration as done:
        return done.value


async def adrive(body: Body[T]) -> T:
    """Run a body to its result, awaiting each effect."""
    try:
        effect = next(body)
        while True:
            try:
                result = await effect.arun()
            except Exception as error:
                effect = body.throw(error)
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
