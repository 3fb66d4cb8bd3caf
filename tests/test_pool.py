"""Runs shared out among worker processes: every question answered exactly once, a dead worker
costing only the runs it held, and ``reactgraph batch --workers`` across kills and re-runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from reactgraph.batch import run_processes
from tests.fakes import FakeOpenAIServer, colour_graph, dying_graph, probe_graph, seed_responder
from tests.test_cli import cli, popen

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow


def test_every_question_is_answered_once_across_workers() -> None:
    questions = [f"What colour is the tallow finch in box {i}?" for i in range(12)]
    results = list(run_processes(colour_graph, questions, workers=2, concurrency=4))
    assert sorted(r["index"] for r in results) == list(range(12))
    assert len({r["thread_id"] for r in results}) == 12
    assert all(r["error"] is None and r["status"] == "answered" for r in results)


@pytest.mark.kills
def test_a_dead_worker_costs_only_the_runs_it_held() -> None:
    questions = ["fine 1", "please die", "fine 2", "fine 3", "fine 4", "fine 5"]
    # One run in flight per worker: the dead one held only the question that killed it.
    runs = run_processes(dying_graph, questions, workers=2, concurrency=2)
    results = {r["index"]: r for r in runs}
    assert sorted(results) == list(range(6))
    assert "died" in (results[1]["error"] or "")
    assert [i for i, r in results.items() if r["status"] == "answered"] == [0, 2, 3, 4, 5]


@pytest.mark.kills
def test_a_ctrl_c_never_reaches_a_worker_and_the_callers_stays_as_it_was() -> None:
    # A terminal's Ctrl-C reaches the workers too; one that ended on it would fail its runs.
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    questions = ["please interrupt", "fine 1", "please interrupt", "fine 2"]
    results = list(run_processes(dying_graph, questions, workers=2, concurrency=2))
    assert sorted(r["index"] for r in results) == [0, 1, 2, 3]
    assert all(r["error"] is None and r["status"] == "answered" for r in results), results
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before  # its Ctrl-C still works


def test_workers_start_preloaded_with_the_environment_of_their_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Workers fork from one server that imported the model client once; each is given the
    environment as it is when it starts, not as it was when the server started."""
    questions = [f"q{i}" for i in range(4)]
    # Each batch's first answer waits for its second worker (else the first worker to start
    # could answer all four before the other has started).
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("REACTGRAPH_PROBE", "first")
    monkeypatch.setenv("REACTGRAPH_PROBE_GATE", str(tmp_path / "first"))
    first = list(run_processes(probe_graph, questions, workers=2, concurrency=2))
    monkeypatch.setenv("REACTGRAPH_PROBE", "second")  # the server runs on from the first batch
    monkeypatch.setenv("REACTGRAPH_PROBE_GATE", str(tmp_path / "second"))
    second = list(run_processes(probe_graph, questions, workers=2, concurrency=2))
    for batch, probe in ((first, "first"), (second, "second")):
        answers = [r["answer"] or "" for r in batch]
        assert all(f"preloaded=True probe={probe} " in a for a in answers), answers
        assert len({a.rsplit("pid=", 1)[1] for a in answers}) == 2  # both workers answered
    from multiprocessing import forkserver

    assert forkserver._forkserver._forkserver_pid is not None  # one server, kept for the next


def test_the_multiprocessing_internals_the_command_ends_are_there() -> None:
    """``leftovers.helpers`` ends the fork server and the resource tracker through CPython's
    own objects: this fails first if a Python release renames them."""
    import importlib

    from reactgraph.app.leftovers import _HELPERS

    for module_name, name, fd_name, pid_name in _HELPERS:
        own = getattr(importlib.import_module(module_name), name)
        assert all(hasattr(own, a) for a in (fd_name, pid_name, "_lock")), module_name


def test_a_batch_on_workers_leaves_no_process_when_it_ends(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Its workers, their fork server and the resource tracker are gone when it exits."""
    from tests.test_interrupts import alive_in_group

    openai_server.responder = seed_responder
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"question": f"q {i}"}) + "\n" for i in range(4)))
    process = popen(
        "batch", str(questions), "--out", str(tmp_path / "r.jsonl"), "--db",
        str(tmp_path / "runs.sqlite"), "--workers", "2", "--base-url", openai_server.url,
        group=True,
    )  # fmt: skip
    _, err = process.communicate(timeout=300)  # a bound against a hang
    assert process.returncode == 0, err
    assert not alive_in_group(process.pid), alive_in_group(process.pid)


def children_of(pid: int) -> list[int]:
    """The processes ``pid`` started, with what started them (their command lines)."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(child) for child in found.stdout.split()]


def command_of(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


def workers_of(pid: int) -> list[int]:
    """The worker processes of a batch: the children of its fork server (not multiprocessing's
    resource tracker, nor the server itself)."""
    servers = [c for c in children_of(pid) if b"forkserver" in command_of(c)]
    return [worker for server in servers for worker in children_of(server)]


@pytest.mark.kills
def test_batch_workers_a_killed_worker_and_a_rerun_answer_each_question_once(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    hold = {"on": True}

    def responder(body: dict) -> str:
        question = str(body["messages"][0]["content"]).rsplit("Question:", 1)[-1]
        while int(question.split()[-1]) >= 2 and hold["on"]:
            time.sleep(0.05)  # held until a worker is killed: both hold runs by then
        return seed_responder(body)

    openai_server.responder = responder
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({"question": f"question {i}", "id": i}) + "\n" for i in range(8))
    )
    results, db = tmp_path / "r.jsonl", str(tmp_path / "runs.sqlite")
    args = [
        "batch",
        str(questions),
        "--out",
        str(results),
        "--db",
        db,
        "--workers",
        "2",
        "--base-url",
        openai_server.url,
    ]
    first = popen(*args)
    deadline = time.time() + 90
    while openai_server.active < 6 and time.time() < deadline:
        time.sleep(0.05)
    workers = workers_of(first.pid)
    assert len(workers) == 2, workers
    os.kill(workers[0], signal.SIGKILL)  # one worker dies, whatever it held
    hold["on"] = False
    _, err = first.communicate(timeout=120)
    assert first.returncode == 1, err  # the runs the dead worker held failed...
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    assert any("died" in (line["error"] or "") for line in lines)
    second = cli(*args)  # ...and the re-run finishes them
    assert second.returncode == 0, second.stderr
    final = [json.loads(line) for line in results.read_text().splitlines()]
    answered = [line["key"] for line in final if not line["error"]]
    assert sorted(answered) == sorted({str(i) for i in range(8)})  # each once, none lost
    assert len(answered) == len(set(answered))


@pytest.mark.kills
def test_the_workers_of_a_killed_batch_end_with_it(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A SIGKILL of the batch alone (an OOM kill: no stop, no clean-up) while its workers are
    in the middle of model calls: they end too, rather than run on as orphans."""
    hold = {"on": True}

    def responder(body: dict) -> str:
        while hold["on"]:
            time.sleep(0.05)  # every worker in a model call until the test is done
        return seed_responder(body)

    openai_server.responder = responder
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"question": f"q {i}"}) + "\n" for i in range(4)))
    # One run in each worker at a time: two calls held are one in each.
    first = popen(
        "batch", str(questions), "--out", str(tmp_path / "r.jsonl"), "--db",
        str(tmp_path / "runs.sqlite"), "--workers", "2", "--concurrency", "2", "--base-url",
        openai_server.url,
    )  # fmt: skip
    try:
        deadline = time.time() + 90
        while openai_server.active < 2 and time.time() < deadline:
            time.sleep(0.05)
        workers = workers_of(first.pid)
        assert len(workers) == 2, workers
        first.kill()
        first.communicate(timeout=120)  # its output ends once no worker holds it open
        deadline = time.time() + 60  # a bound against a worker that never ends, not a timing
        while any(map(running, workers)) and time.time() < deadline:
            time.sleep(0.05)
        assert not [w for w in workers if running(w)]
    finally:
        hold["on"] = False


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, nor a zombie waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
