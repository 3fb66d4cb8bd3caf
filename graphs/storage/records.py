"""The record of each run: how it was started, so another process can rebuild its graph (``show``,
``resume``, ``prune``) and the listings can name it (``threads``).

A record is kept as the JSON of the store's item, which nothing checks once written: damage (a
disk fault, an older or foreign writer, a hand edit) can leave one without a field, with a field
of the wrong type, or not an object at all. Such a record is ``RecordDamaged``, an error that
names its thread: reading it is one line (exit 2), and the listings give it as damaged, never
stopping at it, so one record costs one thread, as a damaged checkpoint does
(``reactgraph.storage.snapshots.ThreadDamaged``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from reactgraph.storage.faults import DatabaseError
from reactgraph.storage.listing import RUNS, record_pages

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

RECORDS_PAGE = 500  # run records read at once by the listings (``threads``, ``prune --finished``)
# What reading a stored value can raise: orjson's error is a ValueError, and LangGraph's
# PostgreSQL store hands a JSON value that is no object to orjson (a TypeError).
_READ_FAULTS = (TypeError, ValueError)


class RecordDamaged(DatabaseError):
    """A thread's run record cannot be read: the thread cannot be shown, resumed or pruned
    (every other thread can). Its question and variant, where they are still readable, name it
    in a listing (``?`` otherwise)."""

    def __init__(self, thread_id: str, why: str, value: Any = None) -> None:
        self.thread_id = thread_id
        given = value if isinstance(value, dict) else {}
        self.question = _text(given.get("question"))
        self.variant = _text(given.get("variant"))
        super().__init__(
            f"thread {thread_id} is damaged: its run record cannot be read ({why[:200]})"
        )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "?"


def _object(value: Any, thread: str) -> dict[str, Any]:
    """A stored record's value as a JSON object (SQLite's JSON, as the listing reads it, is
    bytes); ``RecordDamaged`` for one that is not JSON or not an object."""
    if isinstance(value, bytes):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as error:
            raise RecordDamaged(thread, _why(error)) from error
    if not isinstance(value, dict):
        raise RecordDamaged(thread, f"a JSON {type(value).__name__}, not an object", value)
    return value


@dataclass(frozen=True)
class RunRecord:
    """How a thread's run was started, so another process can rebuild its graph to resume."""

    thread_id: str
    question: str
    variant: str
    model: str
    base_url: str | None
    corpus: str | None
    settings: dict[str, Any]
    """The settings given when it started (the variant's defaults stand for the others)."""
    created: float
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """What the command line chose besides the settings: ``notes_in_db``, ``mcp``,
    ``default_tools`` (see ``reactgraph.app.flags.RunOptions``)."""

    @classmethod
    def load(cls, store: BaseStore, thread_id: str) -> RunRecord | None:
        """The record of a thread, or None for a thread this database does not know;
        ``RecordDamaged`` if it cannot be read."""
        try:
            item = store.get(RUNS, thread_id)
        except _READ_FAULTS as error:
            raise RecordDamaged(thread_id, _why(error)) from error
        return None if item is None else cls.from_value(item.value, thread_id)

    @staticmethod
    def exists(store: BaseStore, thread_id: str) -> bool:
        """Whether the thread has a record, readable or damaged."""
        try:
            return store.get(RUNS, thread_id) is not None
        except _READ_FAULTS:
            return True

    @classmethod
    def from_value(cls, value: Any, key: str | None = None) -> RunRecord:
        """A stored record (``key``: the thread id it is stored under); fields a newer version
        added are ignored, so old code can read it. ``RecordDamaged`` if a field is missing or
        of the wrong type, or if the value is not a record at all."""
        thread = key if key is not None else str(_field(value, "thread_id", "?"))
        value = _object(value, thread)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        fault = cls._fault_in(value, fields)
        if fault is None and key is not None and value["thread_id"] != key:
            fault = f"it names thread {value['thread_id']!r}"
        if fault is not None:
            raise RecordDamaged(thread, fault, value)
        return cls(**{k: v for k, v in value.items() if k in fields})

    @staticmethod
    def _fault_in(value: dict[str, Any], fields: dict[str, dataclasses.Field]) -> str | None:
        """What is wrong with a stored record's fields: the first one missing (and without a
        default) or of the wrong type; None when they are all right."""
        for name, kinds in _KINDS.items():
            if name not in value and fields[name].default_factory is dataclasses.MISSING:
                return f"no {name!r}"
            if name in value and not _is(value[name], kinds):
                return f"{name!r} is a {type(value[name]).__name__}"
        return None

    def moved_to(self, model: str, base_url: str | None) -> RunRecord:
        """This record with the model (and server) a resumed run goes on with."""
        return dataclasses.replace(self, model=model, base_url=base_url)

    def save(self, store: BaseStore) -> None:
        """Write (or replace) this record."""
        store.put(RUNS, self.thread_id, dict(self.__dict__))

    @staticmethod
    def each(store: BaseStore, page: int | None = None) -> Iterator[RunRecord | RecordDamaged]:
        """Every recorded run, newest first (by when it started), read ``page`` records at a
        time, in time linear in their number: memory stays bounded however many there are. A
        record saved while this reads is never given twice and never makes another missed
        (``reactgraph.storage.listing``). A record that cannot be read is given as its
        ``RecordDamaged`` (never raised: the listing goes on), in its place by start time (a
        record without one counts as started at 0)."""
        return RunRecord.each_in(record_pages(store, page or RECORDS_PAGE))

    @staticmethod
    def each_in(pages: Iterable[list[tuple[str, Any]]]) -> Iterator[RunRecord | RecordDamaged]:
        """``each`` over pages of ``(key, stored value)`` rows read by other means (a plain
        connection: ``reactgraph.storage.listing.connection_record_pages``)."""
        for rows in pages:
            for key, value in rows:
                try:
                    yield RunRecord.from_value(value, key)
                except RecordDamaged as damaged:
                    yield damaged

    @staticmethod
    def all(store: BaseStore) -> list[RunRecord]:
        """Every readable recorded run, newest first, as a list (``each`` reads them a page at
        a time, and gives the damaged ones too)."""
        readable = (r for r in RunRecord.each(store) if isinstance(r, RunRecord))
        return sorted(readable, key=lambda r: -r.created)


# The type each field must have in a stored record.
_KINDS: dict[str, tuple[type, ...]] = {
    "thread_id": (str,),
    "question": (str,),
    "variant": (str,),
    "model": (str,),
    "base_url": (str, type(None)),
    "corpus": (str, type(None)),
    "settings": (dict,),
    "created": (int, float),
    "options": (dict,),
}


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and not isinstance(value, bool)  # JSON true is no number


def _field(value: Any, name: str, default: Any) -> Any:
    return value.get(name, default) if isinstance(value, dict) else default


def _why(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".splitlines()[0]


def new_record(
    thread_id: str,
    question: str,
    variant: str,
    model: str,
    base_url: str | None,
    corpus: str | None,
    settings: dict[str, Any],
    options: dict[str, Any] | None = None,
) -> RunRecord:
    """A record for a run starting now."""
    return RunRecord(
        thread_id, question, variant, model, base_url, corpus, settings, time.time(), options or {}
    )
