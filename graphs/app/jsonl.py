"""Reading JSONL files a person wrote, line by line: the one reader behind ``reactgraph batch``
(questions, and its own results file) and ``reactgraph eval``. A bad line is a ``BadLine``, never
an exception; only a file that cannot be read at all raises. What a question line must hold is
``reactgraph.app.questions``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

MAX_LINE_BYTES = 1_000_000
_DRAIN_BYTES = 1 << 16
_GENERATED_ID = re.compile(r"line-[0-9]+")


@dataclass(frozen=True)
class BadLine:
    """Why a line cannot be used; ``torn`` when it is the unfinished last line of the file."""

    reason: str
    torn: bool = False


class Skip(Exception):
    """Raised by a line's own checks (its id, its fields): the line is skipped with this reason."""


def id_text(value: str | int | float) -> str:
    """An id as text, kept as given yet never ambiguous. Numbers become their JSON text; a string
    stays as it is unless it could be mistaken for another kind of id (it parses as JSON, or it
    looks like a generated ``line-N``): then it is quoted as JSON. So 5 -> ``5``, "5" -> ``"5"``,
    "b01" -> ``b01``, "line-8" -> ``"line-8"``; ``line-N`` ids of id-less lines never collide."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if _ambiguous(value) else value
    return json.dumps(value)


def _ambiguous(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return _GENERATED_ID.fullmatch(text) is not None
    return True


def json_error(error: Exception) -> str:
    """A JSON parse error in a few words."""
    deep = isinstance(error, RecursionError)
    return "nested too deeply" if deep else getattr(error, "msg", str(error))


@contextmanager
def reading(path: str | Path) -> Iterator[BinaryIO]:
    """The file as bytes; failing to read it (missing, a folder, no permission) is a ValueError."""
    try:
        with open(path, "rb") as stream:
            yield stream
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None


def _lines(stream: BinaryIO, limit: int) -> Iterator[tuple[int, bytes | None]]:
    """Each line's number and bytes, or None for a line over ``limit`` bytes: that one is read
    past in chunks, never held whole."""
    number = 0
    while chunk := stream.readline(limit + 1):
        number += 1
        if len(chunk) <= limit or chunk.endswith(b"\n"):
            yield number, chunk
            continue
        while chunk and not chunk.endswith(b"\n"):
            chunk = stream.readline(_DRAIN_BYTES)
        yield number, None


def _parse(raw: bytes | None, number: int, limit: int) -> Any:
    if raw is None:
        raise Skip(f"longer than {limit:,} bytes")
    if number == 1:
        raw = raw.removeprefix(b"\xef\xbb\xbf")  # the BOM some editors write
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Skip(f"not UTF-8 (invalid byte at column {error.start + 1})") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise Skip(f"not JSON ({json_error(error)})") from None


def read_jsonl_lines(
    path: str | Path, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, Any]]:
    """``(number, value)`` for each non-blank line (1-based): its JSON value, or a ``BadLine``
    (over ``max_line_bytes``, not UTF-8, not JSON). The file streams, so a huge line costs at
    most ``max_line_bytes`` of memory. Raises ValueError only when the file cannot be read."""
    with reading(path) as stream:
        yield from read_jsonl_stream(stream, max_line_bytes)


def read_jsonl_stream(
    stream: BinaryIO, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, Any]]:
    """``read_jsonl_lines`` from where an open binary stream stands (numbers count from there);
    ``stream.tell()`` between items is the end of the line just given."""
    for number, raw in _lines(stream, max_line_bytes):
        if raw is not None and not raw.strip():
            continue  # a blank line
        try:
            yield number, _parse(raw, number, max_line_bytes)
        except Skip as skip:
            # Only the last line can lack its newline: a write cut short, or one under way.
            torn = raw is not None and not raw.endswith(b"\n")
            yield number, BadLine(str(skip), torn=torn)
