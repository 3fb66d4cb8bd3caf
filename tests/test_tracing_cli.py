"""The command line's trace export: OTLP to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``--otel``),
an endpoint that never answers costs seconds at most, and LangSmith's own OTel mode still
works beside it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import FakeOpenAIServer, seed_responder
from tests.otlp_receiver import BlackHole, OTLPReceiver
from tests.test_cli import cli

# Each test starts commands that export to a receiver: `make test-traces` runs them.
pytestmark = pytest.mark.traces


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    found = OTLPReceiver()
    yield found
    found.close()


def ask(openai_server: FakeOpenAIServer, db: Path, *more: str, env: dict[str, str]) -> object:
    openai_server.responder = seed_responder
    return cli(
        "ask",
        "How many years apart?",
        "--base-url",
        openai_server.url,
        "--db",
        str(db),
        "--thread",
        "t1",
        *more,
        env=env,
    )


def test_ask_exports_its_run_to_the_endpoint(
    openai_server: FakeOpenAIServer, receiver: OTLPReceiver, tmp_path: Path
) -> None:
    result = ask(
        openai_server, tmp_path / "runs.db", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    )
    assert result.returncode == 0, result.stderr
    ours = [s for s in receiver.spans if s["scope"] == "reactgraph"]
    (run,) = [s for s in ours if s["name"] == "invoke_agent transcript"]
    assert run["attributes"]["gen_ai.conversation.id"] == "t1"
    assert run["attributes"]["reactgraph.status"] == "answered"
    assert len([s for s in ours if s["name"].startswith("reactgraph.turn")]) == 4
    assert len([s for s in ours if s["name"].startswith("execute_tool")]) == 3
    assert {s["trace"] for s in ours} == {run["trace"]}
    assert "/v1/metrics" in receiver.posts
    shown = cli("show", "t1", "--db", str(tmp_path / "runs.db"))
    assert f"trace {run['trace']}" in shown.stdout  # where to look for it in the backend


def test_the_traces_endpoint_alone_turns_the_export_on(
    openai_server: FakeOpenAIServer, receiver: OTLPReceiver, tmp_path: Path
) -> None:
    """OpenTelemetry's ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` alone is enough: the run's spans
    go there, and no metrics go anywhere (nothing said where)."""
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{receiver.url}/v1/traces",
    }
    result = ask(openai_server, tmp_path / "runs.db", env=env)
    assert result.returncode == 0, result.stderr
    ours = [s for s in receiver.spans if s["scope"] == "reactgraph"]
    (run,) = [s for s in ours if s["name"] == "invoke_agent transcript"]
    assert run["attributes"]["reactgraph.status"] == "answered"
    assert "/v1/metrics" not in receiver.posts


def test_the_otel_flag_without_the_variable_sends_to_the_default_endpoint(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    # Nothing listens at the default address in the test: the run still answers, at once.
    result = ask(
        openai_server,
        tmp_path / "runs.db",
        "--otel",
        env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": "",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://127.0.0.1:9/v1/metrics",
        },
    )
    assert result.returncode == 0, result.stderr
    assert "Answer: 48" in result.stdout


def test_a_black_holed_endpoint_never_fails_the_run_nor_holds_its_exit(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    hole = BlackHole()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": hole.url}
        started = time.monotonic()
        traced = ask(openai_server, tmp_path / "a.db", env=env)
        with_hole = time.monotonic() - started
        started = time.monotonic()
        plain = ask(openai_server, tmp_path / "b.db", env={"OTEL_EXPORTER_OTLP_ENDPOINT": ""})
        without = time.monotonic() - started
    finally:
        hole.close()
    assert traced.returncode == 0 and plain.returncode == 0, traced.stderr
    assert "Answer: 48" in traced.stdout
    # The export's bound (telemetry.SHUTDOWN_S) is what the hole may add, not a stuck exit.
    from reactgraph.app import telemetry

    assert with_hole - without < telemetry.SHUTDOWN_S + telemetry.EXPORT_TIMEOUT_S + 30


def test_otel_without_the_sdk_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('opentelemetry.exporter'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    result = cli(
        "ask",
        "q",
        "--otel",
        "--db",
        str(tmp_path / "x.db"),
        env={"PYTHONPATH": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": ""},
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith("pip install 'reactgraph[otel]'")


def test_langsmith_in_its_otel_mode_still_traces_beside_ours(
    openai_server: FakeOpenAIServer, receiver: OTLPReceiver, tmp_path: Path
) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_TRACING_MODE": "otel",
        "LANGSMITH_API_KEY": "unused",
        "LANGSMITH_ENDPOINT": "http://127.0.0.1:9",
    }
    result = ask(openai_server, tmp_path / "runs.db", env=env)
    assert result.returncode == 0, result.stderr
    theirs = [s for s in receiver.spans if s["scope"] != "reactgraph"]
    ours = [s for s in receiver.spans if s["scope"] == "reactgraph"]
    assert any(s["name"] == "invoke_agent transcript" for s in ours)
    # LangSmith's spans of the same run, every one handed over before the exit: the graph, its
    # nodes, the four model calls and the three tool calls, with their GenAI attributes.
    operations = [s["attributes"].get("gen_ai.operation.name") for s in theirs]
    assert operations.count("chat") == 4 and operations.count("execute_tool") == 3, theirs
    assert any(s["name"] == "transcript" for s in theirs)


def test_a_batch_exports_from_its_worker_processes(
    openai_server: FakeOpenAIServer, receiver: OTLPReceiver, tmp_path: Path
) -> None:
    batch_exports_a_trace_a_run(openai_server, receiver, tmp_path, [], {})


def batch_exports_a_trace_a_run(
    openai_server: FakeOpenAIServer,
    receiver: OTLPReceiver,
    tmp_path: Path,
    flags: list[str],
    env: dict[str, str],
) -> None:
    """``batch`` of two questions with ``flags`` (and ``env``) on two workers exports each
    run's turns and calls in its own trace."""
    openai_server.responder = seed_responder
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"question": "first", "id": "a"}\n{"question": "second", "id": "b"}\n')
    result = cli(
        "batch", str(questions), "--out", str(tmp_path / "results.jsonl"), *flags,
        "--workers", "2", "--base-url", openai_server.url, "--db", str(tmp_path / "runs.db"),
        env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    ours = [s for s in receiver.spans if s["scope"] == "reactgraph"]
    runs = [s for s in ours if s["name"] == "invoke_agent transcript"]
    assert len(runs) == 2 and len({r["trace"] for r in runs}) == 2
    for run in runs:  # each run's turns and calls in its own trace
        mine = [s for s in ours if s["trace"] == run["trace"]]
        assert len([s for s in mine if s["name"].startswith("reactgraph.turn")]) == 4


@pytest.mark.ray
@pytest.mark.slow
def test_a_ray_batch_exports_from_its_actors(
    openai_server: FakeOpenAIServer, receiver: OTLPReceiver, tmp_path: Path
) -> None:
    from tests.test_rayengine import ray_environment

    flags = ["--engine", "ray"]
    batch_exports_a_trace_a_run(openai_server, receiver, tmp_path, flags, ray_environment(tmp_path))
