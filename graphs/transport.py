"""The HTTP clients behind ``chat_model``: the async one keeps one connection pool per event
loop, over the OpenAI SDK's aiohttp transport when it is installed (``pip install
'reactgraph[aiohttp]'``), else over httpx with connection limits sized to the expected
concurrency. Both hand a plain reply to a streamed request on as the event stream it stands for
(``eventstream``).

A connection pool belongs to the event loop that opened it. langchain-openai shares one default
client among every ChatOpenAI with the same URL and timeout, so a second ``asyncio.run`` in the
same process fails with "Event loop is closed". Keeping a pool per loop makes a model usable from
any number of loops, one after another or at once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import weakref
from collections.abc import AsyncIterator
from typing import Any, Literal

import openai

from reactgraph import eventstream

Transport = Literal["aiohttp", "httpx"]


def aiohttp_available() -> bool:
    """Whether the SDK's aiohttp transport can be used."""
    return importlib.util.find_spec("aiohttp") is not None


def default_transport() -> Transport:
    """aiohttp when installed (less client CPU per request), else httpx."""
    return "aiohttp" if aiohttp_available() else "httpx"


def connection_limits(concurrency: int) -> Any:
    """The SDK's ``Limits`` for ``concurrency`` requests at once, keeping them all alive."""
    limits_type = type(openai.DEFAULT_CONNECTION_LIMITS)
    size = max(concurrency, 1)
    return limits_type(max_connections=size, max_keepalive_connections=size)


class SyncClient(openai.DefaultHttpxClient):
    """The sync client: connections for ``concurrency`` requests at once, kept alive."""

    def __init__(self, concurrency: int, **kwargs: Any) -> None:
        super().__init__(limits=connection_limits(concurrency), **kwargs)

    def send(self, request: Any, **kwargs: Any) -> Any:
        response = super().send(request, **kwargs)
        if not eventstream.unstreamed(request, response):
            return response
        body = bytearray()
        try:
            for chunk in response.iter_bytes():
                eventstream.gathered(body, chunk)
        finally:
            response.close()
        return eventstream.reply(response, bytes(body))


class LoopLocalClient(openai.DefaultAsyncHttpxClient):
    """An async client for the OpenAI SDK that sends each request through a pool of the
    running event loop's own, made on first use in that loop."""

    def __init__(self, transport: Transport, concurrency: int, **kwargs: Any) -> None:
        if transport == "aiohttp" and not aiohttp_available():
            raise ValueError("the aiohttp transport needs: pip install 'reactgraph[aiohttp]'")
        super().__init__(**kwargs)
        self.transport_name = transport
        self._limits = connection_limits(concurrency)
        self._options = kwargs
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    async def _pool(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            held = self._pools.get(loop)
            if held is None:
                kind = (
                    openai.DefaultAioHttpClient
                    if self.transport_name == "aiohttp"
                    else openai.DefaultAsyncHttpxClient
                )
                pool = kind(limits=self._limits, **self._options)
                held = self._pools[loop] = (pool, self._hold(loop, pool))
                fresh = True
            else:
                fresh = False
        if fresh:
            await anext(held[1])
        return held[0]

    async def _hold(self, loop: asyncio.AbstractEventLoop, pool: Any) -> AsyncIterator[None]:
        """Held open while its loop runs: ``asyncio.run`` closes a loop's async generators before
        the loop itself, so the pool is closed then (an aiohttp session left open would warn
        at exit, and would keep its loop alive)."""
        try:
            yield
        finally:
            with self._lock:
                self._pools.pop(loop, None)
            await pool.aclose()

    async def send(self, request: Any, **kwargs: Any) -> Any:
        response = await (await self._pool()).send(request, **kwargs)
        if not eventstream.unstreamed(request, response):
            return response
        body = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                eventstream.gathered(body, chunk)
        finally:
            await response.aclose()
        return eventstream.reply(response, bytes(body))

    async def aclose(self) -> None:
        """Close the running loop's pool (call it before that loop ends to release it early)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            held = self._pools.pop(loop, None)
        if held is not None:
            await held[1].aclose()
        await super().aclose()
