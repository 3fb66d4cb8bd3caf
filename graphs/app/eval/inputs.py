"""Question sets for ``reactgraph eval``: our JSONL (one question per line) and the HotpotQA
dev-set JSON as distributed, read into one item type. A bad line or entry is reported and
skipped; only a file that cannot be read at all raises."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reactgraph.app.eval.score import normalize_answer
from reactgraph.app.jsonl import MAX_LINE_BYTES, BadLine, json_error, reading
from reactgraph.app.jsonl import Skip as _Skip
from reactgraph.app.jsonl import id_text as id_text  # part of this module's interface
from reactgraph.app.questions import (
    first_of_each,
    line_id,
    question_lines,
    question_text,
    refuse_unstorable,
)
from reactgraph.nodes.vocabulary.storable import storable

BUNDLED_QUESTIONS = Path(__file__).with_name("bundled.jsonl")
Format = Literal["jsonl", "hotpotqa"]


@dataclass(frozen=True)
class Item:
    """One question. ``pages`` (title -> paragraphs) is the question's own corpus when its format
    brings one (HotpotQA), else None: search the shared corpus. Treat ``pages`` as read-only."""

    id: str
    question: str
    gold: tuple[str, ...]
    pages: Mapping[str, tuple[str, ...]] | None = field(default=None, hash=False)
    task: Any = field(default=None, hash=False, compare=False)
    """A benchmark's task (``reactgraph.app.eval.bfcl_data.Task``): its runner and scorer read
    it; None for a plain question."""


@dataclass(frozen=True)
class Problem:
    """A skipped line (1-based number) or HotpotQA entry (0-based index), and why."""

    number: int
    reason: str
    unit: Literal["line", "index"] = "line"

    def __str__(self) -> str:
        return f"{self.unit} {self.number}: {self.reason}"


def _golds(value: Any) -> tuple[str, ...]:
    if value is None:
        raise _Skip('no gold "answer"')
    answers = [value] if isinstance(value, str) else value
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise _Skip('"answer" must be a string or a non-empty list of strings')
    for answer in answers:
        refuse_unstorable("gold answer", answer)
        # It could never be matched: it normalizes to the empty string.
        if not normalize_answer(answer):
            raise _Skip(f"gold answer {answer!r} is empty once punctuation and articles go")
    return tuple(answer.strip() for answer in answers)


def _question(entry: Any) -> str:
    if not isinstance(entry, dict):
        raise _Skip(f"not a JSON object (got {'null' if entry is None else type(entry).__name__})")
    return question_text(entry).strip()


def _jsonl_item(value: Any, number: int) -> Item:
    question = _question(value)
    gold = _golds(value.get("answer"))
    return Item(line_id(value, number), question, gold)


def read_jsonl(
    path: str | Path, *, max_line_bytes: int = MAX_LINE_BYTES
) -> tuple[list[Item], list[Problem]]:
    """The good items of a JSONL file and the problems of the others, in file order. Each line is
    ``{"id"?, "question", "answer"}``, the answer a string or a non-empty list of strings; a line
    without an id gets ``line-N`` (see ``id_text``). Of two lines with one id, the first counts.
    The file streams, so a huge line costs at most ``max_line_bytes`` of memory."""
    lines = question_lines(path, _jsonl_item, _id, max_line_bytes)
    return _split(lines, "line")


def _id(item: Item) -> str:
    return item.id


def _split(
    entries: Iterable[tuple[int, Item | BadLine]], unit: Literal["line", "index"]
) -> tuple[list[Item], list[Problem]]:
    items: list[Item] = []
    problems: list[Problem] = []
    for number, item in entries:
        if isinstance(item, BadLine):
            problems.append(Problem(number, item.reason, unit))
        else:
            items.append(item)
    return items, problems


def _pages(context: Any) -> dict[str, tuple[str, ...]]:
    """HotpotQA's ``[[title, [sentence, ...]], ...]`` as title -> (paragraph, ...)."""
    shape = '"context" must be a list of [title, [sentence, ...]]'
    if not isinstance(context, list):
        raise _Skip(shape)
    pages: dict[str, tuple[str, ...]] = {}
    for pair in context:
        title, sentences = pair if isinstance(pair, list) and len(pair) == 2 else (None, None)
        if not isinstance(title, str) or not isinstance(sentences, list):
            raise _Skip(shape)
        if not all(isinstance(sentence, str) for sentence in sentences):
            raise _Skip(shape)
        # The sentences carry their own leading spaces, though not always: join on one space.
        # A page is corpus, not the question: a character no backend can store is replaced,
        # visibly (U+FFFD), rather than losing the question over it.
        paragraph = storable(" ".join(" ".join(sentences).split()))
        if paragraph:
            title = storable(title)
            pages[title] = (*pages.get(title, ()), paragraph)
    if not pages:
        raise _Skip('"context" has no paragraph with text')
    return pages


def _hotpot_item(entry: Any, _index: int) -> Item:
    question = _question(entry)
    key = entry.get("_id")
    if not isinstance(key, str) or not key.strip():
        raise _Skip('needs a non-empty "_id" string')
    refuse_unstorable("_id", key)
    gold = _golds(entry.get("answer"))
    return Item(key, question, gold, _pages(entry.get("context")))


def read_hotpotqa(path: str | Path) -> tuple[list[Item], list[Problem]]:
    """The good questions of a HotpotQA file (e.g. hotpot_dev_distractor_v1.json), each with its
    own pages, and the problems of the others by index. ``_id`` is kept as it is. The file is
    read whole with ``json.loads``: the 46 MB dev set takes a few hundred MB while it loads."""
    with reading(path) as stream:
        raw = stream.read()
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8") from None
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{path}: not JSON ({json_error(error)})") from None
    del raw  # free the bytes before the items are built
    if not isinstance(data, list):
        raise ValueError(f"{path}: not a HotpotQA file (expected a JSON list of questions)")
    entries = first_of_each(enumerate(data), _hotpot_item, _id, name="_id")
    return _split(entries, "index")


def read_questions(path: str | Path, fmt: Format = "jsonl") -> tuple[list[Item], list[Problem]]:
    """``read_jsonl`` or ``read_hotpotqa``, by ``--format``."""
    if fmt not in ("jsonl", "hotpotqa"):
        raise ValueError(f"unknown question format {fmt!r}; use jsonl or hotpotqa")
    return read_hotpotqa(path) if fmt == "hotpotqa" else read_jsonl(path)


def bundled_questions() -> list[Item]:
    """The question set shipped with the package, over the bundled corpus."""
    items, problems = read_jsonl(BUNDLED_QUESTIONS)
    if problems:
        raise ValueError(f"{BUNDLED_QUESTIONS}: {problems[0]}")
    return items
