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
from tests.fakes import FakeOpenAIServer, colour_graph, dying_graph, seed_responder
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


def workers_of(pid: int) -> list[int]:
    """The worker processes of a batch (not multiprocessing's resource tracker)."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    workers = []
    for child in map(int, found.stdout.split()):
        command = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"spawn_main" in command and b"resource_tracker" not in command:
            workers.append(child)
    return workers


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
    first = popen(
        "batch", str(questions), "--out", str(tmp_path / "r.jsonl"), "--db",
        str(tmp_path / "runs.sqlite"), "--workers", "2", "--base-url", openai_server.url,
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
