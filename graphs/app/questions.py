"""Question lines, as ``reactgraph batch`` and ``reactgraph eval`` read them: the checks both make
(the id, the question's text, a character no database can store) and the one loop that streams
the entries, skips each bad one with its reason and keeps the first of two with one id. Each
reader adds only its own fields: for batch a bare JSON string is a question, for eval a line
brings its gold answer (``reactgraph.app.eval.inputs``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from reactgraph.app.jsonl import MAX_LINE_BYTES, BadLine, Skip, id_text, read_jsonl_lines
from reactgraph.nodes.vocabulary.storable import unstorable

T = TypeVar("T")


def line_id(entry: dict[str, Any], number: int) -> str:
    """The id of a JSON-object line as ``id_text``, or ``line-N`` when it has none."""
    if "id" not in entry:
        return f"line-{number}"
    given = entry["id"]
    if isinstance(given, bool) or not isinstance(given, str | int | float):
        raise Skip('"id" must be a string or a number')
    if isinstance(given, str) and not given.strip():
        raise Skip('"id" must not be empty')
    if isinstance(given, str):
        refuse_unstorable("id", given)
    return id_text(given)


def refuse_unstorable(field: str, text: str) -> None:
    """``Skip`` when ``text`` holds a character no database or results file can store (a NUL, a
    lone surrogate from a ``\\ud800`` escape): the line is skipped, never half run."""
    problem = unstorable(text)
    if problem is not None:
        raise Skip(f"the {field} cannot be stored: it holds a {problem}")


def question_text(entry: Any) -> str:
    """The ``"question"`` of a JSON object, as written; ``Skip`` unless it is a non-empty string
    that can be stored."""
    text = entry.get("question") if isinstance(entry, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise Skip('needs a non-empty "question" string')
    refuse_unstorable("question", text)
    return text


def first_of_each(
    entries: Iterable[tuple[int, Any]],
    parse: Callable[[Any, int], T],
    key: Callable[[T], str],
    *,
    name: str = "id",
) -> Iterator[tuple[int, T | BadLine]]:
    """``(number, parse(value, number))`` for each numbered entry, in order, or ``(number,
    BadLine(why))`` when the entry is a ``BadLine`` already, ``parse`` raises ``Skip``, or an
    earlier entry had its ``key`` (``duplicate <name> <key>``: the first one counts)."""
    seen: set[str] = set()
    for number, value in entries:
        try:
            if isinstance(value, BadLine):
                raise Skip(value.reason)
            item = parse(value, number)
            if key(item) in seen:
                raise Skip(f"duplicate {name} {key(item)}")
        except Skip as skip:
            yield number, BadLine(str(skip))
            continue
        seen.add(key(item))
        yield number, item


def question_lines(
    path: str | Path,
    parse: Callable[[Any, int], T],
    key: Callable[[T], str],
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[tuple[int, T | BadLine]]:
    """``first_of_each`` over the lines of a JSONL file (1-based numbers, blank lines passed
    over). The file streams, so a huge line costs at most ``max_line_bytes`` of memory; only a
    file that cannot be read raises (ValueError)."""
    return first_of_each(read_jsonl_lines(path, max_line_bytes), parse, key)
