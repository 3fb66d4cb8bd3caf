"""The batch file's parts in-process: reading questions in bounded memory, ids, the results
file's torn lines and appends."""

from __future__ import annotations

import json
from pathlib import Path

from reactgraph.app.batchfile import Question, read_questions
from reactgraph.app.results import Results
from tests.test_eval_inputs import traced_peak


def test_a_huge_line_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"  # a bare string, a huge line, one without its final newline
    path.write_bytes(b'"first"\n{"question": "' + b"x" * 6_000_000 + b'"}\n{"question": "last"}')
    (questions, problems), peak = traced_peak(lambda: read_questions(str(path)))
    assert [q.text for q in questions] == ["first", "last"]
    assert problems == [f"{path}:2: longer than 1,000,000 bytes; skipped"]
    assert peak < 3_000_000


def test_ids_as_given_and_their_keys(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"question": "a", "id": 5}\n{"question": "b", "id": "5"}\n'
        '{"question": "c", "id": "line-4"}\n{"question": "d"}\n{"question": "e", "id": 5}\n'
        '{"question": "nul \\u0000 inside"}\n'
    )
    questions, problems = read_questions(str(path))
    assert questions == [
        Question(1, "5", 5, "a"),
        Question(2, '"5"', "5", "b"),
        Question(3, '"line-4"', "line-4", "c"),
        Question(4, "line-4", "line-4", "d"),
    ]
    assert problems[0] == f"{path}:5: duplicate id 5; skipped"
    assert problems[1].startswith(f"{path}:6: the question cannot be stored")


def test_results_skip_a_torn_line_and_append_on_a_fresh_one(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    done = {"id": "a", "key": "a", "status": "answered", "error": None}
    failed = {"id": "b", "key": "b", "status": None, "error": "RuntimeError: x"}
    old = {"id": 7, "status": "answered", "error": None}  # written before "key" existed
    torn = json.dumps({"id": "c", "key": "c", "status": "answered", "error": None})[:20]
    lines = [json.dumps(done), json.dumps(failed), json.dumps(old)]
    path.write_text("\n".join(lines) + "\n" + torn)
    results = Results(str(path))
    try:
        results.refresh()
        assert results.done == {"a", "7"}
        results.append({"id": "c", "key": "c", "status": "answered", "error": None})
        results.refresh()
        assert results.done == {"a", "7", "c"}
    finally:
        results.close()
    text = path.read_text().splitlines()
    assert text[3] == torn and json.loads(text[4])["id"] == "c"
