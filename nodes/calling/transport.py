"""The HTTP clients behind ``chat_model``: the async one keeps one connection pool per event
loop, over the OpenAI SDK's aiohttp transport when it is installed (``pip install
'reactgraph[aiohttp]'``), else over httpx with connection limits sized to the expected
concurrency. Both hand a plain reply to a streamed request on as the event stream it stands for
(``eventstream``).

A streamed reply's connection is kept for the next request. The SDK's async stream reads the
body to its end after the ``[DONE]`` event (for at most 0.1 s); its sync stream stops at
``[DONE]`` and closes the response, and with it an HTTP/1.1 connection, so every sync streamed
call would open a new one (with its TCP and TLS handshakes). The sync client therefore reads
the rest of the body itself, as the SDK does in async (``EndedStream``).

A connection pool belongs to the event loop that opened it. langchain-openai shares one default
client among every ChatOpenAI with the same URL and timeout, so a second ``asyncio.run`` in the
same process fails with "Event loop is closed". Keeping a pool per loop makes a model usable from
any number of loops, one after another or at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib.util
import logging
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from typing import Any, Literal

import openai

from reactgraph.nodes.calling import eventstream
from reactgraph.nodes.running import deadlines
from reactgraph.nodes.vocabulary.bounded import remembered

logger = logging.getLogger(__name__)

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


# The last event, at the start of a line: a reply's own text, JSON in an event, has no raw
# line break, so "data: [DONE]" inside it is never taken for the end.
DONE_EVENTS = (b"\ndata: [DONE]", b"\ndata:[DONE]")
END_WAIT_S = 0.1  # as the SDK's async stream waits for the end of a body after [DONE]
MOST_ENDED_BYTES = 65536  # more after [DONE] than an end: the connection is closed instead
MOST_SLOW_SERVERS = 256
_slow: dict[str, None] = {}  # servers seen not to end a body promptly after [DONE]
_slow_lock = threading.Lock()


def forget() -> None:
    """Forget which servers were seen to leave a streamed body open (for tests)."""
    with _slow_lock:
        _slow.clear()


def _server(request: Any) -> str:
    return f"{request.url.scheme}://{request.url.host}:{request.url.port}"


class EndedStream:
    """A streamed response body whose end is read once its ``[DONE]`` event has been, when the
    response is closed, so that its HTTP/1.1 connection goes back to the pool. Closed before
    ``[DONE]`` (a call abandoned at its deadline), the connection is closed with it, and the
    server stops generating. The end is read on a worker thread for at most ``END_WAIT_S``: a
    server that leaves a body open after ``[DONE]`` delays no call, and its bodies are closed
    at once from then on."""

    def __init__(self, stream: Any, server: str) -> None:
        self._stream = stream
        self._chunks: Iterator[bytes] = iter(stream)
        self._server = server
        self._tail = b"\n"  # the body's start is a line's
        self._done = self._ended = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            if not self._done:
                seen = self._tail + chunk
                self._done = any(done in seen for done in DONE_EVENTS)
                self._tail = seen[-len(DONE_EVENTS[0]) :]
            yield chunk
        self._ended = True

    def _read_end(self) -> None:
        read = 0
        try:
            for chunk in self._chunks:
                read += len(chunk)
                if read > MOST_ENDED_BYTES:
                    break
        finally:
            self._stream.close()

    def close(self) -> None:
        if self._ended or not self._done:
            self._stream.close()
            return
        self._ended = True
        ending = deadlines.THREADS.submit(self._read_end)
        try:
            ending.result(END_WAIT_S)
        except concurrent.futures.TimeoutError:
            with _slow_lock:
                remembered(_slow, self._server, None, MOST_SLOW_SERVERS)
            logger.warning(
                "%s did not end a streamed reply within %g s of its [DONE]: its streamed replies "
                "are closed at [DONE] from now on (a new connection for each)",
                self._server,
                END_WAIT_S,
            )
        except Exception:  # the reply is whole: only its connection is lost
            logger.debug("reading the end of a streamed reply failed", exc_info=True)


@functools.cache
def _ended_stream_type(library: str) -> type[Any] | None:
    """``EndedStream`` as a byte stream of the response's HTTP library (httpx2 under the
    OpenAI SDK 3, httpx under 2), which checks the type of what it iterates."""
    base = getattr(sys.modules.get(library), "SyncByteStream", None)
    return type("EndedStream", (EndedStream, base), {}) if isinstance(base, type) else None


def keeps_connection(request: Any, response: Any) -> bool:
    """Whether the end of this streamed response is to be read (``EndedStream``)."""
    if response.http_version != "HTTP/1.1" or response.status_code != 200:
        return False
    if "event-stream" not in response.headers.get("content-type", ""):
        return False
    with _slow_lock:
        return _server(request) not in _slow


class SyncClient(openai.DefaultHttpxClient):
    """The sync client: connections for ``concurrency`` requests at once, kept alive, streamed
    replies' included (``EndedStream``)."""

    def __init__(self, concurrency: int, **kwargs: Any) -> None:
        super().__init__(limits=connection_limits(concurrency), **kwargs)

    def send(self, request: Any, **kwargs: Any) -> Any:
        response = super().send(request, **kwargs)
        ended = _ended_stream_type(type(response).__module__.partition(".")[0])
        if ended is not None and keeps_connection(request, response):
            response.stream = ended(response.stream, _server(request))
            return response
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
