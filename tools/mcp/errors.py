"""How MCP failures read: the connection error the tools raise, and one-line descriptions of
what the SDK, httpx and anyio raise (often wrapped in exception groups by the SDK's task
groups), so a model or a person reads one plain line instead of a traceback."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable
from typing import Any

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


# What an McpError's code means, by the code.
_MCP_CODES = {
    CONNECTION_CLOSED: "the server closed the connection (did it exit? its stderr may say why)",
    SESSION_TERMINATED: "HTTP 404: no MCP session or endpoint at this URL (FastMCP serves /mcp)",
}


def _not_started(error: FileNotFoundError) -> str | None:
    return f"cannot start {error.filename!r}: {error.strerror}" if error.filename else None


def _status(error: httpx.HTTPStatusError) -> str:
    return f"HTTP {error.response.status_code} from {error.request.url}"


# The causes known by the error's type, first match first: the words for one, or None when
# this one is not known after all (the next entry, or the error itself, is shown).
_KNOWN: tuple[tuple[type | types.UnionType, Callable[[Any], str | None]], ...] = (
    (McpError, lambda error: _MCP_CODES.get(error.error.code)),
    (FileNotFoundError, _not_started),
    (httpx.ConnectError | ConnectionRefusedError, lambda error: f"cannot connect: {error}"),
    (httpx.HTTPStatusError, _status),
    (
        anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream,
        lambda error: "the connection to the server broke",
    ),
)


def describe(error: BaseException) -> str:
    """What went wrong, for a person: the cause in words where it is known, else the error."""
    for kinds, words in _KNOWN:
        said = words(error) if isinstance(error, kinds) else None
        if said:
            return said
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
