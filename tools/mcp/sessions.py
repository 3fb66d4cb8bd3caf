"""``MCPSessions``: the tools of every server over one kept session per server, held on an
event loop thread of their own so that sync code and any event loop can call them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from langchain_core.tools import BaseTool

from reactgraph.tools.loopthread import LoopThread
from reactgraph.tools.mcp.config import normalize_servers, origin_of, server_label, where
from reactgraph.tools.mcp.errors import MCPConnectionError
from reactgraph.tools.mcp.held import Held
from reactgraph.tools.mcp.load import DEFAULT_CALL_TIMEOUT, DEFAULT_TIMEOUT, named
from reactgraph.tools.mcp.loops import check_positive
from reactgraph.tools.mcp.tool import Call, wrap

__all__ = ["MCPSessions"]

T = TypeVar("T")


class MCPSessions:
    """The tools of every server in ``servers`` over one kept session per server.

    ``load_mcp_tools`` opens a session for each call: a new process per call over stdio (a
    second or more), a new HTTP session over HTTP. These tools share one session per server
    (milliseconds a call, and the server keeps its state between calls), held on an event loop
    thread of their own, so they run from sync code and from any event loop alike. A session
    that breaks (the server died) is opened again at the next call. ``close()`` (or the end of
    a ``with`` block) ends the sessions and their servers.

    The arguments and the tools' behaviour are those of ``load_mcp_tools``; a call that cannot
    reopen its session raises ``ConnectionError``.
    """

    def __init__(
        self,
        servers: str | os.PathLike[str] | Mapping[str, Any],
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        prefix: bool = False,
    ) -> None:
        check_positive(timeout, "timeout")
        check_positive(call_timeout, "call_timeout")
        origin = origin_of(servers)
        connections = normalize_servers(servers)
        self._timeout = timeout
        self._loop = LoopThread("mcp").start()
        self._held = {
            name: Held(name, connection, prefix, server_label(origin, name, connection))
            for name, connection in connections.items()
        }
        try:
            loaded = self._submit(self._open_all()).result()
            pairs = named(connections, loaded, prefix, origin)
        except BaseException:
            self.close()
            raise
        self.tools: list[BaseTool] = [
            wrap(
                tool,
                name,
                where(connections[name]),
                call_timeout,
                self._forward(self._held[name], tool.name),
                name=mended,
            )
            for name, tool, mended in pairs
        ]

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return self._loop.submit(coroutine)

    async def _open_all(self) -> list[list[BaseTool]]:
        results = await asyncio.gather(
            *(held.open(self._timeout) for held in self._held.values()), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results  # type: ignore[return-value]

    def _forward(self, held: Held, name: str) -> Call:
        """A coroutine function that runs the tool ``name`` on the held session's loop."""

        async def call(**arguments: Any) -> Any:
            if self._loop.stopped:
                raise MCPConnectionError(f"MCP server {held.name!r}: its sessions are closed")
            future = self._submit(held.call(name, self._timeout, arguments))
            return await asyncio.wrap_future(future)

        return call

    def close(self) -> None:
        """End every session (and the servers a stdio session started). Idempotent."""
        if self._loop.stopped:
            return

        async def close_all() -> None:
            await asyncio.gather(*(held.close() for held in self._held.values()))

        with contextlib.suppress(Exception):  # closing is best effort
            self._submit(close_all()).result(30)
        self._loop.stop(10)  # what is left is cancelled

    def __enter__(self) -> list[BaseTool]:
        return self.tools

    def __exit__(self, *exc_info: object) -> None:
        self.close()
