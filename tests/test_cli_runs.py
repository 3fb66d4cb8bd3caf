"""``ask`` and ``resume`` as a person runs them: an empty question, the thread lock taken before
the thread is checked (two real processes), resuming at another endpoint, what a turn shows."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from reactgraph.storage.database import RunRecord, open_db
from tests.fakes import FakeOpenAIServer, Fault, seed_responder
from tests.inprocess import run_main
from tests.test_cli import one_line_error, popen

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow


def ask(server: FakeOpenAIServer, db: Path | str, *more: str) -> list[str]:
    return ["--base-url", server.url, "--db", str(db), *more]


def test_an_empty_question_is_one_line_and_leaves_no_thread(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    result = run_main("ask", "   ", "--base-url", "http://127.0.0.1:9/v1", "--db", str(db))
    one_line_error(result, "the question is empty")
    # Latin-1 bytes on the command line become a lone surrogate, which no database can store.
    latin = run_main("ask", b"caf\xe9", "--base-url", "http://127.0.0.1:9/v1", "--db", str(db))
    one_line_error(latin, "the question is not UTF-8 text: byte 0xe9 at position 3")
    if db.exists():
        with open_db(str(db)) as (saver, store):
            assert RunRecord.all(store) == []
            assert list(saver.list(None)) == []
    assert "no threads" in run_main("threads", "--db", str(db)).stdout


def test_a_second_ask_on_a_running_thread_loses_and_the_first_run_is_intact(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    gate = openai_server.hold()  # holds the first run mid-run until the others have ended
    db = tmp_path / "runs.sqlite"
    first = popen("ask", "the first question", *ask(openai_server, db, "--thread", "t1"))
    try:
        openai_server.wait_for_a_request()
        second = run_main("ask", "the second question", *ask(openai_server, db, "--thread", "t1"))
        one_line_error(second, "thread t1 is running in another process")
        again = run_main("resume", "t1", "--db", str(db), "--base-url", openai_server.url)
        one_line_error(again, "thread t1 is running in another process")
    finally:
        gate.set()
        _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    show = run_main("show", "t1", "--db", str(db))
    assert "Question: the first question" in show.stdout and "second" not in show.stdout
    assert "4 turns" in show.stdout and "Answer: 48" in show.stdout


def wait_for_reader(fifo: Path, seconds: float = 60) -> int:
    """A write end of the FIFO once a process has opened it to read (it is then blocked)."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            if error.errno != errno.ENXIO:
                raise
            time.sleep(0.05)
    raise TimeoutError("nobody opened the FIFO")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_the_lock_is_taken_before_the_thread_is_checked(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The first `ask` is held after its "is this thread new?" check, while it builds its graph
    (its corpus page is a FIFO nobody writes yet); a second `ask` on the thread starts then. It
    must lose, or it would write its record and run, and the first would overwrite both."""
    openai_server.responder = seed_responder
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    fifo = corpus / "page.md"
    os.mkfifo(fifo)
    db = tmp_path / "runs.sqlite"
    first = popen(
        "ask",
        "the first question",
        *ask(openai_server, db, "--thread", "t1"),
        "--corpus",
        str(corpus),
    )
    writer = wait_for_reader(fifo)
    try:
        second = run_main("ask", "the second question", *ask(openai_server, db, "--thread", "t1"))
    finally:
        os.write(writer, b"# Eiffel Tower\n\nThe Eiffel Tower was completed in 1889.\n")
        os.close(writer)
        _, err = first.communicate(timeout=120)
    one_line_error(second, "thread t1 is running in another process")
    assert first.returncode == 0, err
    show = run_main("show", "t1", "--db", str(db))
    assert "Question: the first question" in show.stdout and "4 turns" in show.stdout


def test_resume_goes_on_at_another_endpoint_and_remembers_it(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = lambda body: Fault(503, "down for maintenance.")
    result = run_main(
        "ask", "How many years?", *ask(openai_server, "runs.sqlite", "--thread", "t3"), cwd=tmp_path
    )
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert f"the model at {openai_server.url} failed after 4 attempts" in error
    assert ".." not in error and "Traceback" not in result.stderr
    db = tmp_path / "runs.sqlite"
    assert f"reactgraph resume t3 --db {db}" in error  # absolute: it works from any folder
    other = FakeOpenAIServer()
    try:
        other.responder = seed_responder
        resume = run_main(
            "resume",
            "t3",
            "--db",
            str(db),
            "--model",
            "other-model",
            "--base-url",
            other.url,
            "--timeout",
            "30",
        )
        assert resume.returncode == 0, resume.stderr
        assert "Answer: 48" in resume.stdout
        assert other.requests and {r["model"] for r in other.requests} == {"other-model"}
    finally:
        other.close()
    with open_db(str(db), read_only=True) as (_, store):
        record = RunRecord.load(store, "t3")
    assert record is not None and (record.model, record.base_url) == ("other-model", other.url)
    assert "model other-model" in run_main("show", "t3", "--db", str(db)).stdout


def test_a_notes_update_shows_the_notes_first_line_and_length(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    notes = "- [ ] find the year the Eiffel Tower was completed\n- [ ] then the Golden Gate"

    def responder(request: dict) -> str:
        if not any("Observation:" in str(m["content"])[:12] for m in request["messages"]):
            return f"Thought: plan first.\nAction: update_notes[{notes}]"
        return "Final Answer: 48"

    openai_server.responder = responder
    db = tmp_path / "runs.sqlite"
    result = run_main("ask", "q", "--variant", "notes", "--notes-in-db", *ask(openai_server, db))
    assert result.returncode == 0, result.stderr
    line = f"update_notes[- [ ] find the year the Eiffel Tower was completed … ({len(notes)} "
    assert line in result.stdout
    assert "the text now shown under Your notes" not in result.stdout


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_a_refused_model_call_is_one_line_with_the_resume_hint(
    openai_server: FakeOpenAIServer, tmp_path: Path, status: int
) -> None:
    """A model that answers 4xx (a bad key, an unknown model, a prompt too large) is one line
    naming the status and the server, with how to resume, and exit 1 (the README's model
    fault); once the server answers, ``resume`` finishes the run."""
    openai_server.responder = lambda body: Fault(status, "the key is not valid")
    db = tmp_path / "runs.sqlite"
    result = run_main("ask", "How many years?", *ask(openai_server, db, "--thread", "t"))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"the model at {openai_server.url} refused the call: HTTP {status} " in line
    assert "(the key is not valid)" in line
    assert f"resume it with: reactgraph resume t --db {db}" in line
    assert len(openai_server.requests) == 1  # not retried
    openai_server.responder = seed_responder
    resumed = run_main("resume", "t", "--db", str(db))
    assert resumed.returncode == 0 and "Answer: 48" in resumed.stdout, resumed.stderr


def test_a_refused_model_call_in_a_real_process_prints_no_traceback(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    from tests.test_cli import cli

    openai_server.responder = lambda body: Fault(401, "Incorrect API key provided")
    result = cli("ask", "q", *ask(openai_server, tmp_path / "runs.sqlite", "--thread", "t"))
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "refused the call: HTTP 401 Unauthorized (Incorrect API key provided)" in line
    assert "reactgraph resume t --db" in line
