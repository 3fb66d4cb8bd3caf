"""A results file of JSON lines, one per finished question (``batch``) or pair (``eval``): which
keys it holds a finished result for, and appends that are never torn or written twice.

It is read again from where it was last read, so a results file shared by several processes
(two batches on one file) stays consistent; each append is one write, under the file's lock,
started on a fresh line if a killed writer left a torn one."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reactgraph.app import console as out
from reactgraph.app.jsonl import BadLine, id_text, read_jsonl_stream
from reactgraph.nodes.vocabulary.endings import AWAITING


def digest(value: Any) -> str:
    """A short digest of a JSON value (a config, a question's text): the same on every run."""
    text = json.dumps(value, ensure_ascii=True, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def keyed_by(*fields: str) -> Callable[[dict[str, Any]], str | None]:
    """An identity for result lines: the ``key`` and a digest of ``fields`` (the question's
    text, ...), so a line counts as done only for the very input it answered."""

    def identity(line: dict[str, Any]) -> str | None:
        key = _key(line)
        if key is None:
            return None
        parts = json.dumps([line.get(name) for name in fields], ensure_ascii=True)
        return f"{key}\n{hashlib.sha256(parts.encode()).hexdigest()[:20]}"

    return identity


def _key(result: dict[str, Any]) -> str | None:
    key, given = result.get("key"), result.get("id")
    if isinstance(key, str):
        return key
    # Result lines written before "key" existed: their id as text.
    return id_text(given) if isinstance(given, str | int | float) else None


class Results:
    """The results file: which questions it holds a finished result for, read again from where
    it was last read, and appends of one whole line each."""

    def __init__(
        self, path: str, identity: Callable[[dict[str, Any]], str | None] | None = None
    ) -> None:
        """``identity`` (default: the line's key) says which lines answer the same input;
        ``done`` holds the identities of the finished ones."""
        self.path = path
        self.identity = identity or _key
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self._offset = 0
        self.done: set[str] = set()
        self.finished: set[str] = set()
        """The keys with a finished line, whatever the input it answered (``done`` has only
        those of the same input): a key here but not in ``done`` was answered otherwise."""
        self.waiting: set[str] = set()
        """The identities whose run stopped for a person's approval (and has no finished line
        yet): run again, a line is written only once it has moved on."""

    def close(self) -> None:
        os.close(self._fd)

    def refresh(self, report: bool = False) -> None:
        """Take in the lines written since the last look; ``report`` the unusable ones."""
        position = self._offset
        with open(self.path, "rb") as stream:
            stream.seek(self._offset)
            for number, value in read_jsonl_stream(stream):
                if isinstance(value, BadLine) and value.torn:
                    if report:
                        out.warn(
                            f"{self.path}:{number}: a result line cut short (a killed batch); "
                            "its question runs again"
                        )
                    break  # it may be a line being written: look at it again next time
                if isinstance(value, dict):
                    self._take(value)
                elif report:
                    out.warn(f"{self.path}:{number}: not a result line; ignored")
                position = stream.tell()
        self._offset = position

    def _take(self, line: dict[str, Any]) -> None:
        """Note a result line read back: its identity waiting, or done (its key finished);
        a line without a status, with an error, or with no identity counts for nothing."""
        if not line.get("status") or line.get("error"):
            return
        identity = self.identity(line)
        if identity is None:
            return
        if line["status"] == AWAITING:
            self.waiting.add(identity)
        else:
            self.done.add(identity)
            self.finished.add(str(_key(line)))

    def record(self, line: dict[str, Any]) -> bool:
        """Append a result line (with its ``key``) unless a finished result with its identity
        is there already (written by another process on this file), or the line says it still
        waits for approval as one there does; whether it was appended. Holds the file's lock
        while it reads and writes. A finished line after a waiting one is the one that counts."""
        identity = self.identity(line)
        waits = line.get("status") == AWAITING
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            self.refresh()
            if identity in self.done or (waits and identity in self.waiting):
                return False
            self.append(line)
            if line.get("error") is None and identity is not None:
                (self.waiting if waits else self.done).add(identity)
            return True
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def append(self, line: dict[str, Any]) -> None:
        """One line in one write, durable, started on a fresh line after a torn one. A write
        that fails or falls short (a full disk, a file size limit) is taken back whole, so no
        line is torn: ``ResultsUnwritable``."""
        try:
            data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
        except UnicodeEncodeError:
            # A lone surrogate (the readers refuse them; an error text may still carry one):
            # JSON's escapes store it, and it reads back as it was.
            data = (json.dumps(line) + "\n").encode()
        size = os.fstat(self._fd).st_size
        if size and os.pread(self._fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            if os.write(self._fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(self._fd)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            raise ResultsUnwritable(
                f"cannot write the results to {self.path} ({error.strerror or error}); every "
                "finished run is kept in the database: make room, then run the same command "
                "again to write them"
            ) from None


class ResultsUnwritable(Exception):
    """The results file cannot take another line (the message says why and how to go on)."""
