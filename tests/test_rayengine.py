"""The Ray engine on real Ray: a local Ray started for one command and stopped after it, the same
result files as the process pool, and a cluster of two nodes on this machine (Ray's own
``ray.cluster_utils.Cluster``) that loses a node in the middle of a 40-question batch."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactgraph.app.batchfile import run_file
from reactgraph.app.cli import main
from reactgraph.app.engines import Flight, run_jobs
from reactgraph.app.eval import run as eval_run
from reactgraph.app.pool import Job
from reactgraph.app.recipe import Recipe
from tests import test_cli
from tests.fakes import FakeOpenAIServer, Gate, echo_runner, seed_responder
from tests.test_cli import lines_of
from tests.test_eval_stream import Made, eval_items
from tests.test_eval_stream import recipe as eval_recipe
from tests.test_persistence import postgres_url

# Ray starts: `make test-cluster` runs them, `make test` does not.
pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.fixture(autouse=True)
def _needs_ray() -> None:
    """Ray (``make test-cluster`` installs it) is asked for when a test here runs, not when the
    module is collected: another target's run, which deselects these, then says nothing of it."""
    pytest.importorskip("ray")


ROOT = Path(__file__).resolve().parents[1]
# Every node on the loopback address, never the machine's network interface (conftest sets it
# for this process before ray is imported; the commands run here get it too).
LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def ray_environment(tmp: Path) -> dict[str, str]:
    """What Ray's processes (nodes, actors) need here: this checkout importable (the tests'
    fakes cross into actors by name), and a quick start on a loaded machine. The dev extra's
    jsonschema imports rfc3987-syntax when it is installed (for Jupyter), which compiles a grammar
    at import: seconds of CPU in every Ray process, long enough for a raylet on a busy 2-core
    machine to give up waiting for its agents. Ray never needs it; a stub keeps it out."""
    stub = tmp / "stub" / "rfc3987_syntax"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text('raise ImportError("not needed by the tests\' Ray")\n')
    path = [str(ROOT), str(stub.parent), os.environ.get("PYTHONPATH", "")]
    return {**LOOPBACK, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def without_timings(lines: list[dict[str, Any]], *drop: str) -> list[dict[str, Any]]:
    gone = {"seconds", *drop}
    kept = [{k: v for k, v in line.items() if k not in gone} for line in lines]
    return sorted(kept, key=lambda line: json.dumps(line, sort_keys=True))


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The command line in a subprocess; Ray's start-up on a busy machine takes a while."""
    return test_cli.cli(*args, env=env, timeout=600)


def ray_processes() -> list[str]:
    found = subprocess.run(["pgrep", "-af", "raylet|gcs_server"], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def test_batch_and_eval_write_the_same_results_through_either_engine(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    env = ray_environment(tmp_path)
    before = ray_processes()
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({"id": i, "question": f"Q{i}?"}) + "\n" for i in range(6))
    )
    batches = {}
    for engine in ("local", "ray"):
        out, db = tmp_path / f"{engine}.jsonl", tmp_path / f"{engine}.sqlite"
        run = cli(
            "batch", str(questions), "--out", str(out), "--db", str(db), "--engine", engine,
            "--base-url", openai_server.url, "--workers", "2", env=env,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert run.stderr == "", run.stderr  # nothing of Ray's own on the command's stderr
        batches[engine] = lines_of(out)
    # The thread ids differ only in the database each batch had; the rest is the same.
    assert without_timings(batches["local"]) == without_timings(batches["ray"])
    evals = {}
    for engine in ("local", "ray"):
        folder = tmp_path / f"eval-{engine}"
        run = cli(
            "eval", "--bundled", "--limit", "3", "--variants", "transcript,notes",
            "--out", str(folder), "--engine", engine, "--base-url", openai_server.url,
            env=env,
        )  # fmt: skip
        assert run.returncode in (0, 1), run.stderr
        evals[engine] = lines_of(folder / "results.jsonl")
    assert len(evals["ray"]) == 6
    assert without_timings(evals["local"]) == without_timings(evals["ray"])
    until_ray_is(before)  # the local Ray each command started is stopped with it


def test_a_ctrl_c_on_a_ray_batch_stops_its_ray_and_a_rerun_does_the_rest(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    from tests import test_interrupts as ctrl_c

    gate = ctrl_c.held_from(6)  # a run or so has finished, others are mid-call
    openai_server.responder = gate
    env, before = ray_environment(tmp_path), ray_processes()
    args, lines = ctrl_c.many(openai_server, tmp_path, "batch", 2)
    args += ["--engine", "ray"]
    process = test_cli.popen(*args, group=True, env=env)  # a terminal's Ctrl-C reaches Ray too
    ctrl_c.until(lambda: bool(gate.held), process)
    assert ctrl_c.interrupted_many(process, lines) < 4
    gate.open()
    until_ray_is(before)  # the local Ray it started went with it
    ctrl_c.rerun_does_the_rest(args, lines, env=env, timeout=600)
    until_ray_is(before)


def until_ray_is(before: list[str]) -> None:
    """Until Ray's processes are those there were ``before``."""
    deadline = time.monotonic() + 60
    while ray_processes() != before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray_processes() == before


# --- Two nodes, one killed mid-batch -----------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A head and a second node of one CPU each, this process their driver; shut down after.
    The module's last test kills the second node."""
    import ray
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as patch:
        for name, value in ray_environment(tmp_path_factory.mktemp("ray")).items():
            patch.setenv(name, value)
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 1,
                "node_ip_address": "127.0.0.1",
                "include_dashboard": False,
            },
        )
        try:
            cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()


def test_the_driver_hands_out_jobs_as_slots_free_up_never_all_at_once(cluster: Any) -> None:
    taken = yielded = most = 0

    def jobs() -> Iterator[Job]:
        nonlocal taken, most
        for index in range(300):
            taken += 1
            most = max(most, taken - yielded)
            yield Job(index, f"question {index} pause=0.01", f"t{index}")

    flight = Flight()
    seen: list[int] = []
    for result in run_jobs(
        echo_runner, jobs(), concurrency=6, engine="ray", flight=flight, db=postgres_url()
    ):
        yielded += 1
        assert flight.running <= 6
        assert result["answer"] == f"question {result['index']} pause=0.01"
        seen.append(result["index"])
    assert sorted(seen) == list(range(300))  # each once
    # At most the six in flight and the one waiting for a slot were ever taken from the source.
    assert most <= 7, most


def test_an_eval_through_ray_makes_each_job_only_when_a_slot_is_free(
    cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = Made(monkeypatch)
    folder = tmp_path / "out"
    lines = []
    for line in eval_run.run_eval(
        eval_recipe(postgres_url()),
        eval_items(100),
        ["transcript", "notes"],
        folder,
        concurrency=6,
        engine="ray",
    ):
        count.read += 1
        lines.append(line)
    assert count.made == len(lines) == 200
    assert all(line["em"] == 1.0 and line["error"] is None for line in lines)
    # The six in flight and the one waiting for a slot, never more, made ahead of results.
    assert count.most <= 7, count.most


def steps(request: dict[str, Any]) -> tuple[str, int]:
    """A model call's question and how many Observations it had seen (its step)."""
    first = str(request["messages"][0]["content"])
    question = first.rsplit("Question:", 1)[-1].strip()
    done = sum(str(m["content"]).startswith("Observation:") for m in request["messages"])
    return question, done


class Watch(logging.Handler):
    """The engine's log records as they come, with a wait for what they add up to."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []
        self._changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        with self._changed:
            self.messages.append(record.getMessage())
            self._changed.notify_all()

    def matches(self, pattern: str) -> list[str]:
        with self._changed:
            found = (re.search(pattern, message) for message in self.messages)
            return [match.group(1) for match in found if match]

    def wait_for(self, pattern: str, count: int, timeout: float) -> list[str]:
        with self._changed:
            self._changed.wait_for(lambda: len(self.matches(pattern)) >= count, timeout)
        return self.matches(pattern)


@pytest.fixture
def watch() -> Iterator[Watch]:
    engine = logging.getLogger("reactgraph.app.rayengine")
    handler, level = Watch(), engine.level
    engine.addHandler(handler)
    engine.setLevel(logging.DEBUG)
    yield handler
    engine.removeHandler(handler)
    engine.setLevel(level)


FREE = 16
"""Questions 0-15 run freely; from 16 on, each run is held at its second model call."""
SLOTS = 4
"""Each node's actor runs ``concurrency`` 8 / 2 actors jobs at a time."""


@pytest.mark.cluster
def test_a_two_node_batch_loses_a_node_and_still_answers_each_question_once(
    cluster: Any,
    openai_server: FakeOpenAIServer,
    tmp_path: Path,
    watch: Watch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({"id": i, "question": f"Q{i}?"}) + "\n" for i in range(40))
    )
    out = tmp_path / "r.jsonl"
    # A SQLite file cannot be shared by two nodes: refused in one line, before anything runs.
    code = main(
        ["batch", str(questions), "--out", str(out), "--engine", "ray",
         "--db", str(tmp_path / "runs.sqlite"), "--base-url", openai_server.url]
    )  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "SQLite" in err[0] and "2 nodes" in err[0] and "postgresql://" in err[0]
    assert not openai_server.requests

    # Four model calls a question. The first 16 questions run through; each later one stops
    # at its second call (its first step checkpointed), so once 8 are held every run in
    # flight, on either node, is stopped mid-way: a known state to kill a node in, however
    # slowly the machine started the actors.
    def number(request: dict[str, Any]) -> int:
        return int(steps(request)[0].strip("Q?"))

    gate = Gate(seed_responder, hold=lambda r: number(r) >= FREE and steps(r)[1] == 1)
    openai_server.responder = gate
    openai_server.latency_s = 0.1
    recipe = Recipe(
        variant="transcript",
        model="test-model",
        base_url=openai_server.url,
        timeout=900.0,  # a held call must not time out (its client would ask again)
        corpus=None,
        settings={"tool_timeout": 10.0},
        db=postgres_url(),
        concurrency=8,
    )
    outcome: dict[str, int] = {}
    batch = threading.Thread(
        target=lambda: outcome.update(code=run_file(recipe, str(questions), str(out), engine="ray"))
    )
    batch.start()
    try:
        held = gate.wait_held(2 * SLOTS, timeout=600)
        assert len(lines_of(out)) == FREE  # a slot frees only as a result is written
        nodes = set(watch.matches(r"ran on node (\w+)"))
        assert len(nodes) == 2, nodes  # the first 16 ran on both nodes
        calls_at_kill = len(openai_server.requests)
        assert calls_at_kill == FREE * 4 + 2 * SLOTS * 2

        # The second node dies with its actor's four runs in flight. The driver sends each
        # again; their old calls (from a process now gone) are never answered.
        cluster.remove_node(next(iter(cluster.worker_nodes)), allow_graceful=False)
        resent = watch.wait_for(r"job (\d+) sent again", SLOTS, timeout=300)
        assert len(resent) == SLOTS, resent
        lost = {f"Q{int(index)}?" for index in resent}  # job index = question id here
        gate.open(drop=[r for r in held if steps(r)[0] in lost])
        batch.join(900)
    finally:
        gate.open()
        gate.close()
    assert not batch.is_alive()
    assert outcome["code"] == 0

    lines = lines_of(out)
    assert sorted(line["id"] for line in lines) == list(range(40))  # each once
    wrong = [line for line in lines if line["status"] != "answered" or line["error"] is not None]
    assert not wrong, wrong
    # Resumed from their checkpoints: the lost runs asked their second step again (the call
    # the node died in) and nothing before it. Starting over would ask their first again.
    asked = Counter(steps(request) for request in openai_server.requests)
    again = {step: times for step, times in asked.items() if times > 1}
    assert again == {(question, 1): 2 for question in lost}, again
    assert len(asked) == 40 * 4
    assert len(openai_server.requests) == 40 * 4 + SLOTS

    # A re-run has nothing left to do.
    calls = len(openai_server.requests)
    assert run_file(recipe, str(questions), str(out), engine="ray") == 0
    assert len(openai_server.requests) == calls and len(lines_of(out)) == 40
