"""The model ladder on the command line (issue 54): ``--escalate-to MODEL[@BASE_URL]``,
repeatable, on the same server as ``--model`` unless it names another; ``show`` and the batch's
result lines say where the run moved up, and each model's spend. The first test runs the
command in a subprocess (the flag as a person types it); the others in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeOpenAIServer, Fault, seed_responder
from tests.inprocess import run_main
from tests.test_cli import cli
from tests.test_cli_batch import batch, result_lines

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow


def by_model(request: dict[str, Any]) -> str:
    """The small model writes what the loop cannot use; any other answers as the seed does."""
    if request.get("model") == "small":
        return "I do not know what to write."
    return seed_responder(request)


def test_escalate_to_moves_up_to_the_named_model_in_a_subprocess(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = by_model
    db = str(tmp_path / "runs.sqlite")
    ran = cli(
        "ask", "How many years?", "--model", "small", "--escalate-to", "big",
        "--base-url", openai_server.url, "--db", db, "--thread", "t1",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "Status: answered" in ran.stdout and "Answer: 48" in ran.stdout
    assert "Ladder: after turn 2 small -> big (unusable)" in ran.stdout
    models = [r.get("model") for r in openai_server.requests]
    assert models[:2] == ["small", "small"] and set(models[2:]) == {"big"}
    shown = run_main("show", "t1", "--db", db)
    assert shown.returncode == 0
    assert "(invalid, small)" in shown.stdout and "(action, big)" in shown.stdout
    assert "Ladder: after turn 2 small -> big (unusable)" in shown.stdout


def test_each_rung_may_name_its_own_server(tmp_path: Path) -> None:
    small, big = FakeOpenAIServer(), FakeOpenAIServer()
    try:
        small.responder = lambda request: "no idea"
        big.responder = seed_responder
        db = str(tmp_path / "runs.sqlite")
        ran = run_main(
            "ask", "How many years?", "--model", "m", "--base-url", small.url,
            "--escalate-to", f"large@{big.url}", "--escalate-after", "3", "--db", db,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert "Answer: 48" in ran.stdout and len(small.requests) == 3
        assert {r["model"] for r in big.requests} == {"large"}
    finally:
        small.close()
        big.close()


def test_the_batch_lines_say_where_a_run_moved_up(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = by_model
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "How many years?"}) + "\n")
    results = tmp_path / "results.jsonl"
    ran = batch(questions, results, openai_server, "--model", "small", "--escalate-to", "big")
    assert ran.returncode == 0, ran.stderr
    (line,) = result_lines(results)
    assert line["status"] == "answered" and line["answer"] == "48"
    (move,) = line["escalations"]
    assert (move["from_model"], move["to_model"], move["reason"]) == ("small", "big", "unusable")
    assert line["by_model"]["small"]["calls"] == 2 and line["by_model"]["big"]["calls"] >= 1


def test_a_bad_escalate_after_is_one_line_and_exit_2(tmp_path: Path) -> None:
    ran = run_main(
        "ask", "q", "--escalate-to", "big", "--escalate-after", "0",
        "--base-url", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "r.sqlite"),
    )  # fmt: skip
    assert ran.returncode == 2 and "--escalate-after" in ran.stderr


def test_resume_goes_on_with_the_model_the_run_had_reached(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    refused = Fault(400, "the big model is not loaded yet")
    openai_server.responder = lambda r: refused if r.get("model") == "big" else by_model(r)
    db = str(tmp_path / "runs.sqlite")
    ran = run_main(
        "ask", "How many years?", "--model", "small", "--escalate-to", "big",
        "--base-url", openai_server.url, "--db", db, "--thread", "t1",
    )  # fmt: skip
    assert ran.returncode == 1  # the last rung's fault: the run stops, resumably
    asked = [r.get("model") for r in openai_server.requests]
    assert asked == ["small", "small", "big"]
    openai_server.responder = by_model
    again = run_main("resume", "t1", "--db", db, "--base-url", openai_server.url)
    assert again.returncode == 0, again.stderr
    assert "Answer: 48" in again.stdout
    resumed = [r.get("model") for r in openai_server.requests][len(asked) :]
    assert resumed and set(resumed) == {"big"}  # the small model is not called again
