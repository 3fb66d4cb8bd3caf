"""How the state's growing channels are stored: as deltas, so a checkpoint never writes the
whole transcript again (LangGraph's ``DeltaChannel``, beta; ``tests/test_delta_contract.py``
pins what we rely on).

A ``DeltaChannel`` stores each step's writes once and a full copy (a snapshot) only every so
many updates; a read replays the writes since the last snapshot through the reducer. Reducers
get a batch of writes, must not mutate the current value, and must give the same result however
the writes are batched: ``r(r(s, xs), ys) == r(s, xs + ys)``. An ``Overwrite`` (a new run's
reset) is applied by the channel itself and also forces a snapshot.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from operator import attrgetter
from typing import Any

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.channels import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from reactgraph.nodes.vocabulary.run_settings import HISTORY_RUNS_MAX

# A snapshot every 500 updates (about 500 turns): at 1,000 turns the snapshots add about as much
# as the transcript itself, while a read replays at most a few hundred writes (see also
# ``reactgraph.nodes.vocabulary.delta``, which bounds the replay for channels written rarely).
SNAPSHOT_EVERY = 500


def appended(current: list[Any], writes: Sequence[list[Any]]) -> list[Any]:
    """The reducer of an append-only list: each write is a list of new items."""
    out = list(current)
    for items in writes:
        out.extend(items)
    return out


def latest(current: Any, writes: Sequence[Any]) -> Any:
    """The reducer of a value replaced whole (the notes, the summary): the last write wins."""
    return writes[-1]


def kept_runs(current: list[Any], writes: Sequence[list[Any]]) -> list[Any]:
    """The reducer of ``earlier_runs``: each write's run records put in place of the record of
    the same run (a run's ending replaces its start), else appended; only the last
    ``HISTORY_RUNS_MAX`` are kept. A record holds its run's number under ``run``; runs only
    grow, so the record replaced is always among the last."""
    out = list(current)
    for records in writes:
        for record in records:
            for index in range(len(out) - 1, -1, -1):
                if out[index]["run"] == record["run"]:
                    out[index] = record
                    break
                if out[index]["run"] < record["run"]:
                    out.append(record)
                    break
            else:
                out.append(record)
    return out[-HISTORY_RUNS_MAX:]


def _kinds(items: Sequence[Any]) -> set[type]:
    """The types of ``items``: a long list is looked at once, in C, not item by item."""
    return set(map(type, items))


def _as_messages(items: Sequence[Any]) -> list[AnyMessage]:
    """Messages in any form ``add_messages`` accepts (objects, dicts with ``type`` or ``role``,
    chunks), as message objects; a list already all messages is returned as it is, without
    looking at more than each item's type."""
    if all(
        issubclass(t, BaseMessage) and not issubclass(t, BaseMessageChunk) for t in _kinds(items)
    ):
        return list(items)
    converted: list[BaseMessage] = convert_to_messages(items)
    return [message_chunk_to_message(m) for m in converted]  # type: ignore[misc]


# A list the reducer returned, its length, and its id index with a copy of the list it indexes
# (None, None: no index was built).
_Entry = tuple[list[AnyMessage], int, dict[str, int] | None, list[AnyMessage] | None]


class _Held(threading.local):
    """The lists this reducer returned last (in this thread), with their id index if one was
    built: a list handed back as the next call's ``current`` (the channel's value at the next
    step, a replay's next checkpoint) is taken as it is, all messages, and needs no index built
    again. An entry serves one call, handed that very list at the same length; one with an
    index, only with its items the same as the copy's (compared by identity, in C, far cheaper
    than indexing them again). The run's own steps append (``chat_update``'s tuples) and build
    no index, so a step copies the transcript once, not three times."""

    def __init__(self) -> None:
        self.lists: dict[int, _Entry] = {}

    def take(self, current: Sequence[Any]) -> tuple[bool, dict[str, int] | None]:
        """(whether ``current`` is a list returned here, unchanged; its index if it had one)."""
        entry = self.lists.pop(id(current), None)
        if entry is None or entry[0] is not current or entry[1] != len(current):
            return False, None
        if entry[2] is not None and entry[3] != current:
            return False, None
        return True, entry[2]

    def keep(self, out: list[AnyMessage], positions: dict[str, int] | None) -> None:
        while len(self.lists) >= _HELD_LISTS:
            del self.lists[next(iter(self.lists))]
        copy = out.copy() if positions is not None else None
        self.lists[id(out)] = (out, len(out), positions, copy)


_HELD_LISTS = 4
_HELD = _Held()


def _positions(out: Sequence[AnyMessage]) -> dict[str, int]:
    """Each id's (last) position in ``out``."""
    positions = dict(zip(map(attrgetter("id"), out), range(len(out)), strict=True))
    positions.pop(None, None)
    return positions


class _Chat:
    """The messages being reduced, and the index of their ids' positions (None until a
    lookup needs it, and again after a removal moves them)."""

    def __init__(self, out: list[AnyMessage], positions: dict[str, int] | None) -> None:
        self.out, self.positions = out, positions

    def append(self, message: AnyMessage) -> None:
        if self.positions is not None and message.id is not None:
            self.positions[str(message.id)] = len(self.out)
        self.out.append(message)

    def put(self, message: AnyMessage) -> None:
        """One message of a write: removed, put in place of the one with its id, or appended
        (numbered by its position when it has no id)."""
        if isinstance(message, RemoveMessage) and message.id == REMOVE_ALL_MESSAGES:
            self.out, self.positions = [], None
            return
        if message.id is None:
            message = message.model_copy(update={"id": f"rg-in-{len(self.out)}"})
        index = self._index(message)
        if isinstance(message, RemoveMessage):
            if index is None:
                raise ValueError(f"no message with id {message.id!r} to remove")
            del self.out[index]
            self.positions = None
        elif index is not None:
            self.out[index] = message
        else:
            self.append(message)

    def _index(self, message: AnyMessage) -> int | None:
        """Where the message with ``message``'s id is: the last one, else by the index
        (built now if there is none)."""
        if self.out and self.out[-1].id == message.id:
            return len(self.out) - 1
        if self.positions is None:
            self.positions = _positions(self.out)
        return self.positions.get(str(message.id))


def added_messages(current: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    """The reducer of ``messages``: each write's messages appended, or put in place of the
    message with the same id (a client's edit, a fork's copy, a reply given its tool call), or
    removed (``RemoveMessage``, as with ``add_messages``).

    A write that is a tuple is the run's own chat view of new messages (``chat_update``): its
    ids are new by construction, so it is appended without a lookup, and a long run's step
    costs nothing per message held. Other messages are looked up by id (the last message
    first, then in an index built at most once per call, and carried to the next call when
    that call is handed the list this one returned: a replay of stored writes, where tuples
    come back as lists, builds it once, not once a step). Missing ids are numbered by
    position, never random, so replaying the same writes gives the same ids. What the server
    hands back (a snapshot of the channel decoded to dicts, a tuple decoded to a list) is
    converted first.
    """
    ours, positions = _HELD.take(current)
    if ours or not any(issubclass(t, Mapping) for t in _kinds(current)):
        out = list(current)
    else:
        out = _as_messages(current)
    chat = _Chat(out, positions)
    for new in writes:
        if isinstance(new, tuple):
            for message in _as_messages(new):
                chat.append(message)
            continue
        for message in _as_messages(new if isinstance(new, list) else [new]):
            chat.put(message)
    _HELD.keep(chat.out, chat.positions)
    return chat.out


Transcript: DeltaChannel[Any] = DeltaChannel(appended, snapshot_frequency=SNAPSHOT_EVERY)
Chat: DeltaChannel[Any] = DeltaChannel(added_messages, snapshot_frequency=SNAPSHOT_EVERY)
# Written rarely: a snapshot at each write keeps a read from replaying back to the run's start.
Rare: DeltaChannel[Any] = DeltaChannel(appended, snapshot_frequency=1)
Replaced: DeltaChannel[Any] = DeltaChannel(latest, snapshot_frequency=1)
# Written twice a run (its start, its end), kept bounded: a snapshot at each write.
Earlier: DeltaChannel[Any] = DeltaChannel(kept_runs, snapshot_frequency=1)


# Channels whose updates are appended to what the state holds, and what such an update is.
_APPENDED = ("turns", "compactions", "messages")
_ITEMS = (list, tuple)


class _Joined(Sequence[Any]):
    """The state's list with a node's appended items, without copying either."""

    def __init__(self, head: Sequence[Any], tail: Sequence[Any]) -> None:
        self._head, self._tail = head, tail

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(itertools.chain(self._head, self._tail))[index]
        if index < 0:
            index += len(self)
        if index < len(self._head):
            return self._head[index]
        return self._tail[index - len(self._head)]

    def __iter__(self) -> Iterator[Any]:
        return itertools.chain(self._head, self._tail)


def after(state: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """The state as a node's update leaves it, for that node's router."""
    merged = {**state, **update}
    for key in _APPENDED:
        if isinstance(update.get(key), _ITEMS):
            merged[key] = _Joined(state.get(key) or [], list(update[key]))
    return merged
