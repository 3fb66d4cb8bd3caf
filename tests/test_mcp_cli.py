"""MCP servers' tools from the command line: ``--mcp servers.json`` (a stdio and a streamable-HTTP
server), alone with ``--no-default-tools``, for ``ask`` and for ``batch``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("langchain_mcp_adapters")

from tests.fakes import FakeOpenAIServer
from tests.inprocess import run_main
from tests.mcp_servers import shared_http_server, stdio
from tests.test_cli import cli, one_line_error
from tests.test_cli_batch import batch, result_lines

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow


# A stdio call starts its server process: seconds on a loaded machine (two test workers on 2
# busy cores), more than the default 10 s tool timeout. A bound against a hang, not a timing.
TOOL_TIMEOUT = ["--tool-timeout", "300"]


def servers_file(tmp_path: Path) -> Path:
    path = tmp_path / "servers.json"
    servers = {"local": stdio(), "web": shared_http_server().connection()}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def responder(body: dict) -> str:
    observations = [m for m in body["messages"] if str(m["content"]).startswith("Observation:")]
    if not observations:
        return "Thought: shout it.\nAction: local_shout[hello]"
    if len(observations) == 1:
        return 'Thought: add.\nAction: web_add[{"a": 2, "b": 3}]'
    return "Final Answer: " + " ".join(str(m["content"])[13:] for m in observations)


def test_ask_with_stdio_and_http_mcp_tools_only(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = responder
    run = cli(
        "ask",
        "Shout hello and add two and three.",
        "--mcp",
        str(servers_file(tmp_path)),
        "--no-default-tools",
        "--base-url",
        openai_server.url,
        "--db",
        str(tmp_path / "runs.sqlite"),
        "--thread",
        "m1",
        *TOOL_TIMEOUT,
    )
    assert run.returncode == 0, run.stderr
    assert "Observation: HELLO" in run.stdout and "Observation: 5" in run.stdout
    prompt = openai_server.requests[0]["messages"][0]["content"]
    assert "local_shout[input]" in prompt and "web_add[input]" in prompt
    assert "search[input]" not in prompt and "calculator[input]" not in prompt
    shown = run_main("show", "m1", "--db", str(tmp_path / "runs.sqlite"))
    assert shown.returncode == 0 and "HELLO" in shown.stdout


def test_batch_takes_mcp_servers_too(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    openai_server.responder = responder
    questions, results = tmp_path / "q.jsonl", tmp_path / "r.jsonl"
    questions.write_text('"one"\n"two"\n')
    servers = str(servers_file(tmp_path))
    run = batch(
        questions, results, openai_server, "--mcp", servers, "--workers", "1", *TOOL_TIMEOUT
    )
    assert run.returncode == 0, run.stderr
    assert [line["answer"] for line in result_lines(results)] == ["HELLO 5"] * 2


@pytest.mark.parametrize(
    ("content", "fragment"),
    [("not json", "servers.json"), ('{"x": {"transport": "carrier-pigeon"}}', "carrier-pigeon")],
)
def test_a_bad_servers_file_is_one_line(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "servers.json"
    path.write_text(content)
    run = run_main("ask", "q", "--mcp", str(path), "--base-url", "http://127.0.0.1:9/v1")
    one_line_error(run, fragment)


def test_no_default_tools_needs_mcp() -> None:
    run = run_main("ask", "q", "--no-default-tools", "--base-url", "http://127.0.0.1:9/v1")
    one_line_error(run, "--no-default-tools leaves no tools")
