"""The command line, in a subprocess as a user runs it, and in-process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from graphs.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_demo_runs_offline_and_answers_48() -> None:
    result = run_cli("demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "SCRIPTED" in out
    assert "Action: search[Eiffel Tower]" in out
    assert "Observation: [Eiffel Tower]" in out and "1889" in out
    assert "Action: calculator[1937-1889]" in out and "Observation: 48" in out
    assert out.rstrip().endswith("Status: answered")
    assert "Answer: 48" in out
    assert "Traceback" not in result.stderr


def test_bad_usage_is_a_one_line_error_with_exit_code_2() -> None:
    result = run_cli("fly")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr and "Traceback" not in result.stderr


def test_demo_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    assert "Answer: 48" in capsys.readouterr().out
