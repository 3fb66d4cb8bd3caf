"""An eval streams its jobs as a batch does: each (question, variant) pair's job is made only
when the engine has a slot free for it, so a question set of any size never has all its jobs
(each with a copy of its question's pages) in memory at once. (Through Ray: ``test_rayengine``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reactgraph.app.eval import run as eval_run
from reactgraph.app.eval.inputs import Item
from reactgraph.app.recipe import Recipe
from tests.fakes import echo_for

PAIRS = 1000
CONCURRENCY = 4


class Made:
    """Counts the jobs an eval makes and the result lines read, and the most made ahead."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made = self.read = self.most = 0
        job = eval_run.Job

        def counted(*args: Any) -> Any:
            self.made += 1
            self.most = max(self.most, self.made - self.read)
            return job(*args)

        monkeypatch.setattr(eval_run, "Job", counted)
        monkeypatch.setattr(eval_run, "open_runner", echo_for)  # the runs: no graph


def eval_items(count: int) -> list[Item]:
    """Questions whose gold answer is their own text (the echo runner's answer)."""
    return [Item(f"q{i}", f"Question {i}?", (f"Question {i}?",)) for i in range(count)]


def recipe(db: str) -> Recipe:
    return Recipe("transcript", "scripted", None, 10.0, None, {}, db=db)


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "worker-processes"])
def test_an_eval_makes_each_job_only_when_a_slot_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    count = Made(monkeypatch)
    items, folder = eval_items(PAIRS // 2), tmp_path / "out"
    runs = eval_run.run_eval(
        recipe(str(tmp_path / "runs.sqlite")),
        items,
        ["transcript", "notes"],
        folder,
        workers=workers,
        concurrency=CONCURRENCY,
    )
    lines = []
    for line in runs:
        count.read += 1
        lines.append(line)
    assert count.made == len(lines) == PAIRS
    assert all(line["em"] == 1.0 and line["error"] is None for line in lines)
    # A thousand pairs, and never more than the four in flight made ahead of their results.
    assert count.most <= CONCURRENCY, count.most
    assert len(eval_run.read_results(folder)) == PAIRS
    # A re-run makes no job at all.
    count.made = count.most = 0
    assert (
        list(
            eval_run.run_eval(
                recipe(str(tmp_path / "runs.sqlite")),
                items,
                ["transcript", "notes"],
                folder,
                workers=workers,
            )
        )
        == []
    )
    assert count.made == 0
