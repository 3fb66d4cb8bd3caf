"""Tools from MCP servers, loaded with LangChain's ``langchain-mcp-adapters``.

``load_mcp_tools(servers)`` (sync) and ``aload_mcp_tools(servers)`` (async) connect to every
server in ``servers``, list its tools and return them as langchain-core tools. ``servers`` is
the adapters' own connection config (server name -> ``{"transport": "stdio", "command": ...,
"args": [...]}`` or ``{"transport": "streamable_http", "url": ...}``), the
``{"mcpServers": {...}}`` file that Claude Desktop, Cursor and VS Code use, or the path of a
JSON file holding either.

Those tools open a fresh session for each call (the adapters' way: a stdio server is started
for the call and stopped after it; seconds a call for a Python server), so a tool belongs to
no event loop and survives a server that restarts. ``MCPSessions(servers)`` gives the same
tools over one kept session per server instead (milliseconds a call; the server keeps its
state), reopened at the next call after the server died, closed by ``close()`` or a ``with``
block.

On top of the adapters' tool, each tool here:

- runs from sync code too: ``tool.invoke`` runs the call on an event loop of its own;
- takes a plain string when the tool has one argument (``{"text": s}`` for ``shout(text)``),
  or a JSON object in a string;
- answers with text: the content blocks joined (``render_content``), the blocks and any
  structured content kept as the artifact (``{"content": [...], "structured_content": ...,
  "server": name}``);
- gives an error the server reports (``isError``, a JSON-RPC error) back as its text, as the
  adapters do, so the model reads it;
- raises ``TimeoutError`` past ``call_timeout`` seconds and ``MCPConnectionError`` (a
  ``ConnectionError``) when the server cannot be reached or goes away, never an
  ``ExceptionGroup``; cancelling a call (``asyncio.wait_for``) raises ``TimeoutError`` in the
  caller and stops the stdio server the call started.

Bad input raises ``ValueError`` with one line naming the file or server and the fault.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import math
import os
import shlex
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.tools import BaseTool, StructuredTool, ToolException

try:
    import anyio
    import httpx
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools as adapters_load_mcp_tools
    from mcp.shared.exceptions import McpError
    from mcp.types import CONNECTION_CLOSED
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError(
        "reactgraph.tools.mcp needs the MCP packages: pip install 'reactgraph[mcp]'"
    ) from exc

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "MCPConnectionError",
    "MCPSessions",
    "MCPTool",
    "aload_mcp_tools",
    "load_mcp_tools",
    "normalize_servers",
    "render_content",
]

DEFAULT_TIMEOUT = 30.0
"""Seconds one server may take to start, answer the handshake and list its tools."""
DEFAULT_CALL_TIMEOUT = 120.0
"""Seconds one tool call may take, session and all, before it raises ``TimeoutError``."""

_TRANSPORT_KEYS: dict[str, frozenset[str]] = {
    "stdio": frozenset(
        {"command", "args", "env", "cwd", "encoding", "encoding_error_handler", "session_kwargs"}
    ),
    "sse": frozenset(
        {
            "url",
            "headers",
            "timeout",
            "sse_read_timeout",
            "session_kwargs",
            "httpx_client_factory",
            "auth",
        }
    ),
    "streamable_http": frozenset(
        {
            "url",
            "headers",
            "timeout",
            "sse_read_timeout",
            "terminate_on_close",
            "session_kwargs",
            "httpx_client_factory",
            "auth",
        }
    ),
    "websocket": frozenset({"url", "session_kwargs"}),
}
_TRANSPORT_ALIASES = {"http": "streamable_http", "streamable-http": "streamable_http"}
_URL_SCHEMES = {
    "sse": ("http://", "https://"),
    "streamable_http": ("http://", "https://"),
    "websocket": ("ws://", "wss://"),
}


class MCPConnectionError(ConnectionError):
    """An MCP server could not be reached, or went away during a call."""


_SESSION_TERMINATED = 32600  # what the SDK's streamable HTTP client makes of an HTTP 404

T = TypeVar("T")


# ---------------------------------------------------------------------------------------------
# The config


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _read_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(_one_line(f"{path}: cannot read the MCP servers file: {reason}")) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            _one_line(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        ) from None


def _server(name: Any, entry: Any, *, wrapped: bool, origin: str) -> dict[str, Any] | None:
    """One server's connection, checked and completed; None for a server marked disabled."""

    def fault(what: str) -> ValueError:
        return ValueError(_one_line(f"{origin}MCP server {name!r}: {what}"))

    if not isinstance(name, str) or not name.strip():
        raise ValueError(_one_line(f"{origin}MCP server names must be non-empty strings: {name!r}"))
    if not isinstance(entry, Mapping):
        raise fault(f"expected an object with its connection, got {type(entry).__name__}")
    entry = dict(entry)
    if wrapped and entry.pop("disabled", False) is True:
        return None
    transport = entry.pop("transport", None)
    if transport is None and wrapped:
        transport = entry.pop("type", None)  # VS Code's and Cursor's spelling
    if transport is None:
        if "command" in entry:
            transport = "stdio"
        elif "url" in entry:
            transport = "streamable_http"
        else:
            raise fault("no transport, and neither 'command' (stdio) nor 'url' (HTTP) to guess it")
    if not isinstance(transport, str):
        raise fault(f"transport must be a string, got {transport!r}")
    transport = _TRANSPORT_ALIASES.get(transport, transport)
    if transport not in _TRANSPORT_KEYS:
        known = ", ".join(sorted([*_TRANSPORT_KEYS, *_TRANSPORT_ALIASES]))
        raise fault(f"unknown transport {transport!r} (known: {known})")
    allowed = _TRANSPORT_KEYS[transport]
    unknown = sorted(set(entry) - allowed)
    if unknown and wrapped:
        # Other clients' own settings (autoApprove, alwaysAllow, timeout in seconds, ...).
        entry = {key: value for key, value in entry.items() if key in allowed}
    elif unknown:
        raise fault(
            f"unknown key(s) {', '.join(map(repr, unknown))} for transport {transport!r} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )
    if transport == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise fault("a stdio server needs 'command', a non-empty string")
        args = entry.setdefault("args", [])
        if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
            raise fault(f"'args' must be a list of strings, got {args!r}")
        entry["args"] = list(args)
        env = entry.get("env")
        if env is not None and (
            not isinstance(env, Mapping)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise fault("'env' must map names to string values")
    else:
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(_URL_SCHEMES[transport]):
            schemes = " or ".join(_URL_SCHEMES[transport])
            raise fault(f"a {transport} server needs 'url' starting with {schemes}, got {url!r}")
        if "httpx_client_factory" in allowed and entry.get("httpx_client_factory") is None:
            entry["httpx_client_factory"] = _http_client
    return {"transport": transport, **entry}


def normalize_servers(servers: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, dict]:
    """The adapters' connection config for ``servers`` (see the module doc), checked.

    A server may leave out the transport (stdio when it has a ``command``, streamable HTTP
    when it has a ``url``); one in a ``{"mcpServers": {...}}`` config may also spell it
    ``type``, carry other clients' keys (dropped) and be marked ``"disabled": true`` (left
    out). An HTTP server without an ``httpx_client_factory`` gets one that shares one SSL
    context (see ``_http_client``). Raises ValueError with one line on any fault.
    """
    origin = ""
    if isinstance(servers, str | os.PathLike):
        path = Path(servers).expanduser()
        origin = f"{path}: "
        servers = _read_file(path)
    if not isinstance(servers, Mapping):
        raise ValueError(
            _one_line(
                f"{origin}MCP servers must be an object of server name -> connection, "
                f"got {type(servers).__name__}"
            )
        )
    wrapped = "mcpServers" in servers
    if wrapped:  # the file's other settings (Claude Desktop keeps a few) are not servers
        servers = servers["mcpServers"]
        if not isinstance(servers, Mapping):
            raise ValueError(
                f"{origin}'mcpServers' must be an object, got {type(servers).__name__}"
            )
    checked: dict[str, dict] = {}
    for name, entry in servers.items():
        connection = _server(name, entry, wrapped=wrapped, origin=origin)
        if connection is not None:
            checked[name] = connection
    if not checked:
        raise ValueError(f"{origin}no MCP servers configured".strip())
    return checked


_ssl_context: ssl.SSLContext | None = None
_ssl_lock = threading.Lock()


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx.Timeout | None = None,
    auth: httpx.Auth | None = None,
) -> httpx.AsyncClient:
    """The SDK's ``create_mcp_http_client`` with one SSL context shared by every client: an
    httpx client builds its own by default (the CA bundle loaded anew, 0.1 to 0.8 s here),
    which a session per call would pay on each call, plain http:// included."""
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
    return httpx.AsyncClient(
        headers=headers,
        timeout=timeout or httpx.Timeout(30.0, read=300.0),
        auth=auth,
        verify=_ssl_context,
    )


def _where(connection: Mapping[str, Any]) -> str:
    if connection["transport"] == "stdio":
        where = shlex.join([connection["command"], *connection["args"]])
        return where if len(where) <= 120 else where[:117] + "..."
    return str(connection["url"])


# ---------------------------------------------------------------------------------------------
# Errors


def _leaf(error: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(error, BaseExceptionGroup):
        inner = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        error = (inner or list(error.exceptions))[0]
    return error


def _is_disconnect(error: BaseException) -> bool:
    if isinstance(error, McpError):
        return error.error.code in (CONNECTION_CLOSED, _SESSION_TERMINATED)
    return isinstance(
        error,
        OSError
        | httpx.TransportError
        | anyio.ClosedResourceError
        | anyio.BrokenResourceError
        | anyio.EndOfStream,
    )


def _describe(error: BaseException) -> str:
    if isinstance(error, McpError) and error.error.code == CONNECTION_CLOSED:
        return "the server closed the connection (did it exit? its stderr may say why)"
    if isinstance(error, McpError) and error.error.code == _SESSION_TERMINATED:
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


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


# ---------------------------------------------------------------------------------------------
# Running async code from sync code


def _run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run ``make()`` to completion on a new event loop: on this thread when it has no running
    loop, else on a helper thread (a sync call made from async code, a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(make))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(_awaited(make))
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="mcp-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


# ---------------------------------------------------------------------------------------------
# The tools


def render_content(content: Any) -> str:
    """Text for an MCP tool's content: a string as is, text blocks joined by newlines, other
    blocks as a short ``[image: image/png]``-style marker."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, Mapping):
            kind = block.get("type", "block")
            detail = block.get("mime_type") or block.get("url") or ""
            parts.append(f"[{kind}: {detail}]" if detail else f"[{kind}]")
        else:
            parts.append(str(block))
    return "\n".join(parts)


def _string_input(name: str, schema: Mapping[str, Any], text: str) -> dict[str, Any]:
    """The arguments for a plain-string input, by the tool's JSON schema."""
    properties = schema.get("properties") or {}
    if not properties:
        return {}
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        required = set(schema.get("required") or ())
        if isinstance(value, dict) and required <= set(value) <= set(properties):
            return value
    if len(properties) == 1:
        key, spec = next(iter(properties.items()))
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if kind not in (None, "string"):
            try:
                return {key: json.loads(stripped)}
            except ValueError:
                pass
        return {key: text}
    raise ValueError(
        f"{name} takes a JSON object with the keys {', '.join(properties)}; got {text[:80]!r}"
    )


class MCPTool(StructuredTool):
    """A tool of an MCP server (see the module doc). ``server`` names its server in the
    config; ``args_schema`` is the server's JSON schema of the arguments, as a dict."""

    server: str = ""

    def _parse_input(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> str | dict[str, Any]:
        if isinstance(tool_input, str) and isinstance(self.args_schema, Mapping):
            tool_input = _string_input(self.name, self.args_schema, tool_input)
        return super()._parse_input(tool_input, tool_call_id)


Call = Callable[..., Awaitable[tuple[Any, Any]]]


def _wrap(
    tool: BaseTool, server: str, where: str, call_timeout: float | None, call: Call | None = None
) -> MCPTool:
    """Our tool around the adapters' ``tool``; ``call`` runs it (default: its coroutine)."""
    call = call or getattr(tool, "coroutine", None)
    if call is None:  # pragma: no cover - the adapters' tools are all async
        raise TypeError(f"{tool.name} from MCP server {server!r} has no coroutine")

    async def acall(**arguments: Any) -> tuple[str, dict[str, Any]]:
        try:
            async with asyncio.timeout(call_timeout) as deadline:
                try:
                    content, artifact = await call(**arguments)
                except BaseException:
                    if _cancelling():
                        # The stdio transport's shutdown can turn the cancellation into an
                        # ExceptionGroup; a caller's asyncio.wait_for must still see it cancelled.
                        raise asyncio.CancelledError from None
                    raise
        except ToolException as exc:  # the server answered isError: the model reads it
            text = render_content(getattr(exc, "tool_content", None) or str(exc))
            raise ToolException(text) from None
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if deadline.expired():
                raise TimeoutError(
                    f"MCP tool {tool.name!r} (server {server!r}) gave no answer "
                    f"within {call_timeout:g} s"
                ) from None
            if not isinstance(exc, Exception):
                raise
            leaf = _leaf(exc)
            if isinstance(leaf, MCPConnectionError):
                raise leaf from None
            if _is_disconnect(leaf):
                raise MCPConnectionError(
                    _one_line(f"MCP server {server!r} ({where}): {_describe(leaf)}")
                ) from leaf
            if isinstance(leaf, McpError):  # a JSON-RPC error: the model reads it
                raise ToolException(_one_line(leaf.error.message)) from None
            if leaf is exc:
                raise
            raise leaf from None
        blocks = content if isinstance(content, list) else [content]
        extra: dict[str, Any] = {"content": blocks, "server": server}
        if artifact and "structured_content" in artifact:
            extra["structured_content"] = artifact["structured_content"]
        return render_content(content), extra

    def run(**arguments: Any) -> tuple[str, dict[str, Any]]:
        return _run_sync(lambda: acall(**arguments))

    return MCPTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        func=run,
        coroutine=acall,
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata={**(tool.metadata or {}), "mcp_server": server},
        server=server,
    )


# ---------------------------------------------------------------------------------------------
# Loading


async def _load_server(
    name: str, connection: dict[str, Any], prefix: bool, timeout: float | None, origin: str
) -> list[BaseTool]:
    client = MultiServerMCPClient({name: connection}, tool_name_prefix=prefix)  # type: ignore[dict-item]
    label = f"{origin}MCP server {name!r} ({_where(connection)})"
    return await _bounded(lambda: client.get_tools(server_name=name), timeout, label)


async def _bounded(make: Callable[[], Awaitable[T]], timeout: float | None, label: str) -> T:
    """``await make()`` within ``timeout``; a failure or the timeout as a one-line ValueError."""
    try:
        async with asyncio.timeout(timeout) as deadline:
            try:
                return await make()
            except BaseException:
                if _cancelling():
                    raise asyncio.CancelledError from None
                raise
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        if deadline.expired():
            raise ValueError(
                _one_line(f"{label}: no answer to the handshake within {timeout:g} s")
            ) from None
        if not isinstance(exc, Exception):
            raise
        raise ValueError(_one_line(f"{label}: {_describe(_leaf(exc))}")) from None


def _check_positive(value: float | None, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number of seconds or None, got {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")


def _named(
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
    _check_positive(timeout, "timeout")
    _check_positive(call_timeout, "call_timeout")
    origin = f"{Path(servers)}: " if isinstance(servers, str | os.PathLike) else ""
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
        _wrap(tool, name, _where(connections[name]), call_timeout)
        for name, tool in _named(connections, results, prefix, origin)  # type: ignore[arg-type]
    ]


def load_mcp_tools(
    servers: str | os.PathLike[str] | Mapping[str, Any],
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    prefix: bool = False,
) -> list[BaseTool]:
    """``aload_mcp_tools`` for sync code (it may be called with an event loop running, too)."""
    return _run_sync(
        lambda: aload_mcp_tools(servers, timeout=timeout, call_timeout=call_timeout, prefix=prefix)
    )


# ---------------------------------------------------------------------------------------------
# Kept sessions


class _Held:
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
        self.task: asyncio.Task[None] | None = None
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

        async def hold() -> None:
            try:
                async with self.client.session(self.name) as session:
                    tools = await adapters_load_mcp_tools(
                        session, server_name=self.name, tool_name_prefix=self.prefix
                    )
                    ready.set_result(tools)
                    await stop.wait()
            except BaseException as exc:
                if ready.done():
                    pass
                elif isinstance(exc, asyncio.CancelledError):
                    ready.cancel()
                else:
                    ready.set_exception(exc)
            finally:
                self.broke(generation)

        self.task, self.stop = asyncio.create_task(hold()), stop
        try:
            tools = await _bounded(lambda: asyncio.shield(ready), timeout, self.label)
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

    async def call(self, name: str, timeout: float | None, arguments: dict[str, Any]) -> Any:
        if not self.live:
            if self.reopening is None or self.reopening.done():
                self.reopening = asyncio.create_task(self.reopen(timeout))
            try:  # shielded: a call that times out meanwhile leaves the reopening to finish
                await asyncio.shield(self.reopening)
            except ValueError as exc:
                raise MCPConnectionError(str(exc)) from None
        tool, generation = self.tools.get(name), self.generation
        if tool is None:
            raise ToolException(f"MCP server {self.name!r} no longer offers {name!r}")
        try:
            return await tool.coroutine(**arguments)  # type: ignore[misc]
        except asyncio.CancelledError:
            # A call given up on (a timeout): over HTTP the client does not notice a server
            # that died mid-call, so the session is opened afresh (cheap) before the next call.
            if not self.stdio:
                self.broke(generation)
            raise
        except Exception as exc:
            if _is_disconnect(_leaf(exc)):
                self.broke(generation)
            raise


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
        _check_positive(timeout, "timeout")
        _check_positive(call_timeout, "call_timeout")
        origin = f"{Path(servers)}: " if isinstance(servers, str | os.PathLike) else ""
        connections = normalize_servers(servers)
        self._timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()
        self._held = {
            name: _Held(
                name, connection, prefix, f"{origin}MCP server {name!r} ({_where(connection)})"
            )
            for name, connection in connections.items()
        }
        try:
            loaded = self._submit(self._open_all()).result()
            pairs = _named(connections, loaded, prefix, origin)
        except BaseException:
            self.close()
            raise
        self.tools: list[BaseTool] = [
            _wrap(
                tool,
                name,
                _where(connections[name]),
                call_timeout,
                self._forward(self._held[name], tool.name),
            )
            for name, tool in pairs
        ]

    def _submit(self, coroutine: Awaitable[T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)  # type: ignore[arg-type]

    async def _open_all(self) -> list[list[BaseTool]]:
        results = await asyncio.gather(
            *(held.open(self._timeout) for held in self._held.values()), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results  # type: ignore[return-value]

    def _forward(self, held: _Held, name: str) -> Call:
        """A coroutine function that runs the tool ``name`` on the held session's loop."""

        async def call(**arguments: Any) -> Any:
            if self._loop.is_closed():
                raise MCPConnectionError(f"MCP server {held.name!r}: its sessions are closed")
            future = self._submit(held.call(name, self._timeout, arguments))
            return await asyncio.wrap_future(future)

        return call

    def close(self) -> None:
        """End every session (and the servers a stdio session started). Idempotent."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():

            async def close_all() -> None:
                await asyncio.gather(*(held.close() for held in self._held.values()))

            with contextlib.suppress(Exception):  # closing is best effort
                self._submit(close_all()).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> list[BaseTool]:
        return self.tools

    def __exit__(self, *exc_info: object) -> None:
        self.close()
