"""LangGraph Studio's server (`langgraph dev`) serves the three graphs: the official SDK lists
them, reads their drawings and context schemas, and runs a question on each end to end against
the local OpenAI-compatible test server."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes import FakeOpenAIServer, seed_responder
from tests.test_graph_shapes import SHAPES

ROOT = Path(__file__).resolve().parents[1]
LANGGRAPH = Path(sys.executable).with_name("langgraph")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    port = free_port()
    workdir = tmp_path_factory.mktemp("studio")
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "LANGSMITH_TRACING": "false",
    }
    log = open(workdir / "server.log", "w")  # noqa: SIM115 - closed below
    server = subprocess.Popen(
        [
            str(LANGGRAPH),
            "dev",
            "--no-browser",
            "--no-reload",
            "--port",
            str(port),
            "--config",
            str(ROOT / "langgraph.json"),
        ],
        cwd=ROOT,  # langgraph.json's paths are relative to where the server starts
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.time() > deadline:
                log.flush()
                pytest.fail(f"langgraph dev did not start:\n{(workdir / 'server.log').read_text()}")
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


def test_studio_serves_the_three_graphs_end_to_end(
    studio: str, openai_server: FakeOpenAIServer
) -> None:
    from langgraph_sdk import get_sync_client

    openai_server.responder = seed_responder
    client = get_sync_client(url=studio)
    assistants = {a["graph_id"]: a for a in client.assistants.search(limit=20)}
    assert set(assistants) >= set(SHAPES)
    for variant, (nodes, _) in SHAPES.items():
        assistant = assistants[variant]["assistant_id"]
        drawing = client.assistants.get_graph(assistant)
        assert {n["id"] for n in drawing["nodes"]} - {"__start__", "__end__"} == nodes
        assert any(e["target"] == "__end__" and e.get("conditional") for e in drawing["edges"])
        schema = client.assistants.get_schemas(assistant)["context_schema"]
        properties = schema["properties"]
        assert {"max_turns", "tool_timeout", "model_name", "base_url"} <= set(properties)
        assert all(p.get("description") for p in properties.values())
        thread = client.threads.create()
        values = client.runs.wait(
            thread["thread_id"],
            assistant,
            input={"question": "How many years apart?"},
            context={"model_name": "gpt-4o-mini", "base_url": openai_server.url, "max_turns": 6},
        )
        assert values["answer"] == "48" and values["status"] == "answered", values
        state = client.threads.get_state(thread["thread_id"])
        assert state["values"]["settings"]["max_turns"] == 6
        assert [t["action"] for t in state["values"]["turns"]][:3] == [
            "search",
            "search",
            "calculator",
        ]
