"""Approvals from the command line, in subprocesses as a person runs them: ``ask --approve``
asks at the terminal (y / e / n / r) and goes on with each answer; a kill while it waits loses
nothing, the thread is listed as waiting and ``resume`` asks again; a batch never waits, its
runs that need a person end ``awaiting_approval`` and are written once they have moved on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.fakes import FakeOpenAIServer, seed_responder
from tests.test_cli import cli, environment, lines_of, scratch

pytestmark = pytest.mark.slow

QUESTION = "How many years apart?"
WAIT_S = 300  # a loaded machine starts a command slowly; each wait ends as soon as it holds


class Running:
    """A command started with its input open, its output read as it comes."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reactgraph.app.cli", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(),
            cwd=scratch(),
        )
        self.out: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.out.append(line)

    def wait_for(self, fragment: str, count: int = 1) -> None:
        deadline = time.time() + WAIT_S
        while sum(fragment in line for line in self.out) < count:
            ended = self.process.poll() is not None and not self._reader.is_alive()
            assert not ended, f"it ended ({self.process.returncode}):\n{''.join(self.out)}"
            assert time.time() < deadline, f"{fragment!r} never came:\n{''.join(self.out)}"
            time.sleep(0.05)

    def answer(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def finish(self) -> tuple[int, str, str]:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(WAIT_S)
        self._reader.join(WAIT_S)
        assert self.process.stderr is not None
        return code, "".join(self.out), self.process.stderr.read()


def model_at(server: FakeOpenAIServer) -> list[str]:
    server.responder = seed_responder
    return ["--base-url", server.url]


def test_ask_asks_at_the_terminal_and_goes_on_with_each_answer(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db = str(tmp_path / "runs.sqlite")
    approve = ["--approve", "search", "--approve", "calculator"]
    ask = Running("ask", QUESTION, *model_at(openai_server), "--db", db, "--thread", "t1", *approve)
    ask.wait_for("Approval needed for turn 1: search[Eiffel Tower]")
    ask.answer("y")
    ask.wait_for("Approval needed for turn 2: search[Golden Gate Bridge]")
    ask.answer("maybe")  # not a choice: asked again
    ask.answer("e")
    ask.answer("Golden Gate")
    ask.wait_for("Approval needed for turn 3: calculator[1937-1889]")
    ask.answer("r")
    ask.answer("48")
    code, out, err = ask.finish()
    assert code == 0, (out, err)
    assert "Approved by" in out and "(terminal)" in out
    assert "Edited by" in out and "ran search[Golden Gate] instead of search[Golden Gate" in out
    assert "Answered in the tool's place by" in out and "Observation: 48" in out
    assert "Answer: 48" in out and "Traceback" not in err
    show = cli("show", "t1", "--db", db).stdout
    assert "Approved by" in show and "Edited by" in show and "Status: answered" in show


def test_a_refusal_with_a_reason_is_the_observation(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db = str(tmp_path / "runs.sqlite")
    ask = Running(
        "ask", QUESTION, *model_at(openai_server), "--db", db, "--thread", "t1",
        "--approve", "calculator",
    )  # fmt: skip
    ask.wait_for("Approval needed for turn 3: calculator[1937-1889]")
    ask.answer("n")
    ask.answer("do it by hand")
    code, out, _ = ask.finish()
    assert code == 0 and "Refused by" in out and ": do it by hand" in out
    refused = "A person refused this action, so it did not run. Their reason: do it by hand"
    assert f"Observation: {refused}" in out
    # The model read the refusal as the Observation of its Action.
    assert refused in json.dumps(openai_server.requests[-1]["messages"])


@pytest.mark.kills
def test_a_kill_while_waiting_loses_nothing_and_resume_asks_again(
    openai_server: FakeOpenAIServer, db: str
) -> None:
    model = model_at(openai_server)
    ask = Running("ask", QUESTION, *model, "--db", db, "--thread", "t1", "--approve", "all")
    ask.wait_for("Approval needed for turn 1: search[Eiffel Tower]")
    ask.process.send_signal(signal.SIGKILL)
    ask.process.wait(WAIT_S)
    calls = len(openai_server.requests)
    assert calls == 1
    threads = cli("threads", "--db", db)
    assert "t1" in threads.stdout and "awaiting_approval" in threads.stdout, threads.stdout
    show = cli("show", "t1", "--db", db).stdout
    assert "Status: awaiting_approval" in show
    assert "Waiting for a person's decision on turn 1: search[Eiffel Tower]" in show
    # Nobody answers: it keeps waiting, and says how to decide.
    idle = cli("resume", "t1", "--db", db, *model, input="")
    assert idle.returncode == 1 and "Approval needed for turn 1" in idle.stdout
    decide = "awaiting_approval (search[Eiffel Tower]). Decide with:\n  reactgraph resume t1"
    assert decide in idle.stdout
    resume = cli("resume", "t1", "--db", db, *model, input="y\ny\ny\n")
    assert resume.returncode == 0, (resume.stdout, resume.stderr)
    assert resume.stdout.count("Approval needed") == 3 and "Answer: 48" in resume.stdout
    assert len(openai_server.requests) == calls + 3  # no model call was made again
    assert "answered" in cli("threads", "--db", db).stdout


def test_a_batch_never_waits_and_writes_a_waiting_run_once_it_moved_on(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({"id": n, "question": f"{QUESTION} ({n})"}) + "\n" for n in (1, 2))
    )
    results, db = tmp_path / "r.jsonl", str(tmp_path / "runs.sqlite")
    batch = [
        "batch", str(questions), "--out", str(results), "--db", db, *model_at(openai_server),
        "--approve", "calculator", "--workers", "1",
    ]  # fmt: skip
    first = cli(*batch, input="y\n" * 10, timeout=WAIT_S)
    assert first.returncode == 0, first.stderr
    lines = lines_of(results)
    assert [line["status"] for line in lines] == ["awaiting_approval"] * 2
    assert all(line["error"] is None and line["turns"] == 2 for line in lines)
    assert "2 question(s) wait for a person's approval" in first.stdout
    # Run again while they wait: nothing new is written.
    again = cli(*batch, timeout=WAIT_S)
    assert again.returncode == 0 and lines_of(results) == lines
    # A person decides on one; the next run writes its result, which now counts.
    thread = lines[0]["thread_id"]
    resume = cli("resume", thread, "--db", db, "--base-url", openai_server.url, input="y\n")
    assert resume.returncode == 0 and "Answer: 48" in resume.stdout
    cli(*batch, timeout=WAIT_S)
    after = lines_of(results)
    assert len(after) == 3 and after[-1]["thread_id"] == thread
    assert (after[-1]["status"], after[-1]["answer"]) == ("answered", "48")
