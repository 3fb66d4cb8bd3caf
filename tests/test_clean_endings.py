"""One line where one line is promised: a full disk under the results file, an ``--out`` that
cannot be written, a byte that is not UTF-8, a batch whose every run fails."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import FakeOpenAIServer, Fault, seed_responder
from tests.inprocess import run_main
from tests.test_cli import environment, one_line_error, scratch

pytestmark = pytest.mark.slow


def questions_file(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text(
        "".join(json.dumps({"question": f"q{i}", "id": i}) + "\n" for i in range(count))
    )
    return path


def test_a_full_disk_under_the_results_file_is_one_line_and_tears_no_line(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    questions, results = questions_file(tmp_path, 2), tmp_path / "r.jsonl"
    # A result line of another question, big enough that the database stays smaller: then a
    # file size limit just past it is a disk that is full for the results file only.
    padding = ({"id": "pad", "key": f"pad{i}", "status": "answered", "pad": "x" * 4000}
               for i in range(2000))  # fmt: skip
    results.write_text("".join(json.dumps(line) + "\n" for line in padding))
    before = results.read_bytes()
    limit = len(before) + 40  # room for part of a line: the write falls short

    def full() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    args = ["batch", str(questions), "--out", str(results), "--db", str(tmp_path / "r.sqlite")]
    args += ["--base-url", openai_server.url, "--workers", "1", "--concurrency", "1"]
    run = subprocess.run(
        [sys.executable, "-m", "reactgraph.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment(),
        cwd=scratch(),
        preexec_fn=full,
    )
    one_line_error(run, "cannot write the results to")
    assert results.read_bytes() == before  # no torn line
    again = run_main(*args)  # --workers 1: what it writes is the command's own work
    assert again.returncode == 0, again.stderr
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(str(line["id"]) for line in lines if line["id"] != "pad") == ["0", "1"]


def test_eval_out_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "q", "answer": "blue"}) + "\n")
    a_file = tmp_path / "file"
    a_file.write_text("")
    other_db = str(tmp_path / "elsewhere.sqlite")  # the database is fine: only --out is not
    run = run_main("eval", str(questions), "--out", str(a_file / "sub"), "--db", other_db,
                   "--base-url", "http://127.0.0.1:9/v1")  # fmt: skip
    one_line_error(run, "cannot write the results to --out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_eval_out_in_a_read_only_folder_is_one_line(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "q", "answer": "blue"}) + "\n")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    run = run_main("eval", str(questions), "--out", str(locked / "out"), "--db",
                   str(tmp_path / "r.sqlite"), "--base-url", "http://127.0.0.1:9/v1")  # fmt: skip
    one_line_error(run, "cannot write the results to --out")


def raw(*args: bytes) -> subprocess.CompletedProcess[str]:
    """The command line with arguments as bytes, as a shell passes them."""
    return subprocess.run(
        [sys.executable.encode(), b"-m", b"reactgraph.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment(),
        cwd=scratch(),
    )


def test_a_byte_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite").encode()
    url = b"http://127.0.0.1:9/v1"
    # The database made in-process; then the bytes as a shell passes them to a new process.
    made = run_main(
        "ask", "fine", "--thread", "ok", "--db", db, "--base-url", url, "--model-retries", "0"
    )
    assert "Traceback" not in made.stderr  # the database exists now (the model is not there)
    one_line_error(raw(b"show", b"t\xff", b"--db", db), "not UTF-8 text: byte 0xff")
    one_line_error(
        raw(b"ask", b"q", b"--thread", b"t\xfe", b"--db", db, b"--base-url", url),
        "the thread is not UTF-8 text: byte 0xfe",
    )
    one_line_error(
        raw(b"ask", b"caf\xe9?", b"--db", db, b"--base-url", url),
        "the question is not UTF-8 text: byte 0xe9 at position 3",
    )


def test_a_batch_whose_every_run_fails_says_why(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = lambda body: Fault(400, "this model does not exist")
    questions = questions_file(tmp_path, 3)
    run = run_main("batch", str(questions), "--out", str(tmp_path / "r.jsonl"), "--db",
                   str(tmp_path / "r.sqlite"), "--base-url", openai_server.url,
                   "--workers", "1")  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "3 of 3 question(s) failed" in lines[0] and "this model does not exist" in lines[0]
