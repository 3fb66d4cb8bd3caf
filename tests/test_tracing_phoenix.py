"""End to end against a real trace backend that users run locally: Arize Phoenix (from PyPI,
in its own environment: ``make test-traces`` installs it in ``.venv-phoenix``), started on
127.0.0.1 by the test; ``reactgraph ask`` sends it the run, and the spans are read back from its
REST API."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeOpenAIServer, seed_responder, stop_process
from tests.test_cli import asked, cli

pytestmark = [pytest.mark.traces, pytest.mark.xdist_group("phoenix")]

ROOT = Path(__file__).resolve().parent.parent
# `make test-traces` names it (and so requires it); elsewhere, the test runs where it is installed.
REQUIRED = bool(os.environ.get("REACTGRAPH_PHOENIX"))
PHOENIX = os.environ.get("REACTGRAPH_PHOENIX") or str(ROOT / ".venv-phoenix" / "bin" / "phoenix")
# Phoenix's start-up (migrations, its UI) on two loaded cores: a bound against a hang.
START_S = 300.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not Path(PHOENIX).exists():
        assert not REQUIRED, f"no Phoenix at {PHOENIX}"
        pytest.skip("Arize Phoenix is not installed (make test-traces installs it)")
    port = free_port()
    folder = tmp_path_factory.mktemp("phoenix")
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (folder / "phoenix.log").open("w")
    process = subprocess.Popen([PHOENIX, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_S
    try:
        while True:
            assert process.poll() is None, (folder / "phoenix.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Phoenix did not start"
            time.sleep(0.5)
        yield url
    finally:
        stop_process(process, 30)
        log.close()


def spans_of(url: str, trace_id: str | None = None) -> list[dict[str, Any]]:
    found = get(f"{url}/v1/projects/default/spans?limit=1000")["data"]
    return [s for s in found if trace_id is None or s["context"]["trace_id"] == trace_id]


def test_ask_sends_its_trace_to_phoenix(
    phoenix: str, openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": phoenix, "OTEL_METRICS_EXPORTER": "none"}
    result = cli(*asked(openai_server, str(tmp_path / "runs.db"), "phoenix-thread"), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr
    deadline = time.monotonic() + 120  # Phoenix writes what it received on its own schedule
    while True:
        runs = [s for s in spans_of(phoenix) if s["name"] == "invoke_agent transcript"]
        if runs and len(spans_of(phoenix, runs[0]["context"]["trace_id"])) >= 12:
            break
        assert time.monotonic() < deadline, spans_of(phoenix)
        time.sleep(0.5)
    (run,) = runs
    trace = spans_of(phoenix, run["context"]["trace_id"])
    by_id = {s["context"]["span_id"]: s for s in trace}
    assert run["parent_id"] is None and run["span_kind"] == "AGENT"
    attributes = run["attributes"]
    assert attributes["gen_ai.conversation.id"] == "phoenix-thread"
    assert attributes["session.id"] == "phoenix-thread"  # Phoenix's sessions: the threads
    assert attributes["reactgraph.status"] == "answered" and attributes["reactgraph.turns"] == 4
    turns = sorted(
        (s for s in trace if s["name"].startswith("reactgraph.turn")),
        key=lambda s: s["attributes"]["reactgraph.turn"],
    )
    assert [t["parent_id"] for t in turns] == [run["context"]["span_id"]] * 4
    chats = [s for s in trace if s["name"] == "chat gpt-4o-mini"]
    tools = [s for s in trace if s["name"].startswith("execute_tool")]
    assert len(chats) == 4 and {c["span_kind"] for c in chats} == {"LLM"}
    assert sorted(t["name"] for t in tools) == [
        "execute_tool calculator",
        "execute_tool search",
        "execute_tool search",
    ]
    for child in chats + tools:
        assert by_id[child["parent_id"]]["name"].startswith("reactgraph.turn")
    assert (
        sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in chats)
        == attributes["gen_ai.usage.input_tokens"]
    )
