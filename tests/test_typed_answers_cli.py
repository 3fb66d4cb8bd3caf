"""Typed answers and instructions from the command line: ``--answer-schema FILE.json`` and
``--instructions TEXT|@FILE`` on ask, batch and eval against the local OpenAI-compatible test
server; the answer printed as JSON, ``structured_answer`` in each result line; a bad file or
schema one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeOpenAIServer
from tests.inprocess import run_main
from tests.test_cli import one_line_error

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {"years": {"type": "integer"}, "first": {"type": "string"}},
    "required": ["years", "first"],
}
RULE = "Reply in French. Prefer the calculator."


def typed_responder(body: dict[str, Any]) -> str:
    """A model that first answers with the wrong type, then (after the correction) right;
    it fails loudly unless the schema and the instructions are in its prompt."""
    text = "\n".join(str(m["content"]) for m in body["messages"])
    assert RULE in text and '"years"' in text, text[:2000]
    if "does not match the answer's JSON schema" not in text:
        return 'Thought: done.\nFinal Answer: {"years": "48", "first": "Eiffel Tower"}'
    return 'Thought: fixed.\nFinal Answer: ```json\n{"years": 48, "first": "Eiffel Tower"}\n```'


def files(tmp_path: Path) -> tuple[Path, Path]:
    schema = tmp_path / "years.json"
    schema.write_text(json.dumps(SCHEMA))
    rules = tmp_path / "rules.txt"
    rules.write_text(RULE + "\n")
    return schema, rules


def test_ask_prints_the_typed_answer_as_json_and_show_too(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = typed_responder
    schema, rules = files(tmp_path)
    db = str(tmp_path / "runs.sqlite")
    common = ["--base-url", openai_server.url, "--db", db]
    flags = ["--answer-schema", str(schema), "--instructions", f"@{rules}"]
    result = run_main("ask", "How many years?", *common, *flags, "--thread", "t1")
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("Answer (JSON): "))
    assert json.loads(line.removeprefix("Answer (JSON): ")) == {
        "years": 48,
        "first": "Eiffel Tower",
    }
    assert "does not match the answer's JSON schema" in result.stdout  # the corrected turn
    shown = run_main("show", "t1", "--db", db)
    assert 'Answer (JSON): {"years": 48, "first": "Eiffel Tower"}' in shown.stdout


def test_instructions_given_as_text(openai_server: FakeOpenAIServer, tmp_path: Path) -> None:
    seen: list[str] = []

    def responder(body: dict[str, Any]) -> str:
        seen.append(str(body["messages"][0]["content"]))
        return "Thought: done.\nFinal Answer: 48"

    openai_server.responder = responder
    db = str(tmp_path / "runs.sqlite")
    result = run_main(
        "ask", "q", "--base-url", openai_server.url, "--db", db, "--instructions", RULE
    )
    assert result.returncode == 0, result.stderr
    assert seen and all(RULE in prompt for prompt in seen)


def test_batch_and_eval_write_the_structured_answer_in_each_line(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = typed_responder
    schema, rules = files(tmp_path)
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "a", "question": "one?"}\n{"id": "b", "question": "two?"}\n')
    results = tmp_path / "results.jsonl"
    flags = ["--answer-schema", str(schema), "--instructions", f"@{rules}"]
    server = ["--base-url", openai_server.url, "--workers", "1"]
    db = str(tmp_path / "runs.sqlite")
    run = run_main("batch", str(questions), "--out", str(results), *server, "--db", db, *flags)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    assert [x["structured_answer"] for x in lines] == [{"years": 48, "first": "Eiffel Tower"}] * 2
    eval_questions = tmp_path / "eval.jsonl"
    eval_questions.write_text('{"id": "a", "question": "one?", "answer": "48"}\n')
    out = tmp_path / "eval"
    run = run_main("eval", str(eval_questions), "--out", str(out), *server, *flags)
    assert run.returncode == 0, run.stderr
    scored = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert scored[0]["structured_answer"] == {"years": 48, "first": "Eiffel Tower"}


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "cannot read"),
        ("{not json", "is not JSON"),
        ('{"type": "integer", "minimum": "zero"}', "not a valid JSON schema"),
        ('{"$ref": "https://example.com/s.json"}', "refer only to its own parts"),
        ("[1, 2]", "must be a JSON object"),
        # A lone surrogate (an escape in the file) in a key: no database can store it.
        ('{"properties": {"a\\ud800": {}}}', "cannot be stored: it holds a character U+D800"),
        ('{"maxLength": 18446744073709551616}', "cannot be stored: it holds an integer outside"),
        ('{"$ref": "#"}', "loop back to the same value without going into it"),
        ('{"$dynamicRef": "https://example.com/s#meta"}', "refer only to its own parts"),
        ('{"type": "string", "pattern": "(a)\\\\1"}', "cannot run in linear time"),
        ('{"pattern": "(?=a)"}', "no backreferences or lookaround"),
    ],
)
def test_a_bad_schema_file_is_one_line(content: str | None, fragment: str, tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    if content is not None:
        path.write_text(content)
    result = run_main(
        "ask", "q", "--base-url", "http://127.0.0.1:9/v1", "--answer-schema", str(path)
    )
    one_line_error(result, fragment)


def test_a_missing_or_overlong_instructions_file_is_one_line(tmp_path: Path) -> None:
    missing = run_main(
        "ask", "q", "--base-url", "http://127.0.0.1:9/v1", "--instructions", f"@{tmp_path}/no.txt"
    )
    one_line_error(missing, "cannot read")
    long = tmp_path / "long.txt"
    long.write_text("x" * 20_000)
    too_long = run_main(
        "ask", "q", "--base-url", "http://127.0.0.1:9/v1", "--instructions", f"@{long}"
    )
    one_line_error(too_long, "at most 16000 characters")


def test_a_backtracking_pattern_checks_the_answer_at_once(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """``^(a+)+$`` on an answer of 41 characters: hours on Python's re, the process frozen
    (Ctrl-C ignored); on RE2 a correction at once, then the answer."""
    schema = tmp_path / "word.json"
    schema.write_text(
        json.dumps({"type": "object", "properties": {"word": {"pattern": "^(a+)+$"}}})
    )

    def responder(body: dict[str, Any]) -> str:
        if "does not match the answer's JSON schema" in str(body["messages"]):
            return 'Thought: fixed.\nFinal Answer: {"word": "aaaa"}'
        return 'Thought: done.\nFinal Answer: {"word": "' + "a" * 40 + 'b"}'

    openai_server.responder = responder
    db = str(tmp_path / "runs.sqlite")
    result = run_main(
        "ask", "q", "--base-url", openai_server.url, "--db", db, "--answer-schema", str(schema)
    )
    assert result.returncode == 0, result.stderr
    assert 'Answer (JSON): {"word": "aaaa"}' in result.stdout
