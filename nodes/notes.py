"""The notes variant's memory: where notes live (a folder or a LangGraph store, behind one small
interface) and the two nodes that read and write them."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Literal, Protocol

from langgraph.store.base import BaseStore

from reactgraph.nodes import control, prompts
from reactgraph.nodes.state import State
from reactgraph.nodes.transcript import new_turn

logger = logging.getLogger(__name__)

UPDATE_NOTES = "update_notes"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
NAMESPACE = ("reactgraph", "notes")


def safe_name(thread_id: str) -> str:
    """A file name for a thread id that cannot leave its folder.

    Safe ids map to themselves; anything else (slashes, ``..``, odd characters, a leading dot)
    is replaced and gets a hash of the original, so two ids never share a file.
    """
    cleaned = _UNSAFE.sub("_", thread_id).strip(".")[:80]
    if cleaned == thread_id and cleaned:
        return cleaned
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{cleaned or 'thread'}-{digest}"


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

    def write(self, thread_id: str, text: str, turn: int) -> None:
        path = self.path(thread_id)
        path.parent.mkdir(parents=True, exist_ok=True)
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
        with path.with_suffix(".history.jsonl").open("a", encoding="utf-8") as log:
            log.write(record + "\n")
            log.flush()
            os.fsync(log.fileno())

    def history(self, thread_id: str) -> list[dict[str, Any]]:
        path = self.path(thread_id).with_suffix(".history.jsonl")
        if not path.exists():
            return []
        lines = path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]


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


def load_notes(state: State, *, backend: NotesBackend | None = None) -> dict[str, Any]:
    """Open the run's notes: those an earlier run on the thread left, or a new empty file."""
    store = _backend(state, backend)
    notes = store.read(state["thread_id"])
    if notes is None:
        store.write(state["thread_id"], "", turn=0)
    resumed = bool(notes and notes.strip())
    if resumed:
        logger.info("thread %s resumes from %d characters of notes", state["thread_id"], len(notes))
    return {"notes": notes or "", "resumed_notes": resumed}


def update_notes(state: State, *, backend: NotesBackend | None = None) -> dict[str, Any]:
    """The update_notes action: replace the notes, or refuse text over the limit."""
    parsed, reply = state["parsed"], state["reply"]
    if parsed is None or reply is None:
        raise ValueError("update_notes needs a parsed reply in the state")
    text = parsed["action_input"] or ""
    limit = state["settings"]["max_notes_chars"]
    update: dict[str, Any] = {}
    if len(text) > limit:
        observation = prompts.NOTES_TOO_LONG.format(length=len(text), limit=limit)
    else:
        turn_number = len(state.get("turns") or []) + 1
        _backend(state, backend).write(state["thread_id"], text, turn_number)
        logger.info("turn %d: notes revised (%d characters)", turn_number, len(text))
        observation = prompts.NOTES_SAVED
        update["notes"] = text
        if len(text) > len(prompts.NOTES_ELIDED) and text in reply["text"]:
            # The notes block shows the saved text already; repeating it in the window would
            # spend up to the whole notes limit a second time.
            reply = {**reply, "text": reply["text"].replace(text, prompts.NOTES_ELIDED)}
    update["turns"] = [
        new_turn(
            state,
            "action",
            reply=reply,
            parsed=parsed,
            observation=observation,
            tool_latency_s=None,
        )
    ]
    return update


def _backend(state: State, backend: NotesBackend | None) -> NotesBackend:
    return backend if backend is not None else FileNotes(state["settings"]["notes_dir"])


def stop_run(state: State) -> dict[str, Any]:
    """The notes variant's cap exit: no forced answer; the notes carry the run forward."""
    logger.info("turn cap reached; stopping early with the notes saved")
    return {"status": "stopped_early"}


def route_after_parse_reply(state: State) -> Literal["run_tool", "update_notes", "__end__"]:
    """As the core router, with update_notes going to its own node."""
    parsed = state.get("parsed")
    if not state.get("status") and parsed is not None and parsed["action"] == UPDATE_NOTES:
        return "update_notes"
    return control.route_after_parse_reply(state)


def route_after_turn(state: State) -> Literal["call_model", "stop_run"]:
    """Go on, or at the turn cap stop early (the notes variant makes no forced call)."""
    at_cap = control.route_after_run_tool(state) == "force_answer"
    return "stop_run" if at_cap else "call_model"
