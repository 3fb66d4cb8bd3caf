"""The state's reducers: how each accumulating channel combines what nodes write."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AnyMessage, convert_to_messages


def add_messages(current: Sequence[AnyMessage] | None, new: Any) -> list[AnyMessage]:
    """The reducer of ``messages``: append, or replace a message sent again with the same id.

    Only a message that arrives with an id already present is looked up (a client's edit), so
    the run's own appends cost nothing per message held. Missing ids are numbered by position,
    never random, so a replay of the same writes gives the same ids.
    """
    merged = list(current or [])
    incoming = convert_to_messages(new if isinstance(new, list) else [new])
    positions: dict[str, int] | None = None
    for message in incoming:
        if message.id is None:
            message = message.model_copy(update={"id": f"rg-in-{len(merged)}"})
        elif not message.id.startswith("rg-"):
            if positions is None:
                positions = {m.id: i for i, m in enumerate(merged) if m.id is not None}
            if message.id in positions:
                merged[positions[message.id]] = message
                continue
            positions[message.id] = len(merged)
        merged.append(message)
    return merged
