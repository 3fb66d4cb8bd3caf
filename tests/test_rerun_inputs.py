"""What a re-run reuses: a result line and a thread belong to the question's text as well as its
id (and, for eval, to the question set), so an edited question is a new run; and input no
database or results file can store (a lone surrogate) is a numbered warning, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reactgraph.app.batchfile import read_questions, run_file
from reactgraph.app.eval import read_hotpotqa, read_jsonl
from reactgraph.app.eval.run import run_eval
from reactgraph.nodes.vocabulary.storable import REPLACEMENT
from tests.fakes import scripted_recipe as recipe
from tests.test_cli import lines_of

# Worker processes: `make test` runs these, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow


def test_an_edited_question_with_the_same_id_runs_again(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "How tall is the first tower?"}\n')
    db = tmp_path / "runs.sqlite"
    assert run_file(recipe(db), str(questions), str(tmp_path / "one.jsonl"), workers=1) == 0
    questions.write_text('{"id": "a", "question": "How tall is the second tower?"}\n')
    assert run_file(recipe(db), str(questions), str(tmp_path / "two.jsonl"), workers=1) == 0
    (first,) = lines_of(tmp_path / "one.jsonl")
    (second,) = lines_of(tmp_path / "two.jsonl")
    assert first["answer"] == "How tall is the first tower?"
    assert second["question"] == second["answer"] == "How tall is the second tower?"
    assert second["thread_id"] != first["thread_id"]
    # Into the same results file too: the old line answered another text.
    assert run_file(recipe(db), str(questions), str(tmp_path / "one.jsonl"), workers=1) == 0
    assert [line["answer"] for line in lines_of(tmp_path / "one.jsonl")] == [
        "How tall is the first tower?",
        "How tall is the second tower?",
    ]
    # And the unedited question is still done: a re-run appends nothing.
    assert run_file(recipe(db), str(questions), str(tmp_path / "two.jsonl"), workers=1) == 0
    assert len(lines_of(tmp_path / "two.jsonl")) == 1


def test_two_eval_files_without_ids_on_one_database_never_share_a_thread(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.sqlite"
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"question": "Which river is first?", "answer": "first"}\n')
    b.write_text('{"question": "Which river is second?", "answer": "second"}\n')
    lines = {}
    for path in (a, b):
        items, _ = read_jsonl(path)
        run = run_eval(recipe(db), items, ["transcript"], tmp_path / path.stem)
        (lines[path.stem],) = list(run)
    assert lines["a"]["id"] == lines["b"]["id"] == "line-1"
    assert lines["b"]["answer"] == "Which river is second?"
    assert lines["a"]["thread_id"] != lines["b"]["thread_id"]


def test_the_same_question_in_another_set_gets_its_own_thread(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    (item,) = read_jsonl_text(tmp_path, '{"question": "Same?", "answer": "same"}')
    threads = set()
    for source in ("jsonl:/one.jsonl", "jsonl:/two.jsonl"):
        (line,) = run_eval(recipe(db), [item], ["transcript"], tmp_path / "out", source=source)
        threads.add(line["thread_id"])
        assert line["questions"] == source
    assert len(threads) == 2


def test_an_edited_gold_answer_is_scored_again_from_the_finished_thread(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    (right,) = read_jsonl_text(tmp_path, '{"question": "Is it this?", "answer": "Is it this?"}')
    (wrong,) = read_jsonl_text(tmp_path, '{"question": "Is it this?", "answer": "another"}')
    (one,) = run_eval(recipe(db), [wrong], ["transcript"], tmp_path / "out")
    (two,) = run_eval(recipe(db), [right], ["transcript"], tmp_path / "out")
    assert (one["em"], two["em"]) == (0.0, 1.0)
    assert one["thread_id"] == two["thread_id"]  # the same run, scored against the new gold
    assert list(run_eval(recipe(db), [right], ["transcript"], tmp_path / "out")) == []


def read_jsonl_text(folder: Path, text: str) -> list:
    path = folder / "one-line.jsonl"
    path.write_text(text + "\n")
    items, problems = read_jsonl(path)
    assert problems == []
    return items


# Lone surrogates, as JSON writes them: valid UTF-8 files whose strings Python cannot encode.
LONE = "\\ud800"


def test_a_batch_line_whose_id_holds_a_lone_surrogate_is_skipped_and_every_rerun_ends(
    tmp_path: Path,
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        f'{{"id": "bad{LONE}", "question": "first?"}}\n'
        f'{{"id": "good", "question": "second?"}}\n'
        f'{{"id": "worse", "question": "third{LONE}?"}}\n'
    )
    found, problems = read_questions(str(questions))
    assert [q.key for q in found] == ["good"]
    assert problems[0] == (
        f"{questions}:1: the id cannot be stored: it holds a character U+D800 at position 3; "
        "skipped"
    )
    assert problems[1].startswith(f"{questions}:3: the question cannot be stored")
    out = tmp_path / "results.jsonl"
    for _ in range(2):
        assert run_file(recipe(tmp_path / "runs.sqlite"), str(questions), str(out)) == 0
    assert [line["id"] for line in lines_of(out)] == ["good"]


def test_eval_lines_with_lone_surrogates_are_numbered_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        f'{{"id": "x{LONE}", "question": "q1", "answer": "ok"}}\n'
        f'{{"question": "q2{LONE}", "answer": "ok"}}\n'
        f'{{"question": "q3", "answer": ["ok", "b{LONE}"]}}\n'
        '{"question": "q4", "answer": "ok"}\n'
    )
    items, problems = read_jsonl(path)
    assert [item.question for item in items] == ["q4"]
    assert [(p.number, p.reason.split(":")[0]) for p in problems] == [
        (1, "the id cannot be stored"),
        (2, "the question cannot be stored"),
        (3, "the gold answer cannot be stored"),
    ]
    for _ in range(2):
        list(run_eval(recipe(tmp_path / "runs.sqlite"), items, ["transcript"], tmp_path / "o"))
    assert [line["question"] for line in lines_of(tmp_path / "o" / "results.jsonl")] == ["q4"]


def test_hotpotqa_fields_with_lone_surrogates(tmp_path: Path) -> None:
    def entry(key: str, question: str = "q", answer: str = "ok", title: str = "T") -> dict:
        return {
            "_id": key,
            "question": question,
            "answer": answer,
            "context": [[title, [" One sentence.", f" Two{LONE}."]]],
        }

    entries = [
        entry(f"id{LONE}"),
        entry("k2", question=f"q{LONE}"),
        entry("k3", answer=f"ok{LONE}"),
        entry("k4", title=f"T{LONE}"),
    ]
    path = tmp_path / "hotpot.json"
    # json.dumps writes the surrogate escapes as they are in the raw text.
    path.write_text(json.dumps(entries).replace("\\\\ud800", "\\ud800"))
    items, problems = read_hotpotqa(path)
    assert [(p.number, p.reason.split(":")[0]) for p in problems] == [
        (0, "the _id cannot be stored"),
        (1, "the question cannot be stored"),
        (2, "the gold answer cannot be stored"),
    ]
    # A page is corpus: its unstorable characters are replaced, visibly, and the question kept.
    (item,) = items
    assert item.pages == {f"T{REPLACEMENT}": (f"One sentence. Two{REPLACEMENT}.",)}
    (line,) = run_eval(recipe(tmp_path / "runs.sqlite"), items, ["transcript"], tmp_path / "o")
    assert line["id"] == "k4" and line["status"] == "answered"
