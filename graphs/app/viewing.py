"""The commands that only read: ``show``, ``threads`` and ``graph``. They open the database
read-only, so they never create it (or its folder) and never need to write to it.

LangGraph and the graphs are imported only once there is a database to read (``_open``): a
database that does not exist is said at once (``tests/test_startup.py``)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.markup import escape

from reactgraph.app import console as out
from reactgraph.app.flags import UsageError
from reactgraph.app.hints import resume_hint
from reactgraph.nodes.vocabulary.endings import AWAITING
from reactgraph.storage.backends import database_backend
from reactgraph.storage.errors import NoDatabase
from reactgraph.storage.faults import DatabaseError
from reactgraph.storage.listing import (
    PREFIX,
    connection_record_pages,
    connection_unrecorded_pages,
    unrecorded_pages,
)
from reactgraph.storage.records import RECORDS_PAGE, RecordDamaged, RunRecord
from reactgraph.storage.summaries import fresh_summary
from reactgraph.variants import MODEL_KEY, VARIANT_KEY, VARIANTS, variant

FROM_PYTHON = "from_python"
"""The option of a record made for a thread run from Python (``python_record``)."""


def reader(name: str, saver: Any) -> Any:
    """A graph that only reads the checkpoints of a variant's threads: no tools, no model call,
    and a fixed context window, so nothing looks one up (or warns that it cannot)."""
    from reactgraph import build_graph
    from reactgraph.nodes.loop.compaction import FALLBACK_WINDOW
    from reactgraph.scripted import ScriptedChatModel

    try:
        spec = variant(name)
    except ValueError as error:
        raise UsageError(str(error)) from None
    window: dict[str, Any] = (
        {"context_window": FALLBACK_WINDOW} if spec.setting("context_window") else {}
    )
    return build_graph(name, model=ScriptedChatModel(), tools=[], checkpointer=saver, **window)


def load_record(store: Any, thread: str, db: str, saver: Any = None) -> RunRecord:
    """The thread's record; an unknown thread is the person's mistake. A record that cannot be
    read, or names a variant this version does not have, is ``RecordDamaged``: one line. With
    ``saver``, a thread run from Python (no record; its checkpoints name their variant) is
    read as the record it would have had (``python_record``)."""
    record = RunRecord.load(store, thread)
    if record is None and saver is not None:
        record = python_record(saver, thread)
    if record is None:
        raise UsageError(f"unknown thread {thread!r} in {db} ('reactgraph threads' lists them)")
    return known(record)


def python_record(saver: Any, thread: str) -> RunRecord | None:
    """What a run record would say of a thread run from Python with ``build_graph`` (its
    latest checkpoint's metadata names the variant and model: ``reactgraph.build``), or None
    for a thread that is not such a run (no checkpoint, another graph's). Its question is
    filled in once the thread is read (``with_question``)."""
    found = saver.get_tuple({"configurable": {"thread_id": thread}})
    metadata = found.metadata if found is not None else None
    if not metadata or metadata.get(VARIANT_KEY) not in VARIANTS:
        return None
    try:
        created = datetime.fromisoformat(found.checkpoint["ts"]).timestamp()
    except (KeyError, TypeError, ValueError):
        created = 0.0
    model = metadata.get(MODEL_KEY)
    return RunRecord(
        thread_id=thread,
        question="?",
        variant=metadata[VARIANT_KEY],
        model=model if isinstance(model, str) else "?",
        base_url=None,
        corpus=None,
        settings={},
        created=created,
        options={FROM_PYTHON: True},
    )


def with_question(record: RunRecord, values: dict[str, Any]) -> RunRecord:
    """A record made by ``python_record``, with the question its thread's state holds."""
    if not record.options.get(FROM_PYTHON) or not isinstance(values.get("question"), str):
        return record
    return dataclasses.replace(record, question=values["question"])


def known(record: RunRecord) -> RunRecord:
    """The record, if its variant is one this version has (else ``RecordDamaged``)."""
    if record.variant not in VARIANTS:
        raise RecordDamaged(record.thread_id, f"unknown variant {record.variant!r}")
    return record


def _open(db: str) -> Any:
    """``open_db(db, read_only=True)``; a SQLite file that does not exist is ``NoDatabase``
    before LangGraph is imported."""
    if not database_backend(db).exists(db):
        raise NoDatabase(f"no database at {db}")
    from reactgraph.storage.database import open_db

    return open_db(db, read_only=True)


def _read_thread(graph: Any, thread: str) -> tuple[str, dict[str, Any]]:
    from reactgraph.storage.snapshots import read_thread

    return read_thread(graph, thread)


class Reading(contextlib.AbstractContextManager["Reading"]):
    """The database as ``threads`` and ``show`` read it: a thread whose summary is fresh
    (``reactgraph.storage.summaries``) over a plain read-only SQLite connection, with no
    LangGraph; any other thread through LangGraph, opened once, when first needed. What is
    printed is the same either way."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.quick = database_backend(db).quick_reader(db)
        self._stack = contextlib.ExitStack()
        self._opened: tuple[Any, Any] | None = None

    def __exit__(self, kind: object, error: BaseException | None, *rest: object) -> None:
        try:
            self._stack.close()
        finally:
            if self.quick is not None:
                self.quick.close()
        faults = database_backend(self.db).faults()
        if self.quick is not None and isinstance(error, faults):  # the plain connection's: one line
            raise DatabaseError(database_backend(self.db).explain(self.db, error)) from error

    def opened(self) -> tuple[Any, Any]:
        """LangGraph's checkpointer and store of the database (``_open``), opened once."""
        if self._opened is None:
            self._opened = self._stack.enter_context(_open(self.db))
        return self._opened

    def records(self) -> Iterator[RunRecord | RecordDamaged]:
        """Every run record, newest first (``RunRecord.each``)."""
        if self.quick is not None:
            return RunRecord.each_in(connection_record_pages(self.quick, "sqlite", RECORDS_PAGE))
        return RunRecord.each(self.opened()[1])

    def unrecorded(self) -> Iterator[list[str]]:
        """The threads without a record, a page at a time (``unrecorded_pages``)."""
        if self.quick is not None:
            return connection_unrecorded_pages(self.quick, "sqlite", RECORDS_PAGE)
        return unrecorded_pages(self.opened()[1], RECORDS_PAGE)

    def summarized(self, record: RunRecord | RecordDamaged) -> tuple[str, dict[str, Any]] | None:
        """The record's thread's standing and values from its fresh summary, or None."""
        if self.quick is None or not isinstance(record, RunRecord):
            return None
        if record.variant not in VARIANTS:
            return None  # damaged: said as LangGraph's read says it
        return fresh_summary(self.quick, record.thread_id)

    def shown(self, thread: str) -> tuple[RunRecord, str, dict[str, Any]] | None:
        """What ``show`` prints of a thread with a readable record and a fresh summary."""
        if self.quick is None:
            return None
        faults: tuple[type[BaseException], ...] = (
            *database_backend(self.db).faults(),
            RecordDamaged,
        )
        try:
            found = self.quick.execute(
                "SELECT value FROM store WHERE prefix = ? AND key = ?", (PREFIX, thread)
            ).fetchone()
            record = None if found is None else RunRecord.from_value(found[0], thread)
        except faults:
            return None  # said (or shown) by LangGraph's read, as before
        summary = None if record is None else self.summarized(record)
        return None if record is None or summary is None else (record, *summary)


def cmd_show(args: argparse.Namespace) -> int:
    from reactgraph.app.approving import pending_action

    with Reading(args.db) as reading:
        quick = reading.shown(args.thread)
        if quick is not None:
            record, status, values = quick
        else:
            saver, store = reading.opened()
            record = load_record(store, args.thread, args.db, saver)
            graph = reader(record.variant, saver)
            status, values = _read_thread(graph, record.thread_id)
        record = with_question(record, values)
        out.print_run(record, _started(status), values)
    if status == AWAITING:
        turn = len(values.get("turns") or []) + 1
        action = pending_action({}, values)
        out.console.print(
            f"Waiting for a person's decision on turn {turn}: {escape(action)}. Decide with:\n"
            f"  {escape(resume_hint(record.thread_id, args.db))}"
        )
    return 0


def cmd_threads(args: argparse.Namespace) -> int:
    """Every thread, a page at a time (so memory stays bounded however many there are); a
    thread whose record or checkpoint cannot be read is listed as damaged."""
    try:
        with Reading(args.db) as reading:
            graphs: dict[str, Any] = {}
            page: list[tuple[RunRecord | RecordDamaged, str, int | None]] = []
            first = True
            for record in reading.records():
                page.append(_row(graphs, reading, record))
                if len(page) == RECORDS_PAGE:
                    out.print_threads(page, header=first)
                    page, first = [], False
            # Then the threads run from Python (no record), by thread id.
            for threads in reading.unrecorded():
                for thread in threads:
                    made = python_record(reading.opened()[0], thread)
                    if made is not None:
                        page.append(_row(graphs, reading, made))
                    if len(page) == RECORDS_PAGE:
                        out.print_threads(page, header=first)
                        page, first = [], False
            if page or first:
                out.print_threads(page, header=first)
    except NoDatabase as missing:
        # Nothing has run against this path yet: an empty listing, not an error.
        out.console.print(f"[dim]no threads: {missing}[/dim]")
        return 0
    return 0


def _row(
    graphs: dict[str, Any], reading: Reading, record: RunRecord | RecordDamaged
) -> tuple[RunRecord | RecordDamaged, str, int | None]:
    """A listing row: the run's own status once finished (answered, capped, ...), else where
    it stands; ``damaged`` (turns unknown) when its record or rows cannot be read."""
    from_summary = reading.summarized(record)
    if from_summary is not None and isinstance(record, RunRecord):
        return _listed(record, *from_summary)
    from reactgraph.storage.snapshots import ThreadDamaged

    saver = reading.opened()[0]
    try:
        if isinstance(record, RecordDamaged):
            raise record
        if record.variant not in graphs:
            graphs[record.variant] = reader(known(record).variant, saver)
        status, values = _read_thread(graphs[record.variant], record.thread_id)
    except (RecordDamaged, ThreadDamaged):
        return record, "damaged", None
    return _listed(record, status, values)


def _listed(
    record: RunRecord, status: str, values: dict[str, Any]
) -> tuple[RunRecord | RecordDamaged, str, int | None]:
    shown = values.get("status") if status == "finished" else _started(status)
    return with_question(record, values), shown or status, len(values.get("turns") or [])


def _started(status: str) -> str:
    """Where a recorded run stands. Its record is written before its first checkpoint, and
    LangGraph saves that checkpoint in the background while the first step runs, so a run
    killed early has a record and no checkpoint: it is interrupted (``resume`` starts it
    again), never unknown."""
    return "interrupted" if status == "unknown" else status


def cmd_graph(args: argparse.Namespace) -> int:
    """Print a variant's Mermaid drawing, or write it as a PNG (pygraphviz, no network)."""
    drawing = reader(args.variant, None).get_graph()  # a drawing needs no model either
    if args.png is None:
        out.console.print(drawing.draw_mermaid(), markup=False)
        return 0
    folder = Path(args.png).parent
    if not folder.is_dir():
        # Checked first: graphviz would print its own warnings before failing.
        raise UsageError(f"cannot write {args.png}: no folder {folder}")
    try:
        drawing.draw_png(args.png)
    except ImportError:
        raise UsageError("writing a PNG needs pygraphviz: pip install 'reactgraph[draw]'") from None
    except OSError as error:
        raise UsageError(f"cannot write {args.png}: {error.strerror or error}") from None
    out.console.print(f"wrote {args.png}")
    return 0
