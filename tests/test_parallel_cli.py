"""``--parallel-tool-calls`` and ``--max-parallel-calls`` on the command line: generated from
the settings' one declaration, checked by it, and a run of ``ask`` whose model calls two tools
at once (the local OpenAI-compatible server), both formats."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from reactgraph.app import cli
from reactgraph.app.options import run_settings
from tests.fakes import Call, Calls, FakeOpenAIServer
from tests.inprocess import run_main

pytestmark = pytest.mark.slow


def ask(*argv: str) -> argparse.Namespace:
    parser = cli.make_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["ask"].parse_args(["q", *argv])


@pytest.mark.parametrize(
    ("word", "value"), [("on", True), ("true", True), ("yes", True), ("off", False), ("0", False)]
)
def test_the_flag_takes_yes_or_no(word: str, value: bool) -> None:
    settings, _ = run_settings(ask("--parallel-tool-calls", word, "--max-parallel-calls", "3"))
    assert settings == {"parallel_tool_calls": value, "max_parallel_calls": 3}


def test_bad_values_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        ask("--parallel-tool-calls", "maybe")
    assert stopped.value.code == 2
    assert "--parallel-tool-calls" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        ask("--max-parallel-calls", "0")
    assert stopped.value.code == 2
    assert "must be >= 1, got 0" in capsys.readouterr().err


def test_the_help_says_both() -> None:
    text = run_main("ask", "--help").stdout
    assert "--parallel-tool-calls" in text and "--max-parallel-calls" in text


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_ask_runs_both_calls_of_one_reply(
    openai_server: FakeOpenAIServer, tmp_path: Path, action_format: str
) -> None:
    if action_format == "text":
        first: object = (
            "Thought: both.\nAction: search[Eiffel Tower]\nAction: search[Golden Gate Bridge]"
        )
    else:
        first = Calls(
            [
                Call("search", {"query": "Eiffel Tower"}, id="call-a"),
                Call("search", {"query": "Golden Gate Bridge"}, id="call-b"),
            ]
        )
    openai_server.script.extend([first, "Thought: done.\nFinal Answer: 48"])
    db = tmp_path / "runs.sqlite"
    result = run_main(
        "ask",
        "How many years?",
        "--base-url",
        openai_server.url,
        "--db",
        str(db),
        "--action-format",
        action_format,
        "--parallel-tool-calls",
        "on",
    )
    assert result.returncode == 0, result.stderr
    assert "Answer: 48" in result.stdout
    assert "Observation 1 (search[Eiffel Tower])" in result.stdout
    assert "Observation 2 (search[Golden Gate Bridge])" in result.stdout
    if action_format == "tool_calls":
        assert "Action: search[Golden Gate Bridge]" in result.stdout
        assert "not run" not in result.stdout
    second = openai_server.requests[1]["messages"]
    said = "\n".join(str(m.get("content") or "") for m in second)
    assert "1889" in said and "1937" in said
