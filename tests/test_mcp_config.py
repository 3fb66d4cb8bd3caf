"""``reactgraph.tools.mcp`` without a server: the config and its one-line errors, the timeout
arguments, and how content becomes text. (A config naming a server that cannot start is in
test_mcp_tools.py, with the servers.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_mcp_adapters")
pytest.importorskip("mcp")

from reactgraph.tools.mcp import load_mcp_tools, normalize_servers, render_content


def test_the_mcp_servers_wrapper_defaults_the_transport() -> None:
    wrapped = {
        "mcpServers": {
            "local": {"command": "python", "env": {"X": "1"}, "autoApprove": []},
            "web": {"url": "http://127.0.0.1:1/mcp", "type": "streamable-http"},
            "off": {"command": "x", "disabled": True},
        }
    }
    checked = normalize_servers(wrapped)
    assert checked["web"].pop("httpx_client_factory") is not None
    assert checked == {
        "local": {"transport": "stdio", "command": "python", "env": {"X": "1"}, "args": []},
        "web": {"transport": "streamable_http", "url": "http://127.0.0.1:1/mcp"},
    }


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ([], r"^MCP servers must be an object of server name -> connection, got list$"),
        ({}, r"^no MCP servers configured$"),
        ({"x": "python"}, r"^MCP server 'x': expected an object with its connection, got str$"),
        (
            {"x": {"transport": "carrier-pigeon", "url": "http://127.0.0.1/"}},
            r"^MCP server 'x': unknown transport 'carrier-pigeon' \(known: http, sse, stdio, ",
        ),
        (
            {"x": {"transport": "stdio", "args": []}},
            r"^MCP server 'x': a stdio server needs 'command', a non-empty string$",
        ),
        (
            {"x": {"transport": "stdio", "command": "python", "args": "-V"}},
            r"^MCP server 'x': 'args' must be a list of strings, got '-V'$",
        ),
        (
            {"x": {"transport": "streamable_http", "url": "127.0.0.1:80/mcp"}},
            r"^MCP server 'x': a streamable_http server needs 'url' starting with http:// or https://",
        ),
        (
            {"x": {"transport": "stdio", "command": "python", "disabled": True}},
            r"^MCP server 'x': unknown key\(s\) 'disabled' for transport 'stdio' \(allowed: ",
        ),
        (
            {"x": {"args": []}},
            r"^MCP server 'x': no transport, and neither 'command' \(stdio\) nor 'url' \(HTTP\)",
        ),
        ({"mcpServers": []}, r"^'mcpServers' must be an object, got list$"),
    ],
)
def test_bad_configs_are_one_line_value_errors(servers: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_mcp_tools(servers)


def test_bad_files_are_one_line_value_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(
        ValueError,
        match=r"missing\.json: cannot read the MCP servers file: No such file or directory$",
    ):
        load_mcp_tools(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('{"x": {"command": "python",}}')
    with pytest.raises(
        ValueError,
        match=r"broken\.json: not JSON: "
        r"Expecting property name enclosed in double quotes at line 1 column 28$",
    ):
        load_mcp_tools(broken)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"x": {"transport": "pipe"}}')
    with pytest.raises(
        ValueError, match=r"^\S*wrong\.json: MCP server 'x': unknown transport 'pipe'"
    ):
        load_mcp_tools(wrong)


@pytest.mark.parametrize("value", [0, -1, float("inf"), True, "5"])
def test_timeouts_must_be_positive_numbers(value: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be"):
        load_mcp_tools({"x": {"command": "python"}}, timeout=value)
    with pytest.raises(ValueError, match="call_timeout must be"):
        load_mcp_tools({"x": {"command": "python"}}, call_timeout=value)


def test_render_content() -> None:
    assert render_content("plain") == "plain"
    assert render_content([]) == ""
    blocks = [
        {"type": "text", "text": "one"},
        {"type": "image", "base64": "AAAA", "mime_type": "image/png"},
        {"type": "file", "url": "file:///tmp/x.pdf"},
        {"type": "text", "text": "two"},
    ]
    assert render_content(blocks) == "one\n[image: image/png]\n[file: file:///tmp/x.pdf]\ntwo"


def test_a_config_lists_at_most_max_servers(tmp_path: Path) -> None:
    from reactgraph.tools.mcp.config import MAX_SERVERS

    many = {f"s{i}": {"command": "/no/such/command"} for i in range(200_000)}
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": many}))
    # Refused before any server is checked or started (each would fail to start here).
    with pytest.raises(
        ValueError, match=rf"servers\.json: 200,000 MCP servers configured; at most {MAX_SERVERS}"
    ):
        load_mcp_tools(path)
    fits = {f"s{i}": {"command": "python"} for i in range(MAX_SERVERS)}
    assert len(normalize_servers(fits)) == MAX_SERVERS
    with pytest.raises(ValueError, match=f"^{MAX_SERVERS + 1} MCP servers configured"):
        normalize_servers({**fits, "one-more": {"command": "python"}})
