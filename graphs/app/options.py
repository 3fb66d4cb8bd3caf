"""What the ``reactgraph`` commands that run share: the model from the options, a run's settings,
the graph a recorded run was built with, the thread lock, the resume hint. The commands
themselves are in ``running`` (ask, resume, batch, prune, demo) and ``viewing`` (show, threads,
graph), the parser in ``cli`` and its setting flags in ``flags``."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel

from reactgraph import build_graph
from reactgraph.app.flags import RunOptions, UsageError, settings_from
from reactgraph.app.recipe import tool_timeout, toolset, with_ladder
from reactgraph.models import chat_model
from reactgraph.storage.backends import database_backend, faults
from reactgraph.storage.database import DatabaseError, RunRecord, explain, thread_lock
from reactgraph.storage.locks import Lease
from reactgraph.tools.loading import load_tools, tools_address
from reactgraph.variants import variant

logger = logging.getLogger(__name__)


def db_stops() -> tuple[type[BaseException], ...]:
    """A database fault as its driver raised it (``faults()``: the drivers in use, asked when
    the exception is handled), or as storage explained it."""
    return (*faults(), DatabaseError)


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


def run_settings(
    args: argparse.Namespace, variants: list[str] | None = None
) -> tuple[dict[str, Any], RunOptions]:
    """The settings ``ask``/``batch`` give the variant (or an eval its ``variants``): only those
    given on the command line, each checked against its spec; and the command line's own
    options beside them."""
    settings = settings_from(args, variants or [args.variant])
    options = RunOptions(notes_in_db=bool(getattr(args, "notes_in_db", False)))
    if options.notes_in_db and variant(args.variant).setting("notes_dir") is None:
        raise UsageError(f"--notes-in-db does not apply to the {args.variant} variant")
    if args.mcp is not None:
        options = dataclasses.replace(options, mcp=mcp_config(args.mcp))
    if args.tools:
        options = dataclasses.replace(options, tools=tuple(own_tools(t) for t in args.tools))
    if args.no_default_tools:
        if args.mcp is None and not args.tools:
            raise UsageError(
                "--no-default-tools leaves no tools: give --mcp servers.json or --tools"
            )
        options = dataclasses.replace(options, default_tools=False)
    return settings, options


def own_tools(address: str) -> str:
    """A ``--tools`` address as the run's record keeps it, once it has loaded (a worker, or a
    resume in another folder, loads it again); a bad one is the person's mistake."""
    try:
        load_tools(address)
        return tools_address(address)
    except ValueError as error:
        raise UsageError(str(error)) from None


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
    options = RunOptions.of(record.options)
    notes = store if options.notes_in_db else None
    try:
        tools = toolset(record.corpus, options, tool_timeout(record.variant, record.settings))
        return build_graph(
            record.variant,
            model=model,
            tools=tools,
            checkpointer=saver,
            store=notes,
            **with_ladder(record.settings, model, record.base_url),
        )
    except (ValueError, TypeError) as error:
        raise UsageError(str(error)) from None


@contextlib.contextmanager
def held(db: str, thread: str) -> Iterator[Lease]:
    """The thread's lock for this process (``ThreadBusy`` when another holds it); a lock that
    cannot be made (an unwritable folder, a server down) is a ``DatabaseError``. A run under it
    writes with ``lease_saver(saver, lease)``."""
    lock = contextlib.ExitStack()
    try:
        lease = lock.enter_context(thread_lock(db, thread))
    except OSError as error:
        where = database_backend(db).lock_place(db)
        raise DatabaseError(
            f"cannot lock thread {thread} in {where} ({error.strerror or error}); make the "
            "database's folder writable, or pass another --db"
        ) from None
    except faults() as error:
        raise DatabaseError(explain(db, error)) from error
    try:
        yield lease
    finally:
        try:
            lock.close()
        except faults() as error:
            # The lock's session is gone with the server, and the lock with it.
            logger.info("releasing the lock on thread %s: %s", thread, error)
