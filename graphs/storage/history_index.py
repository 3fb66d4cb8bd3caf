"""One thread's checkpoints in memory, answering LangGraph's ``get_delta_channel_history``
for each of them in one pass over the thread (see ``reactgraph.storage.history``).

For a channel whose reducer it knows (reactgraph's state), a checkpoint's answer is its value,
rebuilt from its parent's value and the parent's own writes (LangGraph's reducers are
batching-invariant, so that is what the walk back to the last snapshot gives), with nothing
left to replay. For any other channel it is the walk's own answer (the seed and every
write since), each checkpoint's extending its parent's in a shared list.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import CheckpointTuple, DeltaChannelHistory, PendingWrite
from langgraph.checkpoint.serde.types import _DeltaSnapshot

__all__ = ["HistoryIndex", "state_specs"]

# (seed found, seed, shared list of writes, how many of them are this checkpoint's)
_Acc = tuple[bool, Any, list[PendingWrite], int]
_ROOT: _Acc = (False, None, [], 0)


class HistoryIndex:
    """One thread's checkpoints (parent, stored values, writes by channel), answering
    ``get_delta_channel_history`` exactly as LangGraph's walk does."""

    def __init__(
        self, tuples: Iterable[CheckpointTuple], specs: Mapping[str, DeltaChannel] | None = None
    ) -> None:
        self.specs = dict(specs or {})
        self.parent: dict[str, str | None] = {}
        self.values: dict[str, Mapping[str, Any]] = {}
        self.writes: dict[str, dict[str, list[PendingWrite]]] = {}
        for tup in tuples:
            cid = tup.config["configurable"]["checkpoint_id"]
            parent = tup.parent_config
            self.parent[cid] = parent["configurable"]["checkpoint_id"] if parent else None
            self.values[cid] = tup.checkpoint["channel_values"]
            by_channel: dict[str, list[PendingWrite]] = {}
            for write in tup.pending_writes or ():  # in writes_sort_key order, as the walk's
                by_channel.setdefault(write[1], []).append(write)
            self.writes[cid] = by_channel
        self._acc: dict[tuple[str, str], _Acc] = {}
        self._value: dict[tuple[str, str], Any] = {}

    def history(self, cid: str, channels: Sequence[str]) -> dict[str, DeltaChannelHistory] | None:
        """What the walk from ``cid`` gives for each channel, or None for a checkpoint the
        index does not hold."""
        if cid not in self.values:
            return None
        out: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            if channel in self.specs:
                out[channel] = self._stepwise(cid, channel)
                continue
            seeded, seed, writes, end = self._accumulated(cid, channel)
            entry: DeltaChannelHistory = {"writes": writes[:end]}
            if seeded:  # a copy: checkpoints read from one snapshot get lists of their own
                entry["seed"] = _copied(seed)
            out[channel] = entry
        return out

    def _stepwise(self, cid: str, channel: str) -> DeltaChannelHistory:
        """For a channel whose reducer the index knows: its value at ``cid`` as the seed, and
        no writes. The index rebuilds each checkpoint's value from its parent's (reducers are
        batching-invariant, so that is what the walk's seed and writes give), once; LangGraph
        then replays nothing, so each step's writes go through the reducer once in all."""
        parent = self.parent[cid]
        if parent is None or parent not in self.values:
            return {"writes": []}
        return {"seed": _DeltaSnapshot(copy.copy(self._value_at(cid, channel))), "writes": []}

    def _value_at(self, cid: str, channel: str) -> Any:
        """The channel's value at ``cid``, as LangGraph rebuilds it (memoized; never mutated:
        what leaves the index is a copy)."""
        spec = self.specs[channel]
        path: list[str] = []
        node = cid
        while (node, channel) not in self._value:
            parent = self.parent.get(node)
            if channel in self.values[node]:
                value = spec.from_checkpoint(self.values[node][channel]).get()
            elif parent is None or parent not in self.values or len(path) > len(self.values):
                value = spec.from_checkpoint(None).get()
            else:
                path.append(node)
                node = parent
                continue
            self._value[node, channel] = value
        for child in reversed(path):
            parent = self.parent[child]
            assert parent is not None
            rebuilt = spec.from_checkpoint(_DeltaSnapshot(self._value[parent, channel]))
            rebuilt.replay_writes(self.writes[parent].get(channel, ()))
            self._value[child, channel] = rebuilt.get()
        return self._value[cid, channel]

    def _accumulated(self, cid: str, channel: str) -> _Acc:
        """The seed and writes that rebuild ``channel`` at ``cid``: its parent's, plus the
        parent's writes; or the parent's stored value (a snapshot), plus its writes."""
        path: list[str] = []
        node = cid
        while (node, channel) not in self._acc:
            parent = self.parent.get(node)
            if parent is None or parent not in self.values:  # the root, or rows pruned away
                self._acc[node, channel] = _ROOT
                break
            if channel in self.values[parent]:
                own = list(self.writes[parent].get(channel, ()))
                self._acc[node, channel] = (True, self.values[parent][channel], own, len(own))
                break
            if len(path) > len(self.values):  # a loop in the chain: the walk stops there too
                self._acc[node, channel] = _ROOT
                break
            path.append(node)
            node = parent
        for child in reversed(path):
            parent = self.parent[child]
            assert parent is not None
            self._acc[child, channel] = _extended(
                self._acc[parent, channel], self.writes[parent].get(channel, ())
            )
        return self._acc[cid, channel]


def _copied(seed: Any) -> Any:
    if isinstance(seed, _DeltaSnapshot):
        return _DeltaSnapshot(copy.copy(seed.value))
    return copy.copy(seed)


def _extended(acc: _Acc, writes: Sequence[PendingWrite]) -> _Acc:
    """``acc`` and then ``writes``, sharing the list when no sibling branch extended it."""
    seeded, seed, shared, end = acc
    if not writes:
        return acc
    if end == len(shared):
        shared.extend(writes)
        return seeded, seed, shared, len(shared)
    branch = shared[:end] + list(writes)
    return seeded, seed, branch, len(branch)


def state_specs() -> dict[str, DeltaChannel]:
    """The delta channels of reactgraph's state, whose reducers the index may apply itself."""
    global _SPECS
    if _SPECS is None:
        from langgraph.graph import StateGraph

        from reactgraph.nodes.vocabulary.state import State

        channels = StateGraph(State).channels
        _SPECS = {k: v for k, v in channels.items() if isinstance(v, DeltaChannel)}
    return _SPECS


_SPECS: dict[str, DeltaChannel] | None = None
