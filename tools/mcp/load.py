"""Loading MCP tools with a session per call: ``load_mcp_tools`` and ``aload_mcp_tools``.

Each call of these tools opens a fresh session (the adapters' way: a stdio server is started
for the call and stopped after it; seconds a call for a Python server), so a tool belongs to no
event loop and survives a server that restarts. ``MCPSessions`` keeps one session instead.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient

from reactgraph.tools.mcp.config import normalize_servers, origin_of, server_label, where
from reactgraph.tools.mcp.errors import one_line
from reactgraph.tools.mcp.loops import bounded, check_positive, run_sync
from reactgraph.tools.mcp.names import MAX_NAME_CHARS, callable_name, clash_key
from reactgraph.tools.mcp.tool import wrap

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "aload_mcp_tools",
    "load_mcp_tools",
    "named",
]

DEFAULT_TIMEOUT = 30.0
"""Seconds one server may take to start, answer the handshake and list its tools."""
DEFAULT_CALL_TIMEOUT = 120.0
"""Seconds one tool call may take, session and all, before it raises ``TimeoutError``."""


async def _load_server(
    name: str, connection: dict[str, Any], prefix: bool, timeout: float | None, origin: str
) -> list[BaseTool]:
    client = MultiServerMCPClient({name: connection}, tool_name_prefix=prefix)  # type: ignore[dict-item]
    label = server_label(origin, name, connection)
    return await bounded(lambda: client.get_tools(server_name=name), timeout, label)


def named(
    connections: Mapping[str, Mapping[str, Any]],
    loaded: list[list[BaseTool]],
    prefix: bool,
    origin: str,
) -> list[tuple[str, BaseTool, str]]:
    """(server, tool, callable name) in config order. Each name is mended to one a model can
    write (see ``callable_name``); ValueError when a name cannot be, or two tools would share
    one (names that differ only in case, hyphens or spaces count as the same)."""
    triples: list[tuple[str, BaseTool, str]] = []
    owner: dict[str, tuple[str, str]] = {}  # clash key -> (server, name as offered)
    for name, tools in zip(connections, loaded, strict=True):
        for tool in tools:
            mended = callable_name(tool.name)
            if mended is None:
                raise ValueError(
                    one_line(
                        f"{origin}MCP server {name!r} offers a tool named {tool.name[:80]!r}, "
                        f"which cannot be mended into a name a model can write (letters, "
                        f"digits and _ . -, at most {MAX_NAME_CHARS} characters)"
                    )
                )
            key = clash_key(mended)
            if key in owner:
                raise ValueError(
                    one_line(_clash(origin, prefix, mended, owner[key], (name, tool.name)))
                )
            owner[key] = (name, tool.name)
            triples.append((name, tool, mended))
    return triples


def _clash(
    origin: str, prefix: bool, mended: str, first: tuple[str, str], second: tuple[str, str]
) -> str:
    """Why two tools cannot both be loaded, and what would help (if anything does)."""
    (server_a, offered_a), (server_b, offered_b) = first, second
    spelled = "" if offered_a == offered_b == mended else f" (as {offered_a!r} and {offered_b!r})"
    if server_a == server_b:
        # A prefix is the server's name: it would name both tools the same again.
        return (
            f"{origin}MCP server {server_a!r} offers two tools named {mended!r}{spelled}; "
            f"prefix=True cannot tell them apart: rename one on the server"
        )
    both = f"both server {server_a!r} and server {server_b!r}"
    if prefix:
        return (
            f"{origin}MCP tool name {mended!r} is offered by {both}{spelled}, even with "
            f"their server's name as prefix: rename one of the servers"
        )
    return (
        f"{origin}MCP tool name {mended!r} is offered by {both}{spelled}; "
        f"load with prefix=True to name them <server>_<tool>"
    )


async def aload_mcp_tools(
    servers: str | os.PathLike[str] | Mapping[str, Any],
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    prefix: bool = False,
) -> list[BaseTool]:
    """The tools of every server in ``servers``, in config order (servers load concurrently).

    ``timeout`` bounds each server's start, handshake and tool listing; ``call_timeout``
    each later tool call (None: no bound). ``prefix=True`` names each tool
    ``<server>_<tool>``. Raises ValueError (one line, naming the file or server) on a bad
    config, a server that fails or does not answer within ``timeout``, a tool name that
    cannot be mended into one a model can write, or two tools of the same name.
    """
    check_positive(timeout, "timeout")
    check_positive(call_timeout, "call_timeout")
    origin = origin_of(servers)
    connections = normalize_servers(servers)
    results = await asyncio.gather(
        *(
            _load_server(name, connection, prefix, timeout, origin)
            for name, connection in connections.items()
        ),
        return_exceptions=True,
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [
        wrap(tool, name, where(connections[name]), call_timeout, name=mended)
        for name, tool, mended in named(connections, results, prefix, origin)  # type: ignore[arg-type]
    ]


def load_mcp_tools(
    servers: str | os.PathLike[str] | Mapping[str, Any],
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    prefix: bool = False,
) -> list[BaseTool]:
    """``aload_mcp_tools`` for sync code (it may be called with an event loop running, too)."""
    return run_sync(
        lambda: aload_mcp_tools(servers, timeout=timeout, call_timeout=call_timeout, prefix=prefix)
    )
