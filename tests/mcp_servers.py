"""A small real MCP server (the `mcp` SDK's FastMCP) for the MCP tests, and how they start it.

    python tests/mcp_servers.py stdio [--tag TAG]
    python tests/mcp_servers.py http --port N [--tag TAG]  # streamable HTTP, 127.0.0.1:N/mcp
    python tests/mcp_servers.py mute [--tag TAG]  # reads stdin, never answers: a hung server
    python tests/mcp_servers.py odd [--tag TAG]  # stdio, tools named "my tool" and "new\\nline"

`--tag` is ignored by the server; the tests put a unique word there to find the process again.
The helpers below import only the standard library, so a server process starts no slower.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

SERVER = Path(__file__).resolve()
NAMES = {"shout", "add", "slow", "hold", "fail", "pid", "die"}
ADD_SCHEMA = {
    "properties": {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    },
    "required": ["a", "b"],
    "title": "addArguments",
    "type": "object",
}
HAS_PROC = Path("/proc/self/cmdline").exists()


STUBBORN = """
import pathlib, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path(sys.argv[1], "stubborn-up").touch()
while not pathlib.Path(sys.argv[1], "release").exists():
    time.sleep(0.02)
"""


def build(port: int = 8000) -> FastMCP:
    from mcp.server.fastmcp import FastMCP

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
    async def hold(folder: str) -> str:
        """Write folder/entered, then wait until folder/release exists (a test's marker). With
        folder/stubborn, first start a process that ignores SIGTERM until folder/release exists:
        whoever ends this server's group must wait for it (or kill it)."""
        if Path(folder, "stubborn").exists():
            quiet = subprocess.DEVNULL  # the server's pipes stay the server's alone
            subprocess.Popen([sys.executable, "-c", STUBBORN, folder], stdin=quiet, stdout=quiet)
        Path(folder, "entered").touch()
        while not Path(folder, "release").exists():
            await asyncio.sleep(0.02)
        return "released"

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


ODD_NAMES = {"my tool": "my_tool", "new\nline": "new_line"}


def build_odd() -> FastMCP:
    """A server whose tool names no ReAct reply can write as they are."""
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("reactgraph-odd", log_level="CRITICAL")
    server.tool(name="my tool", description="Return the text upper-cased.")(
        lambda text: text.upper()
    )
    server.tool(name="new\nline", description="Return the text reversed.")(lambda text: text[::-1])
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("transport", choices=["stdio", "http", "mute", "odd"])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tag", default="")
    args = parser.parse_args(argv)
    if args.transport == "mute":
        for _line in sys.stdin:  # swallow the handshake, answer nothing
            pass
        return
    if args.transport == "odd":
        build_odd().run("stdio")
        return
    server = build(args.port)
    server.run("stdio" if args.transport == "stdio" else "streamable-http")


# --- How the tests start it ------------------------------------------------------------------


def stdio(tag: str = "", mode: str = "stdio") -> dict[str, Any]:
    """The adapters' connection for the server over stdio; ``tag`` marks its processes."""
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(SERVER), mode, "--tag", tag or uuid.uuid4().hex],
    }


def processes(tag: str) -> list[int]:
    """The live processes whose command line holds ``tag`` (Linux: reads /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                status = Path(f"/proc/{entry}/stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if tag.encode() in cmdline and status != "Z":
                found.append(int(entry))
    return found


def wait_gone(tag: str, within: float = 10.0) -> list[int]:
    """The processes marked ``tag`` still alive after waiting up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while (left := processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def text_of(content: list[dict[str, Any]]) -> str:
    """The text of the adapters' content blocks, all of which must be text."""
    assert [block["type"] for block in content] == ["text"] * len(content)
    return "".join(block["text"] for block in content)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HttpServer:
    """The server over streamable HTTP, as a subprocess on a free loopback port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> HttpServer:
        self.stop()  # and reap the one before, if it died
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), "http", "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the MCP HTTP server exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        from tests.fakes import stop_process

        if self.process is not None:
            stop_process(self.process, 10)

    def connection(self) -> dict[str, Any]:
        return {"transport": "streamable_http", "url": self.url}


_shared: HttpServer | None = None


def shared_http_server() -> HttpServer:
    """One HTTP server for all the MCP test modules of a run, started on first use and stopped
    when the run ends: each start costs a second. Tests that end a server start their own."""
    global _shared
    if _shared is None or _shared.process is None or _shared.process.poll() is not None:
        _shared = HttpServer().start()
        atexit.register(_shared.stop)
    return _shared


if __name__ == "__main__":
    main()
