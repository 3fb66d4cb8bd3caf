"""Run budgets from the command line: the flags (a pair, a repeatable limit), what ``ask``,
``show`` and ``threads`` print, the exit code, and a batch's result lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactgraph.app.flags import flag
from tests.fakes import FakeOpenAIServer
from tests.inprocess import run_main
from tests.test_cli import one_line_error

pytestmark = pytest.mark.slow


def ask(server: FakeOpenAIServer, db: Path, *more: str) -> list[str]:
    return ["--base-url", server.url, "--db", str(db), *more]


def test_the_flags_are_named_for_one_limit_and_one_pair() -> None:
    assert flag("tool_call_limits") == "--tool-call-limit"
    assert flag("token_prices") == "--token-prices"
    text = run_main("ask", "--help").stdout
    assert "--tool-call-limit TOOL=N" in text and "--token-prices INPUT,OUTPUT|none" in text
    assert "--max-run-tokens" in text and "--max-run-seconds" in text and "--max-run-cost" in text


def test_a_spent_token_budget_is_shown_kept_and_listed(
    seed_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db = tmp_path / "runs.sqlite"
    result = run_main(
        "ask",
        "q",
        *ask(seed_server, db, "--thread", "t", "--max-run-tokens", "1", "--token-prices", "2,8"),
    )
    assert result.returncode == 1, result.stderr
    assert "budget_exhausted" in result.stdout
    assert "Usage:" in result.stdout and "cost " in result.stdout
    assert "Budget: max_run_tokens reached" in result.stdout
    show = run_main("show", "t", "--db", str(db))
    assert "Usage:" in show.stdout and "Budget: max_run_tokens" in show.stdout
    assert "budget_exhausted" in run_main("threads", "--db", str(db)).stdout


def test_tool_call_limits_are_repeatable_and_refuse_the_call_past_them(
    seed_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db = tmp_path / "runs.sqlite"
    limits = ["--tool-call-limit", "search=1", "--tool-call-limit", "calculator=3"]
    result = run_main("ask", "q", *ask(seed_server, db, "--thread", "t", *limits))
    assert "Not run: search may be called at most 1 time(s)" in result.stdout, result.stderr
    assert "tool calls: search 1" in result.stdout


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--tool-call-limit", "search"], "NAME=N"),
        (["--tool-call-limit", "search=-1"], ">= 0"),
        (["--token-prices", "1"], "2 numbers"),
        (["--max-run-tokens", "0"], ">= 1"),
        (["--max-run-cost", "0.5"], "token_prices"),
        (["--tool-call-limit", "serach=1"], "serach"),
    ],
)
def test_a_bad_budget_is_one_line_and_exit_2(flags: list[str], says: str, tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    result = run_main("ask", "q", "--base-url", "http://127.0.0.1:9/v1", "--db", str(db), *flags)
    one_line_error(result, says)


def test_a_batch_line_holds_the_totals(seed_server: FakeOpenAIServer, tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "a", "question": "q"}) + "\n", "utf-8")
    out = tmp_path / "out.jsonl"
    result = run_main(
        "batch",
        str(questions),
        "--out",
        str(out),
        *ask(seed_server, tmp_path / "runs.sqlite", "--token-prices", "1,2"),
        "--max-run-tokens",
        "1",
    )
    assert result.returncode == 0, result.stderr
    line = json.loads(out.read_text("utf-8").splitlines()[0])
    assert line["status"] == "budget_exhausted"
    assert line["total_tokens"] == line["prompt_tokens"] + line["completion_tokens"] > 0
    assert line["cost"] == pytest.approx(
        (line["prompt_tokens"] * 1 + line["completion_tokens"] * 2) / 1e6
    )
    assert line["budget"]["budget"] == "max_run_tokens" and line["tool_calls"] == {}
