"""Ctrl-C at every moment of ``ask``, ``resume``, ``batch`` and ``eval``: exit 130, the hint, no
traceback, and a thread (or a re-run) that finishes the work. Each moment is reached by a marker,
never by a sleep: the test server holding the Nth request, a checkpoint count, a file a tool
writes, or a SIGINT sent before the process has run a line of ours."""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeOpenAIServer, Gate, seed_responder
from tests.test_cli import cli, lines_of, popen

# Real processes interrupted: `make test-kills` runs them, `make test` does not.
pytestmark = [pytest.mark.slow, pytest.mark.kills]

WITHIN_S = 600  # a bound for a marker that never comes (a hang), not a timing


def held_from(at: int) -> Gate:
    """A responder for the test server that holds every request from the ``at``-th on."""
    numbers = itertools.count(1)
    return Gate(seed_responder, hold=lambda _: next(numbers) >= at)


def until(condition: Callable[[], bool], process: subprocess.Popen[str] | None = None) -> None:
    """Wait for a marker (a bound only against a hang)."""
    deadline = time.monotonic() + WITHIN_S
    while not condition():
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the command ended first ({process.returncode}): {out}\n{err}")
        assert time.monotonic() < deadline, "the marker never came"
        time.sleep(0.01)


def interrupted(process: subprocess.Popen[str], group: bool = False) -> str:
    """Ctrl-C; the stderr of a process that ended as promised."""
    if group:
        os.killpg(process.pid, signal.SIGINT)
    else:
        process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=WITHIN_S)
    assert process.returncode == 130, (process.returncode, out, err)
    assert "Traceback" not in err and "Exception" not in err, err
    return err


def alive_in_group(pgid: int) -> list[int]:
    """The live processes (not zombies) of process group ``pgid`` (Linux: reads /proc)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        state, _, group = stat.rsplit(")", 1)[1].split()[:3]
        if int(group) == pgid and state != "Z":
            found.append(int(entry))
    return found


def sigint_blocked(pid: int) -> bool:
    """Whether SIGINT is blocked in the process (Linux: its main thread's mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(status.split("SigBlk:", 1)[1].split()[0], 16)
    return bool(mask & 1 << (signal.SIGINT - 1))


def ask(server: FakeOpenAIServer, db: Path, thread: str = "t", **options: bool) -> Any:
    return popen(
        "ask", "How many years?", "--base-url", server.url, "--db", str(db), "--thread", thread,
        **options,
    )  # fmt: skip


def resumed(server: FakeOpenAIServer, db: Path, thread: str = "t") -> None:
    """`resume` finishes the run with the unkilled run's answer."""
    run = cli("resume", thread, "--db", str(db), env={"OPENAI_BASE_URL": server.url})
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert "Answer: 48" in run.stdout and "Status: answered" in run.stdout
    assert "already finished" not in run.stdout


def checkpoints(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as connection:
            return connection.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    except sqlite3.OperationalError:  # not made yet
        return 0


def test_a_ctrl_c_before_the_first_line_stops_ask_once_its_thread_is_recorded(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    db = tmp_path / "runs.sqlite"
    process = ask(openai_server, db, held=True)
    err = interrupted(process)  # sent before the interpreter has run a line of ours
    assert f"reactgraph resume t --db {db}" in err and "The run is saved" in err
    resumed(openai_server, db)


def test_a_ctrl_c_while_ask_starts_waits_for_the_thread_to_be_recorded(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    db = tmp_path / "runs.sqlite"
    process = ask(openai_server, db)
    until(db.exists, process)  # the database is being made: the thread is not recorded yet
    assert "reactgraph resume t" in interrupted(process)
    resumed(openai_server, db)


@pytest.mark.parametrize("at", [1, 3])
def test_a_ctrl_c_during_a_model_call(
    openai_server: FakeOpenAIServer, tmp_path: Path, at: int
) -> None:
    gate = held_from(at)
    openai_server.responder = gate
    db = tmp_path / "runs.sqlite"
    process = ask(openai_server, db)
    until(lambda: bool(gate.held), process)
    assert "reactgraph resume t" in interrupted(process)
    gate.open()
    resumed(openai_server, db)


@pytest.mark.parametrize("stored", [1, 4])
def test_a_ctrl_c_between_steps(
    openai_server: FakeOpenAIServer, tmp_path: Path, stored: int
) -> None:
    """Sent once ``stored`` checkpoints are written, while the steps run on. The second model
    call is held until the Ctrl-C is taken: on a loaded machine the rest of the run (a few
    fast steps) would otherwise finish before the stop, and resume would have nothing to do."""
    gate = held_from(2)
    openai_server.responder = gate
    db = tmp_path / "runs.sqlite"
    process = ask(openai_server, db)
    until(lambda: checkpoints(db) >= stored, process)
    assert "reactgraph resume t" in interrupted(process)
    gate.open()
    resumed(openai_server, db)


def holding_tool(server: FakeOpenAIServer, folder: Path, tag: str) -> tuple[Path, Path]:
    """A model that calls the MCP test server's ``hold`` tool (it writes ``marks/entered``,
    then waits for ``marks/release``), then answers; the marks folder and the servers.json
    (its server's processes marked ``tag``)."""
    pytest.importorskip("langchain_mcp_adapters")
    from tests.mcp_servers import stdio

    marks = folder / "marks"
    marks.mkdir()

    def responder(body: dict[str, Any]) -> str:
        if any(str(m["content"]).startswith("Observation:") for m in body["messages"]):
            return "Final Answer: 48"
        return f"Thought: wait.\nAction: hold[{marks}]"

    server.responder = responder
    servers = folder / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"local": stdio(tag)}}))
    return marks, servers


@pytest.mark.parametrize("group", [False, True])  # True: a terminal's, to the MCP server too
def test_a_ctrl_c_during_a_tool_call(
    openai_server: FakeOpenAIServer, tmp_path: Path, group: bool
) -> None:
    from tests.mcp_servers import processes

    tag = f"ctrl-c-{tmp_path.parent.name}-{tmp_path.name}"  # unique across workers
    marks, servers = holding_tool(openai_server, tmp_path, tag)
    db = tmp_path / "runs.sqlite"
    process = popen(
        "ask", "How many years?", "--mcp", str(servers), "--tool-timeout", "600",
        "--base-url", openai_server.url, "--db", str(db), "--thread", "t", group=group,
    )  # fmt: skip
    until((marks / "entered").exists, process)
    (server,) = processes(tag)  # it never sees a terminal's Ctrl-C: it is not its to take
    assert sigint_blocked(server)
    assert "reactgraph resume t" in interrupted(process, group)
    assert not processes(tag)  # the server has ended with the command
    (marks / "release").touch()  # the call runs again on resume (at least once), and returns
    resumed(openai_server, db)


def test_what_the_stop_does_to_a_run_is_never_recorded(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The stop ends the MCP server mid-call, so the call fails at once, while the stop still
    waits (10 s) for a process that ignores SIGTERM: the command's thread runs on, and it
    recorded the failure and the answer the model made of it. Its writes are parked now."""
    tag = f"halt-{tmp_path.parent.name}-{tmp_path.name}"  # unique across workers
    marks, servers = holding_tool(openai_server, tmp_path, tag)
    (marks / "stubborn").touch()
    db = tmp_path / "runs.sqlite"
    process = popen(
        "ask", "How many years?", "--mcp", str(servers), "--tool-timeout", "600",
        "--base-url", openai_server.url, "--db", str(db), "--thread", "t",
    )  # fmt: skip
    until(lambda: (marks / "entered").exists() and (marks / "stubborn-up").exists(), process)
    assert "reactgraph resume t" in interrupted(process)
    (marks / "release").touch()
    resumed(openai_server, db)  # not finished: the failed call and its answer were not kept


def test_a_ctrl_c_during_resume(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    gate = held_from(2)
    openai_server.responder = gate
    db = tmp_path / "runs.sqlite"
    first = ask(openai_server, db)
    until(lambda: bool(gate.held), first)
    interrupted(first)
    again = popen("resume", "t", "--db", str(db), "--base-url", openai_server.url)
    until(lambda: len(gate.held) >= 2, again)  # the resumed run's own model call
    assert f"reactgraph resume t --db {db}" in interrupted(again)
    gate.open()
    resumed(openai_server, db)


def many(server: FakeOpenAIServer, tmp_path: Path, command: str, workers: int) -> Any:
    """The arguments of a ``batch`` or ``eval`` of four questions, and its results file."""
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({"question": f"q{i}", "id": i, "answer": "48"}) + "\n" for i in range(4))
    )
    out = tmp_path / "out"
    if command == "batch":
        args = ["batch", str(questions), "--out", str(out), "--db", str(tmp_path / "r.sqlite")]
        lines = out
    else:
        args = ["eval", str(questions), "--out", str(out), "--variants", "transcript"]
        lines = out / "results.jsonl"
    args += ["--base-url", server.url, "--workers", str(workers), "--concurrency", "2"]
    return args, lines


def interrupted_many(process: subprocess.Popen[str], lines: Path) -> int:
    """A terminal's Ctrl-C (it reaches the workers too): what was kept is only finished runs."""
    err = interrupted(process, group=True)
    assert "run the same command again" in err
    # No process of its group outlives it: no worker, no starting one, no resource tracker.
    assert not alive_in_group(process.pid), alive_in_group(process.pid)
    kept = [(line["id"], line.get("status"), line.get("error")) for line in lines_of(lines)]
    assert all(error is None for _, _, error in kept), kept  # a stop is no run's failure
    return len(kept)


def rerun_does_the_rest(args: list[str], lines: Path, **options: Any) -> None:
    again = cli(*args, **options)
    shown = [(line["id"], line.get("status"), line.get("error")) for line in lines_of(lines)]
    assert again.returncode == 0, (again.stderr, shown)
    assert "Traceback" not in again.stderr
    ids = sorted(str(line["id"]) for line in lines_of(lines))
    assert ids == ["0", "1", "2", "3"], shown  # each question once: none lost, none run twice


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("command", ["batch", "eval"])
def test_a_ctrl_c_on_many_runs_keeps_what_finished_and_a_rerun_does_the_rest(
    openai_server: FakeOpenAIServer, tmp_path: Path, workers: int, command: str
) -> None:
    gate = held_from(6)  # a run or so has finished, others are mid-call
    openai_server.responder = gate
    args, lines = many(openai_server, tmp_path, command, workers)
    process = popen(*args, group=True)
    until(lambda: bool(gate.held), process)
    assert interrupted_many(process, lines) < 4
    gate.open()
    rerun_does_the_rest(args, lines)


@pytest.mark.parametrize("command", ["batch", "eval"])
def test_a_one_worker_run_ends_with_nothing_on_stderr(
    openai_server: FakeOpenAIServer, tmp_path: Path, command: str
) -> None:
    openai_server.responder = seed_responder
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "q", "answer": "48"}) + "\n")
    for i in range(3):  # it came every time, or nearly: three runs make a miss unlikely
        if command == "batch":
            args = ["batch", str(questions), "--out", str(tmp_path / f"o{i}.jsonl")]
        else:
            args = ["eval", str(questions), "--out", str(tmp_path / f"e{i}"), "--variants", "notes"]
        run = cli(*args, "--db", str(tmp_path / f"r{i}.sqlite"), "--base-url", openai_server.url)
        assert run.returncode == 0, run.stderr
        assert run.stderr == "", run.stderr


def test_the_command_starts_no_uname_for_its_model_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI client's first request asks ``platform.platform()``, which ran ``uname -p`` on
    the command's thread: a Ctrl-C then left that process to outlive the command."""
    import platform

    from reactgraph.app import leftovers

    def spawned(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(platform, "_uname_cache", None)  # a fresh uname(), as in a new process
    monkeypatch.setattr(subprocess, "check_output", spawned)
    leftovers.spare_uname()
    assert platform.platform().startswith("Linux") and platform.processor() == ""
