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

The modules, one concern each: ``config`` (the servers' config), ``errors`` (failures as one
line), ``loops`` (sync calls and deadlines), ``tool`` (``MCPTool``), ``load`` (a session per
call), ``held`` and ``sessions`` (kept sessions).
"""

from __future__ import annotations

try:
    import anyio  # noqa: F401
    import httpx  # noqa: F401
    import langchain_mcp_adapters  # noqa: F401
    import mcp  # noqa: F401
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError(
        "reactgraph.tools.mcp needs the MCP packages: pip install 'reactgraph[mcp]'"
    ) from exc

from reactgraph.tools.mcp.config import normalize_servers
from reactgraph.tools.mcp.errors import MCPConnectionError
from reactgraph.tools.mcp.load import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_TIMEOUT,
    aload_mcp_tools,
    load_mcp_tools,
)
from reactgraph.tools.mcp.sessions import MCPSessions
from reactgraph.tools.mcp.tool import MCPTool, render_content

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
