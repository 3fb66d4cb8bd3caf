"""The notes' memory: where notes live (a folder or a LangGraph store, behind one small
interface) and the two nodes that read and write them."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore

from reactgraph.nodes.loop.deps import Deps
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.effects import Blocking, Effect
from reactgraph.nodes.vocabulary.run_settings import NotesSettings, narrowed
from reactgraph.nodes.vocabulary.state import State
from reactgraph.nodes.vocabulary.turns import new_turn

logger = logging.getLogger(__name__)

UPDATE_NOTES = prompts.UPDATE_NOTES
# Names that are their own file name: lower case only, so that two ids differing in case never
# share a file on a case-insensitive file system.
_SAFE = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,79}")
_UNSAFE = re.compile(r"[^a-z0-9_.-]")
NAMESPACE = ("reactgraph", "notes")
# A write killed mid-way leaves its temporary file; one this old cannot be a live write.
_STALE_TMP_S = 60.0


def safe_name(thread_id: str) -> str:
    """A file name for a thread id that cannot leave its folder, and that no other id gets.

    Ids already safe as file names map to themselves. Every other id is cleaned and marked with
    a leading ``~`` (a character safe ids never contain) and a hash of the original, so a
    crafted id can never land on another thread's name.
    """
    if _SAFE.fullmatch(thread_id):
        return thread_id
    cleaned = _UNSAFE.sub("_", thread_id.lower())[:60]
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"~{cleaned}-{digest}"


class NotesBackend(Protocol):
    """Where a thread's notes and their revision history are kept."""

    def read(self, thread_id: str) -> str | None:
        """The thread's notes, or None when it has none yet."""
        ...

    def write(self, thread_id: str, text: str, turn: int) -> None:
        """Replace the notes and append the revision to the history."""
        ...

    def history(self, thread_id: str) -> list[dict[str, Any]]:
        """Every revision, oldest first: ``{"turn", "time", "text"}``."""
        ...


class FileNotes:
    """``<folder>/<thread>.md`` written atomically, with ``<thread>.history.jsonl`` beside it."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def path(self, thread_id: str) -> Path:
        """The notes file of a thread, always inside the folder."""
        path = (self.folder / f"{safe_name(thread_id)}.md").resolve()
        if path.parent != self.folder.resolve():
            raise ValueError(f"thread id {thread_id!r} does not map inside {self.folder}")
        return path

    def read(self, thread_id: str) -> str | None:
        path = self.path(thread_id)
        return path.read_text(encoding="utf-8") if path.exists() else None

    def _sweep(self, path: Path) -> None:
        """Remove temporary files that killed writes of this thread left behind."""
        now = time.time()
        for leftover in path.parent.glob(f".{path.stem}.*.tmp"):
            try:
                if now - leftover.stat().st_mtime > _STALE_TMP_S:
                    leftover.unlink()
            except OSError:
                pass  # another process swept it first

    def write(self, thread_id: str, text: str, turn: int) -> None:
        path = self.path(thread_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._sweep(path)
        # Write a temporary file, flush it to disk, then rename: a crash leaves the old notes
        # or the new ones, never a torn or empty file.
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp"
        )
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        record = json.dumps({"turn": turn, "time": time.time(), "text": text}, ensure_ascii=False)
        with path.with_suffix(".history.jsonl").open("ab") as log:
            # A kill during an earlier append can leave a torn last line: start on a fresh one,
            # so the torn record stays alone (and is skipped) instead of spoiling this one.
            torn = log.tell() > 0 and _last_byte(log.name) != b"\n"
            log.write((b"\n" if torn else b"") + record.encode("utf-8") + b"\n")
            log.flush()
            os.fsync(log.fileno())

    def history(self, thread_id: str) -> list[dict[str, Any]]:
        path = self.path(thread_id).with_suffix(".history.jsonl")
        if not path.exists():
            return []
        revisions = []
        for number, line in enumerate(path.read_bytes().splitlines(), 1):
            try:
                revision = json.loads(line)
            except ValueError:
                if line.strip():
                    logger.warning("%s:%d: a torn revision (a killed write); skipped", path, number)
                continue
            revisions.append(revision)
        return revisions


def _last_byte(path: str) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


class StoreNotes:
    """The notes as a row of a LangGraph ``BaseStore`` (SQLite, Postgres, in memory)."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store

    def read(self, thread_id: str) -> str | None:
        item = self.store.get(NAMESPACE, thread_id)
        return None if item is None else str(item.value["text"])

    def write(self, thread_id: str, text: str, turn: int) -> None:
        now = time.time()
        self.store.put(NAMESPACE, thread_id, {"text": text, "turn": turn, "time": now})
        key = f"{turn:08d}-{time.time_ns()}"
        self.store.put(
            (*NAMESPACE, "history", thread_id), key, {"turn": turn, "time": now, "text": text}
        )

    def history(self, thread_id: str) -> list[dict[str, Any]]:
        items = self.store.search((*NAMESPACE, "history", thread_id), limit=100_000)
        return [dict(item.value) for item in sorted(items, key=lambda item: item.key)]


def backend_for(state: State, deps: Deps) -> NotesBackend:
    """The store given to ``build_graph``, else the folder of the ``notes_dir`` setting."""
    if deps.store is not None:
        return StoreNotes(deps.store)
    return FileNotes(narrowed(deps.run_settings(state), NotesSettings).notes_dir)


def load_notes(
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """Open the run's notes: those an earlier run on the thread left, or a new empty file."""
    backend, thread = backend_for(state, deps), state["thread_id"]
    notes = yield Blocking(backend.read, (thread,))
    if notes is None:
        yield Blocking(backend.write, (thread, "", 0))
    resumed = bool(notes and notes.strip())
    if resumed:
        logger.info("thread %s resumes from %d characters of notes", thread, len(notes))
    return {"notes": notes or "", "resumed_notes": resumed}


def update_notes(
    state: State, config: RunnableConfig, deps: Deps
) -> Generator[Effect, Any, dict[str, Any]]:
    """The update_notes action: replace the notes, or refuse text over the limit."""
    parsed, reply = state["parsed"], state["reply"]
    if parsed is None or reply is None:
        raise ValueError("update_notes needs a parsed reply in the state")
    text = parsed["action_input"] or ""
    limit = narrowed(deps.run_settings(state), NotesSettings).max_notes_chars
    update: dict[str, Any] = {}
    if len(text) > limit:
        observation = prompts.NOTES_TOO_LONG.format(length=len(text), limit=limit)
    else:
        turn_number = len(state.get("turns") or []) + 1
        yield Blocking(backend_for(state, deps).write, (state["thread_id"], text, turn_number))
        logger.info("turn %d: notes revised (%d characters)", turn_number, len(text))
        observation = prompts.NOTES_SAVED
        update["notes"] = text
        if len(text) > len(prompts.NOTES_ELIDED) and text in reply["text"]:
            # The notes block shows the saved text already; repeating it in the window would
            # spend up to the whole notes limit a second time.
            reply = {**reply, "text": reply["text"].replace(text, prompts.NOTES_ELIDED)}
        if len(text) > len(prompts.NOTES_ELIDED) and reply.get("tool_calls"):
            # A native call holds the text in its arguments: the later prompts send it back
            # with the placeholder (the turn's ``args`` keep the text).
            first, *others = reply["tool_calls"]
            shown = {k: prompts.NOTES_ELIDED if v == text else v for k, v in first["args"].items()}
            reply = {**reply, "tool_calls": [{**first, "args": shown}, *others]}
    update["turns"] = [
        new_turn(state, "action", reply=reply, parsed=parsed, observation=observation)
    ]
    return update
