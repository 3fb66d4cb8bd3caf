"""One server's kept session (``Held``), for ``MCPSessions``: opened by a task of its own on
the sessions' event loop, and opened again at the next call after it broke."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import Any, cast

import anyio
from langchain_core.tools import BaseTool, ToolException
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools as adapters_load_mcp_tools

from reactgraph.tools.mcp.errors import MCPConnectionError, is_disconnect, leaf
from reactgraph.tools.mcp.loops import bounded

__all__ = ["Held"]

logger = logging.getLogger(__name__)


class Held:
    """One server's kept session, on the sessions' own event loop: opened by a task of its own
    (an MCP session must close in the task that opened it), opened again after it broke.
    Everything here runs on that one loop, so it needs no locks."""

    def __init__(self, name: str, connection: dict[str, Any], prefix: bool, label: str) -> None:
        self.client = MultiServerMCPClient({name: connection}, tool_name_prefix=prefix)  # type: ignore[dict-item]
        self.name, self.prefix, self.label = name, prefix, label
        self.stdio = connection["transport"] == "stdio"
        self.tools: dict[str, BaseTool] = {}  # the adapters' tools bound to the live session
        self.live = False  # the session is open and its tools listed
        self.generation = 0  # counts the sessions opened, so a stale failure breaks no new one
        self.task: asyncio.Task[BaseException | None] | None = None  # ends with its session
        self.stop: asyncio.Event | None = None
        self.reopening: asyncio.Task[list[BaseTool]] | None = None

    def broke(self, generation: int) -> None:
        if generation == self.generation:
            self.live = False

    async def open(self, timeout: float | None) -> list[BaseTool]:
        ready: asyncio.Future[list[BaseTool]] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        self.generation += 1
        generation = self.generation

        async def hold() -> BaseException | None:
            """Open the session and keep it until ``stop``; what ended it, if not ``stop``."""
            try:
                async with self.client.session(self.name) as session:
                    tools = await adapters_load_mcp_tools(
                        session, server_name=self.name, tool_name_prefix=self.prefix
                    )
                    ready.set_result(tools)
                    await stop.wait()
            except BaseException as exc:
                if ready.done():
                    return exc
                elif isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(exc)
            finally:
                self.broke(generation)
            return None

        self.task, self.stop = asyncio.create_task(hold()), stop
        try:
            tools = await bounded(lambda: asyncio.shield(ready), timeout, self.label)
        except BaseException:
            await self.close(at_once=True)
            if ready.done() and not ready.cancelled():
                ready.exception()  # retrieved: asyncio logs an unretrieved one
            raise
        self.tools = {tool.name: tool for tool in tools}
        self.live = True
        return tools

    async def reopen(self, timeout: float | None) -> list[BaseTool]:
        await self.close()
        return await self.open(timeout)

    async def close(self, *, at_once: bool = False) -> None:
        self.live = False
        task, self.task = self.task, None
        if task is None:
            return
        if at_once:
            task.cancel()
        elif self.stop is not None:
            self.stop.set()
        # A broken session may fail to close; it is gone either way.
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(task, 10)

    async def _live(self, timeout: float | None) -> None:
        """Back once the session is live: a broken one is opened anew, by one reopening that
        the calls meanwhile all wait for; a failed reopening raises MCPConnectionError."""
        if self.live:
            return
        if self.reopening is None or self.reopening.done():
            logger.info("MCP server %r: its session broke; opening a new one", self.name)
            self.reopening = asyncio.create_task(self.reopen(timeout))
        try:  # shielded: a call that times out meanwhile leaves the reopening to finish
            await asyncio.shield(self.reopening)
        except ValueError as exc:
            raise MCPConnectionError(str(exc)) from None

    async def call(self, name: str, timeout: float | None, arguments: dict[str, Any]) -> Any:
        await self._live(timeout)
        tool, generation, session = self.tools.get(name), self.generation, self.task
        if tool is None:
            raise ToolException(f"MCP server {self.name!r} no longer offers {name!r}")
        try:
            if self.stdio or session is None:  # the stdio client fails pending calls itself
                return await cast(Any, tool).coroutine(**arguments)
            return await _unless_ended(cast(Any, tool).coroutine(**arguments), session)
        except asyncio.CancelledError:
            # A call given up on (a timeout): over HTTP the client does not notice a server
            # that died mid-call, so the session is opened afresh (cheap) before the next call.
            if not self.stdio:
                self.broke(generation)
            raise
        except Exception as exc:
            if is_disconnect(leaf(exc)):
                self.broke(generation)
            raise


async def _unless_ended(call: Awaitable[Any], session: asyncio.Task[BaseException | None]) -> Any:
    """``await call``, unless ``session`` ends first: then what ended it (a disconnect, as the
    tools describe it). The streamable HTTP client ends a session whose server is gone at its
    next request (the connection fails), but leaves that request waiting for an answer."""
    running = asyncio.ensure_future(call)
    try:
        await asyncio.wait({running, session}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        running.cancel()
        raise
    if running.done():
        return running.result()
    running.cancel()
    await asyncio.wait({running})
    if not running.cancelled():
        running.exception()  # retrieved, not raised: cut off, it says nothing new
    ended = None if session.cancelled() else session.result()
    cause = leaf(ended) if ended is not None else None
    if cause is None or not is_disconnect(cause):
        cause = anyio.BrokenResourceError()  # "the connection to the server broke"
    raise cause
