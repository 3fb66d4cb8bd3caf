"""Choosing the engine: the local pool stays the default, a wrong engine or a stray address is
refused before anything runs, and Ray's absence is one line. (The Ray runs themselves are in
``test_rayengine``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactgraph.app.cli import main
from reactgraph.app.engines import Flight, check_engine, run_jobs
from reactgraph.app.pool import Job
from reactgraph.batch import run_processes
from tests.fakes import colour_graph, echo_runner


def test_an_unknown_engine_or_an_address_without_ray_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="engine must be one of local, ray"):
        list(run_processes(colour_graph, ["q"], engine="spark"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs engine='ray'"):
        run_jobs(echo_runner, [Job(0, "q", "t")], address="ray://head:10001")
    with pytest.raises(TypeError, match="address must be a str"):
        check_engine("ray", 10001)


def test_the_local_engine_counts_its_runs_in_flight() -> None:
    flight = Flight()
    jobs = [Job(i, f"q{i}", f"t{i}") for i in range(5)]
    seen = []
    for result in run_jobs(echo_runner, jobs, workers=1, concurrency=2, flight=flight):
        seen.append((result["index"], flight.running))
    assert sorted(index for index, _ in seen) == list(range(5))
    assert [running for _, running in seen] == [2, 2, 2, 1, 0]


def test_a_ray_address_without_the_ray_engine_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "one"}) + "\n")
    code = main(
        [
            "batch",
            str(questions),
            "--out",
            str(tmp_path / "r.jsonl"),
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--ray-address",
            "auto",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "--ray-address is for --engine ray" in err[0]
    assert not (tmp_path / "r.jsonl").exists()
