"""What the ``reactgraph`` commands share: the model from the options, a run's settings, the
graph a recorded run was built with, the thread lock, the resume hint. The commands themselves
are in ``commands_run`` (ask, resume, batch, demo) and ``commands_read`` (show, threads, graph)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
from langchain_core.language_models import BaseChatModel

from reactgraph import build_graph
from reactgraph.app.runner import toolset
from reactgraph.models import chat_model
from reactgraph.nodes.compaction import FALLBACK_WINDOW
from reactgraph.scripted import ScriptedChatModel
from reactgraph.storage.database import (
    DatabaseError,
    RunRecord,
    explain,
    is_postgres,
    thread_lock,
)
from reactgraph.variants import REGISTRY, variant

logger = logging.getLogger(__name__)

# What a database can raise mid-command: SQLite's and psycopg's own errors.
DB_FAULTS = (sqlite3.Error, psycopg.Error)


class UsageError(Exception):
    """Bad input from the person at the terminal: one line, exit code 2."""


def make_model(name: str, base_url: str | None, timeout: float) -> BaseChatModel:
    """ChatOpenAI from the options and the standard environment variables."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    key = os.environ.get("OPENAI_API_KEY") or None
    if not key and not base_url:
        raise UsageError(
            "no model to call: set OPENAI_API_KEY, or pass --base-url (or set OPENAI_BASE_URL) "
            "for an OpenAI-compatible server; `reactgraph demo` runs offline"
        )
    try:
        return chat_model(name, base_url=base_url, api_key=key, timeout=timeout)
    except ValueError as error:
        raise UsageError(str(error)) from None


def run_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings ``ask``/``batch`` give the variant, each checked against its spec."""
    spec = variant(args.variant)
    settings: dict[str, Any] = {"tool_timeout": args.tool_timeout}
    if args.max_turns is not None:
        settings["max_turns"] = args.max_turns
    if getattr(args, "context_window", None) is not None:
        if spec.setting("context_window") is None:
            takers = [name for name, s in REGISTRY.items() if s.setting("context_window")]
            raise UsageError(
                f"--context-window does not apply to the {args.variant} variant; "
                f"only to: {', '.join(takers)}"
            )
        settings["context_window"] = args.context_window
    if spec.setting("notes_dir") is not None and hasattr(args, "notes_dir"):
        settings.update(notes_in_db=args.notes_in_db, notes_dir=args.notes_dir)
    if args.mcp is not None:
        settings["mcp"] = mcp_config(args.mcp)
    if args.no_default_tools:
        if args.mcp is None:
            raise UsageError("--no-default-tools leaves no tools: give --mcp servers.json")
        settings["default_tools"] = False
    return settings


def mcp_config(path: str) -> str:
    """The absolute path of a servers.json whose shape is right (a worker, or a resume in
    another folder, reads it again); a bad file is the person's mistake."""
    try:
        from reactgraph.tools.mcp import normalize_servers
    except ImportError:
        raise UsageError("--mcp needs the MCP extra: pip install 'reactgraph[mcp]'") from None
    try:
        normalize_servers(path)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return os.path.abspath(path)


def build_for(
    record: RunRecord,
    model: BaseChatModel,
    saver: Any = None,
    store: Any = None,
) -> Any:
    """The graph a recorded run was started with, its tools included."""
    settings = dict(record.settings)
    if settings.pop("notes_in_db", False):
        settings["store"] = store
    mcp, default_tools = settings.pop("mcp", None), settings.pop("default_tools", True)
    try:
        tools = toolset(record.corpus, mcp, default_tools, settings.get("tool_timeout"))
        return build_graph(record.variant, model=model, tools=tools, checkpointer=saver, **settings)
    except (ValueError, TypeError) as error:
        raise UsageError(str(error)) from None


def reader(name: str, saver: Any) -> Any:
    """A graph that only reads the checkpoints of a variant's threads: no tools, no model call,
    and a fixed context window, so nothing looks one up (or warns that it cannot)."""
    try:
        spec = variant(name)
    except ValueError as error:
        raise UsageError(str(error)) from None
    window = {"context_window": FALLBACK_WINDOW} if spec.setting("context_window") else {}
    return build_graph(name, model=ScriptedChatModel(), tools=[], checkpointer=saver, **window)


def load_record(store: Any, thread: str, db: str) -> RunRecord:
    """The thread's record; an unknown thread is the person's mistake."""
    record = RunRecord.load(store, thread)
    if record is None:
        raise UsageError(f"unknown thread {thread!r} in {db} (`reactgraph threads` lists them)")
    return record


@contextlib.contextmanager
def held(db: str, thread: str) -> Iterator[None]:
    """The thread's lock for this process (``ThreadBusy`` when another holds it); a lock that
    cannot be made (an unwritable folder, a server down) is a ``DatabaseError``."""
    lock = contextlib.ExitStack()
    try:
        lock.enter_context(thread_lock(db, thread))
    except OSError as error:
        where = db if is_postgres(db) else f"{db}.locks"
        raise DatabaseError(
            f"cannot lock thread {thread} in {where} ({error.strerror or error}); make the "
            "database's folder writable, or pass another --db"
        ) from None
    except DB_FAULTS as error:
        raise DatabaseError(explain(db, error)) from error
    try:
        yield
    finally:
        try:
            lock.close()
        except DB_FAULTS as error:
            # The lock's session is gone with the server, and the lock with it.
            logger.info("releasing the lock on thread %s: %s", thread, error)


def resume_hint(thread: str, db: str) -> str:
    """The command that continues the thread, from any folder."""
    where = db if is_postgres(db) else os.path.abspath(db)
    return f"reactgraph resume {shlex.quote(thread)} --db {shlex.quote(where)}"


def saved_hint(thread: str, db: str) -> str:
    """What a stopped run says: it is kept, and how to go on with it."""
    return f"The run is saved; resume it with:\n  {resume_hint(thread, db)}"


def interrupted_hint(args: argparse.Namespace) -> str | None:
    """What Ctrl-C says, once the command is parsed (``reactgraph.app.interrupts``); None for
    ``ask``, which says it once its thread is recorded."""
    if args.command == "ask":
        return None
    if args.command == "resume":
        return saved_hint(args.thread, args.db)
    if args.command == "batch":
        return (
            f"Finished questions are kept in {args.out}; "
            "run the same command again to finish the rest."
        )
    if args.command == "eval":
        return "Finished pairs are kept; run the same command again to finish the rest."
    if args.command == "prune":
        return "Threads pruned so far stay pruned; run the same command again for the rest."
    return "Nothing was changed."


TEXT_ARGUMENTS = ("question", "thread", "threads", "model", "base_url", "variants")
"""The arguments that are text (stored, sent, printed), not paths: they must be UTF-8."""


def check_text(args: argparse.Namespace) -> None:
    """A text argument holding a byte that is not UTF-8 (Python keeps it as a lone surrogate,
    which nothing can store or print) is the person's mistake: one line."""
    for name in TEXT_ARGUMENTS:
        value = getattr(args, name, None)
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str):
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                byte = ord(text[error.start]) & 0xFF
                option = name.replace("_", "-")
                raise UsageError(
                    f"the {option} is not UTF-8 text: byte 0x{byte:02x} at position "
                    f"{error.start}; pass it in UTF-8"
                ) from None
