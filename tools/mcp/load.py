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
from reactgraph.tools.mcp.loops import bounded, check_positive, run_sync
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
) -> list[tuple[str, BaseTool]]:
    """(server, tool) pairs in config order; ValueError when two tools share a name."""
    pairs: list[tuple[str, BaseTool]] = []
    owner: dict[str, str] = {}
    for name, tools in zip(connections, loaded, strict=True):
        for tool in tools:
            if tool.name in owner:
                hint = "" if prefix else "; load with prefix=True to name them <server>_<tool>"
                raise ValueError(
                    f"{origin}MCP tool name {tool.name!r} is offered by both server "
                    f"{owner[tool.name]!r} and server {name!r}{hint}"
                )
            owner[tool.name] = name
            pairs.append((name, tool))
    return pairs


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
    config, a server that fails or does not answer within ``timeout``, or two tools of the
    same name.
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
        wrap(tool, name, where(connections[name]), call_timeout)
        for name, tool in named(connections, results, prefix, origin)  # type: ignore[arg-type]
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
