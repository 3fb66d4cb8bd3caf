"""The command line, in a subprocess as a person runs it, and in-process (``run_main``: what a
command says and stores, without an interpreter start)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from reactgraph.app.cli import main
from tests.fakes import FakeOpenAIServer, seed_responder
from tests.inprocess import run_main

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


def environment(env: dict | None = None) -> dict[str, str]:
    """This process's environment without the OpenAI variables, plus ``env``."""
    variables = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    variables.update(env or {})
    return variables


def scratch() -> Path:
    """A folder of its own for a command to run in: whatever it writes by default (runs/,
    relative paths) stays out of the checkout."""
    return Path(tempfile.mkdtemp(prefix="reactgraph-cli-"))


def asked(server: FakeOpenAIServer, db: str, thread: str) -> list[str]:
    """The arguments of ``ask`` putting "How many years apart?" to ``server`` on ``thread``."""
    question = "How many years apart?"
    return ["ask", question, "--base-url", server.url, "--db", db, "--thread", thread]


def cli(
    *args: str,
    env: dict | None = None,
    cwd: Path | None = None,
    timeout: float = 600,  # a bound against a hang: commands on 2 loaded cores take a while
    **kwargs: object,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reactgraph.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment(env),
        cwd=cwd or scratch(),
        **kwargs,
    )


def popen(
    *args: str, env: dict | None = None, held: bool = False, group: bool = False
) -> subprocess.Popen[str]:
    """The command line started in the background (for a test that interrupts or races it);
    ``held``: SIGINT blocked when it starts, so a SIGINT sent at once is pending before the
    interpreter runs a line of ours; ``group``: in a process group of its own, for a Ctrl-C
    that reaches every process of it, as a terminal's."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if held else None
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "reactgraph.app.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(env),
            cwd=scratch(),
            start_new_session=group,
        )
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def lines_of(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a results file ([] before it exists)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], lines


def test_demo_runs_offline_and_answers_48() -> None:
    result = cli("demo")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "SCRIPTED" in out
    assert "Action: search[Eiffel Tower]" in out
    assert "Observation: [Eiffel Tower]" in out and "1889" in out
    assert "Action: calculator[1937-1889]" in out and "Observation: 48" in out
    assert "Answer: 48" in out and out.rstrip().endswith("Status: answered")
    assert "Traceback" not in result.stderr


def test_ask_then_threads_show_and_resume(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    openai_server.responder = seed_responder
    db = str(tmp_path / "runs.sqlite")
    result = cli(*asked(openai_server, db, "t1"))
    assert result.returncode == 0, result.stderr
    assert "turn 1 (action)" in result.stdout and "Observation: 48" in result.stdout
    assert "tokens" in result.stdout and "Answer: 48" in result.stdout
    threads = run_main("threads", "--db", db)
    assert "t1" in threads.stdout and "answered" in threads.stdout
    assert "How many years apart?" in threads.stdout
    show = run_main("show", "t1", "--db", db)
    assert "Final Answer: 48" in show.stdout and "4 turns" in show.stdout
    resume = run_main("resume", "t1", "--db", db, env={"OPENAI_BASE_URL": openai_server.url})
    assert resume.returncode == 0 and "already finished" in resume.stdout
    # A new question on the finished thread goes on with its conversation (history_runs).
    again = run_main("ask", "q", "--base-url", openai_server.url, "--db", db, "--thread", "t1")
    assert again.returncode == 0, again.stderr
    assert "Answer: 48" in again.stdout
    opening = openai_server.requests[-1]["messages"][0]["content"]
    assert "Asked: How many years apart?\nAnswered: 48\n\nQuestion: q" in opening


@pytest.mark.kills
def test_ctrl_c_saves_the_run_and_resume_finishes_it(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    openai_server.latency_s = 1.0
    db = str(tmp_path / "runs.sqlite")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reactgraph.app.cli",
            "ask",
            "How many years?",
            "--base-url",
            openai_server.url,
            "--db",
            db,
            "--thread",
            "t2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=Path(__file__).resolve().parents[1],
    )
    deadline = time.time() + 60
    while len(openai_server.requests) < 2 and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "The run is saved" in err and f"reactgraph resume t2 --db {db}" in err
    assert "Traceback" not in err
    assert "interrupted" in cli("threads", "--db", db).stdout
    openai_server.latency_s = 0
    resume = cli("resume", "t2", "--db", db, env={"OPENAI_BASE_URL": openai_server.url})
    assert resume.returncode == 0, resume.stderr
    assert "Answer: 48" in resume.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["ask", "q"], "set OPENAI_API_KEY"),
        (["ask", "q", "--max-turns", "-3"], "--max-turns: must be >= 1, got -3"),
        (["ask", "q", "--variant", "nope"], "invalid choice: 'nope'"),
        (
            ["ask", "q", "--corpus", "/no/such/folder", "--base-url", "http://127.0.0.1:9/v1"],
            "corpus folder not found",
        ),
        (["show", "ghost"], "no database at"),
        (["resume", "ghost"], "no database at"),
        (["fly"], "invalid choice: 'fly'"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    args: list[str], fragment: str, tmp_path: Path
) -> None:
    db = ["--db", str(tmp_path / "runs.sqlite")] if args[0] in ("show", "resume", "ask") else []
    one_line_error(run_main(*args, *db), fragment)


def test_an_unreadable_database_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_text("this is not a database " * 100)
    one_line_error(run_main("threads", "--db", str(garbage)), "cannot open the database")
    one_line_error(run_main("threads", "--db", str(tmp_path)), "is not a file")


def test_in_process(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["demo"]) == 0
    assert "Answer: 48" in capsys.readouterr().out
    assert main(["threads", "--db", str(tmp_path / "empty.sqlite")]) == 0
    assert "no threads" in capsys.readouterr().out
    assert main(["show", "ghost", "--db", str(tmp_path / "empty.sqlite")]) == 2


def test_graph_prints_mermaid_and_writes_a_png(tmp_path: Path) -> None:
    mermaid = run_main("graph", "notes")
    assert mermaid.returncode == 0, mermaid.stderr
    assert "parse_reply -.-> update_notes;" in mermaid.stdout
    assert "update_notes -.-> stop_run;" in mermaid.stdout
    target = tmp_path / "notes.png"
    png = run_main("graph", "compaction", "--png", str(target))
    assert png.returncode == 0, png.stderr
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_notes_in_the_database_with_the_notes_variant(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    from reactgraph.storage.database import open_db

    def responder(request: dict) -> str:
        if not any("Observation:" in str(m["content"])[:12] for m in request["messages"]):
            return "Action: update_notes[- [ ] find both years]"
        return "Final Answer: 48"

    openai_server.responder = responder
    db = str(tmp_path / "runs.sqlite")
    result = run_main(
        "ask",
        "q",
        "--variant",
        "notes",
        "--notes-in-db",
        "--base-url",
        openai_server.url,
        "--db",
        db,
        "--thread",
        "n1",
    )
    assert result.returncode == 0, result.stderr
    assert "find both years" in run_main("show", "n1", "--db", db).stdout
    with open_db(db) as (_, store):
        assert store.get(("reactgraph", "notes"), "n1").value["text"] == "- [ ] find both years"
    assert not (tmp_path / "runs").exists()
