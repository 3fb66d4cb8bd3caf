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

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AnyMessage, convert_to_messages
from langgraph.channels import DeltaChannel

# A snapshot every 500 updates (about 500 turns): at 1,000 turns the snapshots add about as much
# as the transcript itself, while a read replays at most a few hundred writes (see also
# ``reactgraph.nodes.delta``, which bounds the replay for channels written rarely).
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


def added_messages(current: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    """The reducer of ``messages``: each write's messages appended, or put in place of the
    message with the same id (a client's edit).

    A write that is a tuple is the run's own chat view of new turns (``chat_update``): its ids
    are new by construction, so it is appended without a lookup, and a long run's step costs
    nothing per message held. Other messages are looked up by id, in an index built at most
    once per call. Missing ids are numbered by position, never random, so replaying the same
    writes gives the same ids.
    """
    out = list(current)
    positions: dict[str, int] | None = None
    for new in writes:
        if isinstance(new, tuple):
            for message in new:
                if positions is not None and message.id is not None:
                    positions[message.id] = len(out)
                out.append(message)
            continue
        for message in convert_to_messages(new if isinstance(new, list) else [new]):
            if message.id is None:
                message = message.model_copy(update={"id": f"rg-in-{len(out)}"})
            elif not message.id.startswith("rg-"):
                if positions is None:
                    positions = {m.id: i for i, m in enumerate(out) if m.id is not None}
                if message.id in positions:
                    out[positions[message.id]] = message
                    continue
            if positions is not None:
                positions[message.id] = len(out)
            out.append(message)
    return out


Transcript = DeltaChannel(appended, snapshot_frequency=SNAPSHOT_EVERY)
Chat = DeltaChannel(added_messages, snapshot_frequency=SNAPSHOT_EVERY)
# Written rarely: a snapshot at each write keeps a read from replaying back to the run's start.
Rare = DeltaChannel(appended, snapshot_frequency=1)
Replaced = DeltaChannel(latest, snapshot_frequency=1)
