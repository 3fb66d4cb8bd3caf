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
        graphs["budgets"] = f"{graph_file}:budgets"
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
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--port", str(port)]
    command += ["--config", str(workdir / "langgraph.json")]
    url = f"http://127.0.0.1:{port}"
    with serving(command, workdir, environment, workdir / "server.log", f"{url}/ok", 120):
        yield url


@contextlib.contextmanager
def serving(
    command: list[str], cwd: Path, env: Mapping[str, str], log: Path, ready: str, seconds: float
) -> Iterator[None]:
    """``command`` running in ``cwd`` in a process group of its own, its output appended to
    ``log``, once ``ready`` answers (within ``seconds``); stopped after the block."""
    with open(log, "a") as out:
        server = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for_http(ready, server, log, seconds)
        yield
    finally:
        stop(server)


def wait_for_http(url: str, process: subprocess.Popen, log: Path, seconds: float) -> None:
    """Until ``url`` answers 200; RuntimeError with the log's end if ``process`` ends first or
    ``seconds`` pass."""
    deadline = time.time() + seconds
    while True:
        try:
            if httpx.get(url, timeout=max(1.0, deadline - time.time())).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"{url} did not answer:\n{log.read_text()[-4000:]}")
        time.sleep(0.3)


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
