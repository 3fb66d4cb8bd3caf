"""Run budgets from the command line: the flags (a pair, a repeatable limit), what ``ask``,
``show`` and ``threads`` print, the exit code, and a batch's result lines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reactgraph.app.flags import flag
from tests.fakes import FakeOpenAIServer, Hang, seed_responder
from tests.inprocess import run_main
from tests.test_cli import one_line_error

pytestmark = pytest.mark.slow


def ask(server: FakeOpenAIServer, db: Path, *more: str) -> list[str]:
    return ["--base-url", server.url, "--db", str(db), *more]


def test_the_flags_are_named_for_one_limit_and_one_pair() -> None:
    assert flag("tool_call_limits") == "--tool-call-limit"
    assert flag("token_prices") == "--token-prices"
    text = run_main("ask", "--help").stdout
    assert "--tool-call-limit TOOL=N" in text
    assert "--token-prices INPUT,OUTPUT[,CACHED]|none" in text
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
    # Which budget, its limit and what was spent (issue 58, 4), as the chat says it.
    said = re.search(
        r"Budget: token budget \(max_run_tokens\): ([\d,]+) of 1 tokens spent", result.stdout
    )
    assert said is not None and int(said[1].replace(",", "")) > 1, result.stdout
    show = run_main("show", "t", "--db", str(db))
    assert "Usage:" in show.stdout and said[0] in show.stdout
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


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-run-tokens", str(2**64)],
        ["--max-turns", str(2**64)],
        ["--tool-call-limit", f"search={2**64}"],
        ["--max-completion-tokens", str(2**63)],
    ],
)
def test_a_number_no_database_can_store_is_one_line_and_exit_2(
    flags: list[str], tmp_path: Path
) -> None:
    """A whole number of 2^63 or more passes a range check but cannot be stored: refused
    before anything is written, not a traceback after the first rows."""
    db = tmp_path / "runs.sqlite"
    result = run_main("ask", "q", "--base-url", "http://127.0.0.1:9/v1", "--db", str(db), *flags)
    one_line_error(result, "cannot be stored: it holds an integer outside 64 bits")
    assert "no threads" in run_main("threads", "--db", str(db)).stdout


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


@pytest.mark.parametrize(
    ("sent", "flags", "code"),
    [
        ({"completion_tokens": -300_000, "total_tokens": -299_000}, ["--max-run-tokens", "500"], 1),
        ({"prompt_tokens": float("nan")}, [], 0),
        ({"prompt_tokens": 2**64, "total_tokens": 2**64 + 5}, [], 0),
    ],
    ids=["negative", "nan", "2^64"],
)
def test_a_server_reporting_hostile_usage_neither_lifts_the_budget_nor_fails_the_run(
    openai_server: FakeOpenAIServer, tmp_path: Path, sent: dict, flags: list[str], code: int
) -> None:
    openai_server.responder = seed_responder
    openai_server.usage_sent = sent
    db = tmp_path / "runs.sqlite"
    result = run_main("ask", "q", *ask(openai_server, db, "--thread", "t", *flags))
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    said = [line for line in result.stderr.splitlines() if "cannot be right" in line]
    assert len(said) == 1 and openai_server.url in said[0], result.stderr
    if code:  # the negative counts did not hide the spend: the budget stopped the run
        assert "budget_exhausted" in result.stdout
        assert len(openai_server.requests) < 4
    else:
        assert "Answer: 48" in result.stdout
    show = run_main("show", "t", "--db", str(db))
    assert show.returncode == 0 and "Usage:" in show.stdout, show.stderr


def test_the_time_budget_cuts_a_slow_model_call(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """``--max-run-seconds`` bounds the model call too (the server takes 30 s, the client's
    timeout is 60 s): the run stops budget_exhausted, said as every budget stop is."""
    openai_server.responder = lambda body: Hang(30, "Final Answer: too late")
    db = tmp_path / "runs.sqlite"
    result = run_main(
        "ask", "q", *ask(openai_server, db, "--thread", "t", "--max-run-seconds", "1")
    )
    assert result.returncode == 1, result.stderr
    assert "budget_exhausted" in result.stdout and "(max_run_seconds)" in result.stdout
    assert "Traceback" not in result.stderr and len(openai_server.requests) == 1
    assert "budget_exhausted" in run_main("threads", "--db", str(db)).stdout
