"""``MCPTool``: an MCP server's tool as reactgraph and any langchain-core caller want it.

On top of the adapters' tool (async only, dict input, content blocks out) it runs from sync
code too, takes a plain string when the tool has one argument (or a JSON object in a string),
answers with text (the blocks kept as the artifact), bounds each call with ``call_timeout`` and
turns the SDK's failures into ``TimeoutError``, ``MCPConnectionError`` or a ``ToolException``
the model reads, never an ``ExceptionGroup``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from mcp.shared.exceptions import McpError

from reactgraph.tools.mcp.errors import (
    MCPConnectionError,
    describe,
    is_disconnect,
    leaf,
    one_line,
)
from reactgraph.tools.mcp.loops import Expired, run_sync, within

__all__ = ["Call", "MCPTool", "render_content", "wrap"]


def _block_text(block: Any) -> str:
    """One content block's text: a text block's text, another block's ``[kind: detail]``
    marker (its MIME type or URL), anything else as a string."""
    if not isinstance(block, Mapping):
        return str(block)
    if block.get("type") == "text":
        return str(block.get("text", ""))
    kind = block.get("type", "block")
    detail = block.get("mime_type") or block.get("url") or ""
    return f"[{kind}: {detail}]" if detail else f"[{kind}]"


def render_content(content: Any) -> str:
    """Text for an MCP tool's content: a string as is, text blocks joined by newlines, other
    blocks as a short ``[image: image/png]``-style marker."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    return "\n".join(_block_text(block) for block in content)


def _json_arguments(schema: Mapping[str, Any], text: str) -> dict[str, Any] | None:
    """``text`` read as a JSON object of the arguments, when it is one with every required
    key and no unknown one; else None."""
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    required = set(schema.get("required") or ())
    known = set(schema.get("properties") or {})
    return value if isinstance(value, dict) and required <= set(value) <= known else None


def _sole_argument(key: str, spec: Any, text: str) -> dict[str, Any]:
    """The one argument ``key`` from ``text``: read as JSON when its declared type is not a
    string and the text is JSON (a number, a list, ...), else the text as is."""
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if kind not in (None, "string"):
        try:
            return {key: json.loads(text.strip())}
        except ValueError:
            pass
    return {key: text}


def _string_input(name: str, schema: Mapping[str, Any], text: str) -> dict[str, Any]:
    """The arguments for a plain-string input, by the tool's JSON schema."""
    properties = schema.get("properties") or {}
    if not properties:
        return {}
    arguments = _json_arguments(schema, text.strip())
    if arguments is not None:
        return arguments
    if len(properties) == 1:
        key, spec = next(iter(properties.items()))
        return _sole_argument(key, spec, text)
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


# A tool's call: the adapters' coroutine (a session per call) or a kept session's forwarder;
# either gives the adapters' (content, artifact) pair.
Call = Callable[..., Awaitable[tuple[Any, Any]]]


def wrap(
    tool: BaseTool,
    server: str,
    where: str,
    call_timeout: float | None,
    call: Call | None = None,
    name: str | None = None,
) -> MCPTool:
    """Our tool around the adapters' ``tool``, named ``name`` (default: the tool's own);
    ``call`` runs it (default: its coroutine), by the name the server gave it."""
    call = call or getattr(tool, "coroutine", None)
    if call is None:  # pragma: no cover - the adapters' tools are all async
        raise TypeError(f"{tool.name} from MCP server {server!r} has no coroutine")

    async def acall(**arguments: Any) -> tuple[str, dict[str, Any]]:
        try:
            content, artifact = await within(lambda: call(**arguments), call_timeout)
        except ToolException as exc:  # the server answered isError: the model reads it
            text = render_content(getattr(exc, "tool_content", None) or str(exc))
            raise ToolException(text) from None
        except Expired:
            raise TimeoutError(
                f"MCP tool {tool.name!r} (server {server!r}) gave no answer "
                f"within {call_timeout:g} s"
            ) from None
        except Exception as exc:
            root = leaf(exc)
            if isinstance(root, MCPConnectionError):
                raise root from None
            if is_disconnect(root):
                raise MCPConnectionError(
                    one_line(f"MCP server {server!r} ({where}): {describe(root)}")
                ) from root
            if isinstance(root, McpError):  # a JSON-RPC error: the model reads it
                raise ToolException(one_line(root.error.message)) from None
            if root is exc:
                raise
            raise root from None
        blocks = content if isinstance(content, list) else [content]
        extra: dict[str, Any] = {"content": blocks, "server": server}
        if artifact and "structured_content" in artifact:
            extra["structured_content"] = artifact["structured_content"]
        return render_content(content), extra

    def run(**arguments: Any) -> tuple[str, dict[str, Any]]:
        return run_sync(lambda: acall(**arguments))

    return MCPTool(
        name=name or tool.name,
        description=tool.description,
        args_schema=tool.args_schema or {"type": "object", "properties": {}},
        func=run,
        coroutine=acall,
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata={**(tool.metadata or {}), "mcp_server": server},
        server=server,
    )
