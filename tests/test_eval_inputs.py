"""Reading question sets: our JSONL and HotpotQA's JSON; bad lines are reported, never fatal;
the bundled set is answerable from the bundled corpus."""

from __future__ import annotations

import json
import os
import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from reactgraph.app.eval import inputs
from reactgraph.app.eval.score import normalize_answer
from reactgraph.tools import LocalCorpus, calculator

T = TypeVar("T")


def write_lines(path: Path, *lines: str | bytes) -> Path:
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    return path


def traced_peak(read: Callable[[], T]) -> tuple[T, int]:
    """What ``read()`` returns, and the peak of the memory it allocated (bytes)."""
    tracemalloc.start()
    try:
        result = read()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def test_good_lines_become_items(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "q.jsonl",
        '{"id": "q1", "question": "When?", "answer": "1889"}',
        "",
        '{"question": "  Who?  ", "answer": ["Gustave Eiffel", "Eiffel"], "extra": 1}',
        '{"id": 7, "question": "Q", "answer": "Ans"}',
    )
    items, problems = inputs.read_jsonl(path)
    assert problems == []
    assert items == [
        inputs.Item("q1", "When?", ("1889",)),
        inputs.Item("line-3", "Who?", ("Gustave Eiffel", "Eiffel")),
        inputs.Item("7", "Q", ("Ans",)),
    ]
    assert items[0].pages is None
    assert hash(items[1]) == hash(inputs.Item("line-3", "Who?", ("Gustave Eiffel", "Eiffel")))


# Each line, and the id it gets: as given, yet never another line's.
IDS = [
    ('{"id": 5, "question": "int five", "answer": "ans"}', "5"),
    ('{"id": "5", "question": "string five", "answer": "ans"}', '"5"'),
    ('{"id": 5.0, "question": "float five", "answer": "ans"}', "5.0"),
    ('{"id": "line-5", "question": "looks generated", "answer": "ans"}', '"line-5"'),
    ('{"question": "really line 5", "answer": "ans"}', "line-5"),
    ('{"id": "b01", "question": "plain", "answer": "ans"}', "b01"),
    ('{"id": "true", "question": "a literal as a string", "answer": "ans"}', '"true"'),
    ('{"id": "\\"5\\"", "question": "quotes in the id", "answer": "ans"}', '"\\"5\\""'),
    ('{"id": "line-8", "question": "explicit line-8 comes first", "answer": "ans"}', '"line-8"'),
    ('{"question": "the id-less line 10", "answer": "ans"}', "line-10"),
]


def test_ids_are_kept_as_given_and_never_collide(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "q.jsonl", *(line for line, _ in IDS))
    items, problems = inputs.read_jsonl(path)
    assert problems == []
    ids = [item.id for item in items]
    assert ids == [given for _, given in IDS]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(("value", "text"), [(5, "5"), (-1.5, "-1.5")])
def test_a_number_id_is_its_json_text(value: float, text: str) -> None:
    assert inputs.id_text(value) == text


@pytest.mark.parametrize("value", ["5", "null", "line-3", "[1]"])
def test_a_string_id_that_reads_as_json_or_as_a_generated_one_is_quoted(value: str) -> None:
    assert inputs.id_text(value) == f'"{value}"'


@pytest.mark.parametrize("value", ["abc", "line-x", "ünï"])
def test_any_other_string_id_is_kept_as_it_is(value: str) -> None:
    assert inputs.id_text(value) == value


def test_bad_lines_are_reported_with_their_number_and_skipped(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "q.jsonl",
        '{"id": "ok1", "question": "Q", "answer": "Ans"}',
        b'{"question": "caf\xe9", "answer": "Ans"}',
        "{not json",
        '["a list"]',
        '"a bare string"',
        "null",
        '{"answer": "Ans"}',
        '{"question": "   ", "answer": "Ans"}',
        '{"question": "Q"}',
        '{"question": "Q", "answer": []}',
        '{"question": "Q", "answer": ["Ans", 3]}',
        '{"question": "Q", "answer": 1889}',
        '{"question": "Q", "answer": "The"}',
        '{"id": "ok1", "question": "again", "answer": "Ans"}',
        '{"id": true, "question": "Q", "answer": "Ans"}',
        '{"id": "", "question": "Q", "answer": "Ans"}',
        "[" * 100_000 + "]" * 100_000,
        '{"id": "ok2", "question": "Q2", "answer": "A2"}',
    )
    items, problems = inputs.read_jsonl(path)
    assert [item.id for item in items] == ["ok1", "ok2"]
    reasons = {problem.number: problem.reason for problem in problems}
    assert sorted(reasons) == list(range(2, 18))
    expected = {
        2: "not UTF-8",
        3: "not JSON",
        4: "not a JSON object (got list)",
        5: "not a JSON object (got str)",
        6: "not a JSON object (got null)",
        7: '"question"',
        8: '"question"',
        9: 'no gold "answer"',
        10: "non-empty list",
        11: "list of strings",
        12: "must be a string",
        13: "empty once",
        14: "duplicate id ok1",
        15: '"id" must be a string or a number',
        16: "must not be empty",
        17: "not JSON",
    }
    for number, fragment in expected.items():
        assert fragment in reasons[number], (number, reasons[number])
    assert str(problems[0]) == "line 2: " + reasons[2]
    assert all("\n" not in str(problem) for problem in problems)


def test_a_bom_and_crlf_line_ends_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"question": "Q", "answer": "Ans"}\r\n{"question": "R", "answer": "B"}'
    )
    items, problems = inputs.read_jsonl(path)
    assert problems == [] and [item.question for item in items] == ["Q", "R"]


def test_a_huge_line_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    with path.open("wb") as out:
        out.write(b'{"question": "first", "answer": "Ans"}\n')
        out.write(b'{"question": "' + b"x" * 8_000_000 + b'", "answer": "Ans"}\n')
        out.write(b'{"question": "last", "answer": "Ans"}')  # no final newline
    (items, problems), peak = traced_peak(lambda: inputs.read_jsonl(path, max_line_bytes=100_000))
    assert [item.question for item in items] == ["first", "last"]
    assert problems == [inputs.Problem(2, "longer than 100,000 bytes")]
    assert peak < 2_000_000


def test_the_line_limit_is_exact(tmp_path: Path) -> None:
    line = '{"question": "Q", "answer": "Ans"}'
    path = write_lines(tmp_path / "q.jsonl", line, line.replace("Q", "QQ"))
    items, problems = inputs.read_jsonl(path, max_line_bytes=len(line))
    assert [item.question for item in items] == ["Q"] and [p.number for p in problems] == [2]


def test_an_unreadable_file_raises_one_line(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.jsonl", tmp_path):
        for read in (inputs.read_jsonl, inputs.read_hotpotqa):
            with pytest.raises(ValueError, match=r"^cannot read .*: [^\n]+$"):
                read(path)
    locked = write_lines(tmp_path / "locked.jsonl", '{"question": "Q", "answer": "Ans"}')
    locked.chmod(0)
    try:
        if not os.access(locked, os.R_OK):  # root reads anything
            with pytest.raises(ValueError, match="cannot read"):
                inputs.read_jsonl(locked)
    finally:
        locked.chmod(0o644)
    with pytest.raises(ValueError, match="unknown question format"):
        inputs.read_questions(locked, "csv")  # type: ignore[arg-type]


def hotpot_entry(key: str, question: str, answer: Any, titles: list[str]) -> dict[str, Any]:
    return {
        "_id": key,
        "question": question,
        "answer": answer,
        "type": "bridge",
        "level": "hard",
        "supporting_facts": [[titles[0], 0]],
        "context": [[t, [f"{t} is a page.", f" It mentions {key}."]] for t in titles],
    }


def test_hotpotqa_entries_bring_their_own_pages(tmp_path: Path) -> None:
    good = hotpot_entry("5a8b", "Which?", "yes", ["Alpha", "Beta"])
    good["context"].append(["Alpha", ["A second", "paragraph,no space."]])
    good["context"].append(["Empty", []])
    entries = [
        good,
        "not an object",
        {**hotpot_entry("x1", "Q", "Ans", ["T"]), "_id": 3},
        {**hotpot_entry("x2", "", "Ans", ["T"])},
        {**hotpot_entry("x3", "Q", None, ["T"])},
        {**hotpot_entry("x4", "Q", "Ans", ["T"]), "context": [["T", "not a list"]]},
        {**hotpot_entry("x5", "Q", "Ans", ["T"]), "context": []},
        hotpot_entry("5a8b", "Again?", "no", ["Gamma"]),
        hotpot_entry("ok", "Fine?", "Gamma", ["Gamma", "Delta"]),
    ]
    path = tmp_path / "hotpot_dev_distractor_v1.json"
    path.write_text(json.dumps(entries), encoding="utf-8")
    items, problems = inputs.read_questions(path, "hotpotqa")
    assert [item.id for item in items] == ["5a8b", "ok"]
    first = items[0]
    assert (first.question, first.gold) == ("Which?", ("yes",))
    assert first.pages == {
        "Alpha": ("Alpha is a page. It mentions 5a8b.", "A second paragraph,no space."),
        "Beta": ("Beta is a page. It mentions 5a8b.",),
    }
    assert [(p.unit, p.number) for p in problems] == [("index", i) for i in range(1, 8)]
    assert "duplicate _id 5a8b" in problems[-1].reason
    assert str(problems[0]).startswith("index 1: not a JSON object")


def test_a_file_that_is_not_a_hotpotqa_list_raises(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    for content, message in [
        (b"{}", "expected a JSON list"),
        (b"[1,", "not JSON"),
        (b"\xff[]", "not UTF-8"),
    ]:
        bad.write_bytes(content)
        with pytest.raises(ValueError, match=message):
            inputs.read_hotpotqa(bad)


# The bundled question set.

CORPUS = LocalCorpus()


def bundled_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in inputs.BUNDLED_QUESTIONS.read_text("utf-8").splitlines()]


def page_text(title: str) -> str:
    return " ".join(CORPUS.pages[title])


def test_the_bundled_set_reads_cleanly_with_stable_ids() -> None:
    items = inputs.bundled_questions()
    assert len(items) >= 30
    assert [item.id for item in items] == [f"b{n:02d}" for n in range(1, len(items) + 1)]
    assert all(item.pages is None for item in items)
    multi_hop = [line for line in bundled_lines() if len(line["supporting"]) >= 2]
    assert len(multi_hop) >= 0.75 * len(items)


@pytest.mark.parametrize("line", bundled_lines(), ids=lambda line: line["id"])
def test_each_bundled_question_is_answerable_from_the_corpus(line: dict[str, Any]) -> None:
    missing = [title for title in line["supporting"] if title not in CORPUS.pages]
    assert not missing, f"no such page: {missing}"
    text = " ".join(page_text(title) for title in line["supporting"])
    for fact in line["evidence"]:
        assert fact in text, f"{fact!r} is on none of {line['supporting']}"
    for title in line["supporting"]:
        assert any(fact in page_text(title) for fact in line["evidence"]), f"{title} unused"
        found = re.findall(r"^\[(.+?)\]", CORPUS.search(title), re.M)
        assert title in found, f"search[{title}] does not reach its page"
    golds = [normalize_answer(gold) for gold in line["answer"]]
    if "calc" in line:
        assert normalize_answer(calculator.invoke(line["calc"])) in golds
    elif golds[0] in ("yes", "no"):
        assert len(line["evidence"]) >= 2  # the facts compared are named
    else:
        words = f" {normalize_answer(text)} "
        assert any(f" {gold} " in words for gold in golds), "no gold answer is on its pages"
