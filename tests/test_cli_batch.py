"""``reactgraph batch`` as a person runs it: bad lines skipped with their numbers, ids kept as
given, torn result lines run again, two batches on one results file. What the batch file and
the results file hold is the command's own work, so most runs go in-process with one worker
(``run_main``); ids crossing into worker processes and two batches at once run in processes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fakes import FakeOpenAIServer
from tests.inprocess import run_main
from tests.test_cli import cli, popen

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow


def batch(
    questions: Path, results: Path, server: FakeOpenAIServer, *more: str, processes: bool = False
) -> subprocess.CompletedProcess[str]:
    """``reactgraph batch`` on the test server: in-process with one worker, or (``processes``)
    in a subprocess with its default worker processes."""
    db = str(results.parent / "runs.sqlite")
    args = ["batch", str(questions), "--out", str(results), "--base-url", server.url, "--db", db]
    if processes:
        return cli(*args, *more)
    return run_main(*args, *(more if "--workers" in more else [*more, "--workers", "1"]))


def result_lines(results: Path) -> list[dict]:
    return [json.loads(line) for line in results.read_text("utf-8").splitlines() if line.strip()]


def rerun_runs_nothing(questions: Path, results: Path, server: FakeOpenAIServer, done: int) -> None:
    """The batch again: it calls no model and says each of its ``done`` questions is done."""
    calls = len(server.requests)
    rerun = batch(questions, results, server)
    assert rerun.returncode == 0 and f"{done} question(s) already done" in rerun.stdout
    assert len(server.requests) == calls


def test_batch_writes_each_result_and_a_rerun_skips_what_is_done(
    seed_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        '{"question": "first", "id": "a"}\nnot json\n"second"\n'
        '{"question": ""}\n{"question": "third", "id": "a"}\n'
    )
    results = tmp_path / "results.jsonl"
    run = batch(questions, results, seed_server, "--concurrency", "2")
    assert run.returncode == 0, run.stderr
    assert "questions.jsonl:2: not JSON" in run.stderr
    assert "questions.jsonl:4:" in run.stderr and "questions.jsonl:5: duplicate id" in run.stderr
    lines = result_lines(results)
    assert sorted(line["id"] for line in lines) == ["a", "line-3"]
    assert all(line["answer"] == "48" and line["status"] == "answered" for line in lines)
    assert all(
        line["turns"] == 4 and line["seconds"] > 0 and line["prompt_tokens"] > 0 for line in lines
    )
    rerun_runs_nothing(questions, results, seed_server, done=2)
    assert len(results.read_text().splitlines()) == 2


def test_every_kind_of_bad_line_is_a_numbered_warning_and_the_rest_runs(
    seed_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_bytes(
        b'{"question": "first", "id": "a"}\n'  # 1
        b'{"question":"caf\xe9"}\n'  # 2: Latin-1, not UTF-8
        b"not json\n"  # 3
        b'{"id": "c"}\n'  # 4: no question
        b'{"question": "again", "id": "a"}\n'  # 5: duplicate id
        b'{"question": "' + b"x" * 3_000_000 + b'"}\n'  # 6: several megabytes
        b'"a plain string question"\n'  # 7
        b'{"question": "bad id", "id": [1]}\n'  # 8
    )
    results = tmp_path / "r.jsonl"
    run = batch(questions, results, seed_server)
    assert run.returncode == 0, run.stderr
    warnings = run.stderr.strip().splitlines()
    assert all(line.startswith("reactgraph: warning: ") for line in warnings), warnings
    assert "error" not in run.stderr.lower() and "Traceback" not in run.stderr
    numbers = {line.split("q.jsonl:")[1].split(":")[0] for line in warnings}
    assert numbers == {"2", "3", "4", "5", "6", "8"}
    assert "q.jsonl:2: not UTF-8" in run.stderr and "q.jsonl:3: not JSON" in run.stderr
    assert "q.jsonl:5: duplicate id a" in run.stderr
    assert "q.jsonl:6: longer than 1,000,000 bytes" in run.stderr
    assert sorted(line["id"] for line in result_lines(results)) == ["a", "line-7"]


def test_a_file_with_no_good_line_is_one_error_line(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_bytes(b'{"question":"caf\xe9"}\n')
    run = run_main("batch", str(questions), "--out", str(tmp_path / "r.jsonl"), "--base-url", "x")
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "no question to run" in lines[0]
    assert "q.jsonl:1: not UTF-8" in lines[0]
    assert "codec" not in run.stderr


@pytest.mark.parametrize("command", ["batch", "eval"])
def test_what_only_a_built_graph_can_tell_is_one_line_before_any_run(
    openai_server: FakeOpenAIServer, tmp_path: Path, command: str
) -> None:
    """``--approve`` naming a tool the graph lacks: one line and exit 2, as ``ask`` says it,
    not a failed result line per question."""
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "a", "question": "q?", "answer": "x"}) + "\n")
    where = ["--out", str(tmp_path / ("r.jsonl" if command == "batch" else "eval"))]
    run = run_main(command, str(questions), *where, "--base-url", openai_server.url,
                   "--db", str(tmp_path / "runs.sqlite"), "--approve", "serch")  # fmt: skip
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert "approve names 'serch', which the graph has no tool of" in line
    assert openai_server.requests == [] and not (tmp_path / "r.jsonl").exists()


def test_ids_are_kept_as_given_and_generated_ones_never_collide(
    seed_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        '{"question": "int five", "id": 5}\n'
        '{"question": "string five", "id": "5"}\n'
        '{"question": "looks generated", "id": "line-4"}\n'
        '{"question": "really line 4"}\n'
    )
    results = tmp_path / "r.jsonl"
    run = batch(questions, results, seed_server, processes=True)  # the ids cross into workers
    assert run.returncode == 0 and run.stderr == "", run.stderr
    by_question = {line["question"]: line["id"] for line in result_lines(results)}
    assert by_question == {
        "int five": 5,
        "string five": "5",
        "looks generated": "line-4",
        "really line 4": "line-4",
    }
    assert type(by_question["int five"]) is int
    rerun_runs_nothing(questions, results, seed_server, done=4)


def test_a_torn_result_line_runs_again_and_never_spoils_the_next_line(
    seed_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "one", "id": "a"}\n{"question": "two", "id": "b"}\n')
    results = tmp_path / "r.jsonl"
    assert batch(questions, results, seed_server).returncode == 0
    lines = results.read_bytes().splitlines(keepends=True)
    torn = json.loads(lines[1])["id"]
    # A kill in the middle of writing the second result: half a line, no newline.
    results.write_bytes(lines[0] + lines[1][: len(lines[1]) // 2])
    calls = len(seed_server.requests)
    rerun = batch(questions, results, seed_server)
    assert rerun.returncode == 0, rerun.stderr
    assert "r.jsonl:2: a result line cut short" in rerun.stderr
    assert "reactgraph: warning:" in rerun.stderr and "error" not in rerun.stderr
    # Its run had finished in the database: its result is written again, not run again.
    assert len(seed_server.requests) == calls
    text = results.read_text("utf-8").splitlines()
    assert len(text) == 3 and json.loads(text[2])["id"] == torn  # a line of its own
    complete = [json.loads(line) for line in text if line.endswith("}")]
    assert sorted(line["id"] for line in complete) == ["a", "b"]
    rerun_runs_nothing(questions, results, seed_server, done=2)


def test_two_batches_on_one_results_file_run_each_question_once(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    gate = openai_server.hold()  # holds the first batch mid-run until the second has ended
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "only one", "id": "a"}\n')
    results = tmp_path / "r.jsonl"
    db = str(tmp_path / "runs.sqlite")
    first = popen(
        "batch", str(questions), "--out", str(results), "--base-url", openai_server.url, "--db", db
    )
    openai_server.wait_for_a_request()
    second = batch(questions, results, openai_server)
    gate.set()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.returncode == 2, second.stderr
    assert "q.jsonl:1: thread batch-" in second.stderr
    assert "is running in another process" in second.stderr
    assert [line["id"] for line in result_lines(results)] == ["a"]
