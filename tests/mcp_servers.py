"""A small real MCP server (the `mcp` SDK's FastMCP) for the MCP tests.

    python tests/mcp_servers.py stdio [--tag TAG]
    python tests/mcp_servers.py http --port N [--tag TAG]  # streamable HTTP, 127.0.0.1:N/mcp
    python tests/mcp_servers.py mute [--tag TAG]  # reads stdin, never answers: a hung server

`--tag` is ignored by the server; the tests put a unique word there to find the process again.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from mcp.server.fastmcp import FastMCP


def build(port: int = 8000) -> FastMCP:
    server = FastMCP("reactgraph-test", host="127.0.0.1", port=port, log_level="CRITICAL")

    @server.tool()
    def shout(text: str) -> str:
        """Return the text upper-cased."""
        return text.upper()

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep for the given number of seconds, then say so."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def fail(message: str) -> str:
        """Raise an error with the given message."""
        raise ValueError(message)

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def die() -> str:
        """End the server process at once, without answering."""
        os._exit(3)

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("transport", choices=["stdio", "http", "mute"])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    if args.transport == "mute":
        for _line in sys.stdin:  # swallow the handshake, answer nothing
            pass
        return
    server = build(args.port)
    server.run("stdio" if args.transport == "stdio" else "streamable-http")


if __name__ == "__main__":
    main()
