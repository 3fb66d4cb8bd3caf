"""How MCP failures read: the connection error the tools raise, and one-line descriptions of
what the SDK, httpx and anyio raise (often wrapped in exception groups by the SDK's task
groups), so a model or a person reads one plain line instead of a traceback."""

from __future__ import annotations

import asyncio

import anyio
import httpx
from mcp.shared.exceptions import McpError
from mcp.types import CONNECTION_CLOSED

__all__ = ["MCPConnectionError", "describe", "is_disconnect", "leaf", "one_line"]

SESSION_TERMINATED = 32600  # what the SDK's streamable HTTP client makes of an HTTP 404


class MCPConnectionError(ConnectionError):
    """An MCP server could not be reached, or went away during a call."""


def one_line(text: str) -> str:
    """``text`` with its whitespace runs (newlines included) collapsed to single spaces."""
    return " ".join(str(text).split())


def leaf(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(error, BaseExceptionGroup):
        inner = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        error = (inner or list(error.exceptions))[0]
    return error


def is_disconnect(error: BaseException) -> bool:
    """Whether ``error`` (a leaf) means the server is unreachable or the connection broke."""
    if isinstance(error, McpError):
        return error.error.code in (CONNECTION_CLOSED, SESSION_TERMINATED)
    return isinstance(
        error,
        OSError
        | httpx.TransportError
        | anyio.ClosedResourceError
        | anyio.BrokenResourceError
        | anyio.EndOfStream,
    )


def describe(error: BaseException) -> str:
    """What went wrong, for a person: the cause in words where it is known, else the error."""
    if isinstance(error, McpError) and error.error.code == CONNECTION_CLOSED:
        return "the server closed the connection (did it exit? its stderr may say why)"
    if isinstance(error, McpError) and error.error.code == SESSION_TERMINATED:
        return "HTTP 404: no MCP session or endpoint at this URL (FastMCP serves /mcp)"
    if isinstance(error, FileNotFoundError) and error.filename:
        return f"cannot start {error.filename!r}: {error.strerror}"
    if isinstance(error, httpx.ConnectError | ConnectionRefusedError):
        return f"cannot connect: {error}"
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code} from {error.request.url}"
    if isinstance(error, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream):
        return "the connection to the server broke"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
