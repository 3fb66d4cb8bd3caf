"""A result's identity includes what changes its answer: the settings that change answers, the
model and its server, the corpus and the tools. An eval or a batch re-run under the same config
reuses every result; under another one it runs again and says why; a setting that cannot change
an answer (retries) reuses them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from reactgraph.app.batchfile import run_file
from reactgraph.app.eval import read_hotpotqa
from reactgraph.app.eval.run import read_results, run_eval
from tests.fakes import colour_model, echo_question_model, scripted_recipe

HOTPOT = Path(__file__).resolve().parent / "data" / "hotpot_mini.json"


def test_the_config_holds_what_changes_answers_and_nothing_else(tmp_path: Path) -> None:
    recipe = scripted_recipe(tmp_path / "runs.sqlite")
    config = recipe.config("notes")
    assert config["model"] == "scripted" and config["base_url"] is None
    assert config["settings"]["max_turns"] == 40  # the variant's default, not given
    assert config["settings"]["tool_timeout"] == 10.0
    for faults_only in ("model_retries", "retry_backoff_s", "notes_dir"):
        assert faults_only not in config["settings"]
    assert "window_turns" not in recipe.config("transcript")["settings"]
    # A batch's or an eval's question runs alone on its thread: history_runs cannot change it.
    assert "history_runs" not in config["settings"]
    assert config["tools"] == {"bundled": True, "mcp": None, "own": []}


def run(recipe, folder: Path, said: list[tuple[int, int, int]]) -> list[dict]:
    items, _ = read_hotpotqa(HOTPOT)
    on_start = lambda *counts: said.append(counts)  # noqa: E731
    return list(run_eval(recipe, items, ["transcript"], folder, workers=1, on_start=on_start))


def test_an_eval_reuses_its_results_only_under_the_same_config(tmp_path: Path) -> None:
    folder, said = tmp_path / "out", []
    recipe = scripted_recipe(tmp_path / "runs.sqlite", colour_model)
    first = run(recipe, folder, said)
    assert len(first) == 3 and said == [(3, 0, 0)]
    assert all(line["config"] == recipe.config("transcript") for line in first)
    assert run(recipe, folder, said) == [] and said[-1] == (0, 3, 0)  # all reused
    # A retry setting cannot change an answer: still reused.
    retries = dataclasses.replace(recipe, settings={**recipe.settings, "model_retries": 0})
    assert run(retries, folder, said) == [] and said[-1] == (0, 3, 0)
    # Another turn cap, or another model, is another result: every pair runs again, on a
    # thread of its own, and the count of those answered otherwise is said.
    for other in (
        dataclasses.replace(recipe, settings={**recipe.settings, "max_turns": 20}),
        dataclasses.replace(recipe, model="other-model"),
        dataclasses.replace(recipe, base_url="http://127.0.0.1:9/v1"),
    ):
        again = run(other, folder, said)
        assert len(again) == 3 and said[-1] == (3, 0, 3), other
        threads = {line["thread_id"] for line in again}
        assert threads.isdisjoint(line["thread_id"] for line in first)
        assert all(line["config"] == other.config("transcript") for line in again)
    # Each config's results stay: the file holds them all, each once.
    assert len(read_results(folder)) == 12


@pytest.mark.slow
def test_the_command_line_says_why_an_eval_runs_again(seed_server, tmp_path: Path) -> None:
    from tests.test_cli import cli

    eval_ = (
        "eval",
        "--bundled",
        "--limit",
        "1",
        "--variants",
        "transcript",
        "--out",
        str(tmp_path),
    )
    first = cli(*eval_, "--base-url", seed_server.url)
    assert first.returncode in (0, 1), first.stderr
    same = cli(*eval_, "--base-url", seed_server.url)
    assert "1 pair(s) already done" in same.stdout and "another config" not in same.stdout
    calls = len(seed_server.requests)
    other = cli(*eval_, "--base-url", seed_server.url, "--max-turns", "5")
    assert "1 pair(s) in" in other.stdout and "answered under another config" in other.stdout
    assert len(seed_server.requests) > calls  # it ran again


def test_a_batch_reuses_its_results_only_under_the_same_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions, out = tmp_path / "q.jsonl", tmp_path / "out.jsonl"
    questions.write_text('{"id": "a", "question": "one"}\n{"id": "b", "question": "two"}\n')
    recipe = scripted_recipe(tmp_path / "runs.sqlite", echo_question_model)
    assert run_file(recipe, str(questions), str(out), workers=1) == 0
    assert run_file(recipe, str(questions), str(out), workers=1) == 0
    assert len(out.read_text().splitlines()) == 2  # reused
    other = dataclasses.replace(recipe, settings={**recipe.settings, "max_turns": 3})
    capsys.readouterr()
    assert run_file(other, str(questions), str(out), workers=1) == 0
    said = capsys.readouterr()
    assert "2 question(s) in" in said.out + said.err and "another config" in said.out + said.err
    lines = [json.loads(text) for text in out.read_text().splitlines()]
    assert len(lines) == 4 and [line["config"]["settings"]["max_turns"] for line in lines] == [
        10,
        10,
        3,
        3,
    ]
