"""The servers' config: the adapters' connection dicts, checked and completed.

``normalize_servers`` takes the adapters' own config (server name -> connection), the
``{"mcpServers": {...}}`` file that Claude Desktop, Cursor and VS Code use, or the path of a
JSON file holding either, and gives back the adapters' config, or a one-line ValueError that
names the file and the server at fault.
"""

from __future__ import annotations

import json
import os
import shlex
import ssl
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from reactgraph.tools.mcp.errors import one_line

__all__ = ["MAX_SERVERS", "http_client", "normalize_servers", "origin_of", "server_label", "where"]

MAX_SERVERS = 64
"""The most servers one config may list: each is started (a process, or a connection) at load."""

# The keys the adapters take for each transport: another key is a typo to refuse (or, in an
# mcpServers file, another client's own setting to drop).
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


def _read_file(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(one_line(f"{path}: cannot read the MCP servers file: {reason}")) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            one_line(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        ) from None


_Fault = Callable[[str], ValueError]
"""Builds the one-line error about the server being checked, from what is wrong with it."""


def _transport_of(entry: dict[str, Any], *, wrapped: bool, fault: _Fault) -> str:
    """The entry's transport, popped from it: given (``type`` too in an mcpServers file) or
    guessed from ``command`` (stdio) or ``url`` (streamable HTTP); aliases resolved."""
    transport = entry.pop("transport", None)
    if transport is None and wrapped:
        transport = entry.pop("type", None)  # VS Code's and Cursor's spelling
    if transport is None:
        if "command" in entry:
            return "stdio"
        if "url" in entry:
            return "streamable_http"
        raise fault("no transport, and neither 'command' (stdio) nor 'url' (HTTP) to guess it")
    if not isinstance(transport, str):
        raise fault(f"transport must be a string, got {transport!r}")
    transport = _TRANSPORT_ALIASES.get(transport, transport)
    if transport not in _TRANSPORT_KEYS:
        known = ", ".join(sorted([*_TRANSPORT_KEYS, *_TRANSPORT_ALIASES]))
        raise fault(f"unknown transport {transport!r} (known: {known})")
    return transport


def _known_keys(
    entry: dict[str, Any], transport: str, *, wrapped: bool, fault: _Fault
) -> dict[str, Any]:
    """The entry with only the keys its transport takes: in an mcpServers file other
    clients' own settings (autoApprove, alwaysAllow, timeout in seconds, ...) are dropped;
    anywhere else an unknown key is a typo, refused."""
    allowed = _TRANSPORT_KEYS[transport]
    unknown = sorted(set(entry) - allowed)
    if not unknown:
        return entry
    if wrapped:
        return {key: value for key, value in entry.items() if key in allowed}
    raise fault(
        f"unknown key(s) {', '.join(map(repr, unknown))} for transport {transport!r} "
        f"(allowed: {', '.join(sorted(allowed))})"
    )


def _is_string_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _check_stdio(entry: dict[str, Any], transport: str, fault: _Fault) -> None:
    """A stdio server's command, args (made a list, empty by default) and env."""
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise fault("a stdio server needs 'command', a non-empty string")
    args = entry.setdefault("args", [])
    if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
        raise fault(f"'args' must be a list of strings, got {args!r}")
    entry["args"] = list(args)
    env = entry.get("env")
    if env is not None and not _is_string_map(env):
        raise fault("'env' must map names to string values")


def _check_remote(entry: dict[str, Any], transport: str, fault: _Fault) -> None:
    """A remote server's URL (its scheme the transport's); an HTTP one gets ``http_client``
    as its client factory unless it names its own."""
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(_URL_SCHEMES[transport]):
        schemes = " or ".join(_URL_SCHEMES[transport])
        raise fault(f"a {transport} server needs 'url' starting with {schemes}, got {url!r}")
    takes_factory = "httpx_client_factory" in _TRANSPORT_KEYS[transport]
    if takes_factory and entry.get("httpx_client_factory") is None:
        entry["httpx_client_factory"] = http_client


def _server(name: Any, entry: Any, *, wrapped: bool, origin: str) -> dict[str, Any] | None:
    """One server's connection, checked and completed; None for a server marked disabled."""

    def fault(what: str) -> ValueError:
        return ValueError(one_line(f"{origin}MCP server {name!r}: {what}"))

    if not isinstance(name, str) or not name.strip():
        raise ValueError(one_line(f"{origin}MCP server names must be non-empty strings: {name!r}"))
    if not isinstance(entry, Mapping):
        raise fault(f"expected an object with its connection, got {type(entry).__name__}")
    entry = dict(entry)
    if wrapped and entry.pop("disabled", False) is True:
        return None
    transport = _transport_of(entry, wrapped=wrapped, fault=fault)
    entry = _known_keys(entry, transport, wrapped=wrapped, fault=fault)
    check = _check_stdio if transport == "stdio" else _check_remote
    check(entry, transport, fault)
    return {"transport": transport, **entry}


def normalize_servers(servers: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, dict]:
    """The adapters' connection config for ``servers`` (see the module doc), checked.

    A server may leave out the transport (stdio when it has a ``command``, streamable HTTP
    when it has a ``url``); one in a ``{"mcpServers": {...}}`` config may also spell it
    ``type``, carry other clients' keys (dropped) and be marked ``"disabled": true`` (left
    out). An HTTP server without an ``httpx_client_factory`` gets one that shares one SSL
    context (see ``http_client``). At most ``MAX_SERVERS`` servers (disabled ones included).
    Raises ValueError with one line on any fault.
    """
    origin = ""
    if isinstance(servers, str | os.PathLike):
        path = Path(servers).expanduser()
        origin = f"{path}: "
        servers = _read_file(path)
    if not isinstance(servers, Mapping):
        raise ValueError(
            one_line(
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
    if len(servers) > MAX_SERVERS:  # checked before any is: each would be started at load
        raise ValueError(
            f"{origin}{len(servers):,} MCP servers configured; at most {MAX_SERVERS} per config"
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


def http_client(
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


WHERE_CHARS = 120  # the longest command line a message shows whole


def where(connection: Mapping[str, Any]) -> str:
    """Where a checked connection leads, for messages: the command line or the URL. A long
    command line keeps its start (the program) and its end (the script and its arguments,
    what tells servers apart) with "..." between: its length, not the folder it was started
    from, decides what is left out."""
    if connection["transport"] == "stdio":
        where = shlex.join([connection["command"], *connection["args"]])
        if len(where) <= WHERE_CHARS:
            return where
        head = WHERE_CHARS // 3
        return where[:head] + "..." + where[-(WHERE_CHARS - head - 3) :]
    return str(connection["url"])


def origin_of(servers: str | os.PathLike[str] | Mapping[str, Any]) -> str:
    """The prefix of an error about ``servers``: the file's path when they came from one."""
    return f"{Path(servers)}: " if isinstance(servers, str | os.PathLike) else ""


def server_label(origin: str, name: str, connection: Mapping[str, Any]) -> str:
    """How errors name a server: ``path: MCP server 'name' (where it leads)``."""
    return f"{origin}MCP server {name!r} ({where(connection)})"
