"""Starting `langgraph dev` for the tests: in a temporary folder (its `.langgraph_api/` goes
there), on a free port, with analytics, version checks and tracing off, stopped by its PID."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
# The graphs the chat tests serve: every variant, with a tool that waits for the test.
CHAT_GRAPHS = ROOT / "tests" / "studio_graphs.py"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def config_for(graph_file: Path | None = None) -> dict:
    """The checkout's langgraph.json with absolute paths (or every graph taken from
    ``graph_file``), so the server can run in any folder."""
    project = json.loads((ROOT / "langgraph.json").read_text())
    graphs = {
        name: (
            f"{graph_file}:{name}"
            if graph_file is not None
            else str(ROOT / target.removeprefix("./"))
        )
        for name, target in project["graphs"].items()
    }
    if graph_file is not None:
        graphs["snapshots"] = f"{graph_file}:snapshots"
    return {
        **project,
        "dependencies": [str(ROOT)],
        "graphs": graphs,
        "env": {"LANGSMITH_TRACING": "false"},
    }


@contextlib.contextmanager
def langgraph_dev(
    workdir: Path, graph_file: Path | None = None, env: Mapping[str, str] | None = None
) -> Iterator[str]:
    """A running `langgraph dev` in ``workdir``; yields its URL."""
    port = free_port()
    (workdir / "langgraph.json").write_text(json.dumps(config_for(graph_file)))
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "LANGSMITH_TRACING": "false",
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    log_path = workdir / "server.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed below
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--config", str(workdir / "langgraph.json")],
        cwd=workdir,
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.time() > deadline:
                log.flush()
                raise RuntimeError(f"langgraph dev did not start:\n{log_path.read_text()}")
            time.sleep(0.3)
        yield url
    finally:
        stop(server)
        log.close()


def stop(server: subprocess.Popen) -> None:
    """Stop the server by its PID (and its process group), forcefully if it lingers."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(20)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)
