"""Text and values every checkpointer can store.

PostgreSQL rejects NUL characters in text and JSON, and no backend can encode a lone surrogate
as UTF-8; one such character in a reply or an Observation would make every later write of the
thread fail. Text from models and tools is therefore cleaned as it enters the state, visibly:
each offending character becomes U+FFFD. A question is the caller's own input: it is refused
instead (see ``reactgraph.graph``), and so is a setting (``unstorable_value``, read by the one
settings check, ``reactgraph.settings.Setting.check``).

Integers are stored as 64-bit numbers (msgpack in the checkpoints, JSON in the run records):
one outside ``MIN_INT``..``MAX_INT`` cannot be written at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
MIN_INT = -(2**63)
MAX_INT = 2**63 - 1
"""The integers every backend stores: signed 64-bit."""


def storable(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, text)


def unstorable(text: str) -> str | None:
    """A description of the first character no backend can store, or None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return f"character U+{ord(found.group()):04X} at position {found.start()}"


def _outside_64_bits(item: int, at: str) -> str | None:
    if MIN_INT <= item <= MAX_INT:
        return None
    size = f"{'-' if item < 0 else ''}2^{item.bit_length() - 1} or more"
    return f"an integer outside 64 bits{at} ({item if item.bit_length() < 100 else size})"


def _unstorable_text(item: str, at: str) -> str | None:
    problem = unstorable(item)
    return None if problem is None else f"a {problem}{at}"


def _unstorable_key(item: dict[Any, Any], at: str) -> str | None:
    for key in item:
        problem = unstorable(key) if isinstance(key, str) else None
        if problem is not None:
            return f"a {problem} in the key {storable(key)[:40]!r}{at}"
    return None


def _unstorable_part(item: Any, at: str) -> str | None:
    """What of one value itself (what it holds aside; ``at`` says where it is) no backend
    can store: an integer outside 64 bits, a text's character, a mapping key's."""
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return _outside_64_bits(item, at)
    if isinstance(item, str):
        return _unstorable_text(item, at)
    if isinstance(item, dict):
        return _unstorable_key(item, at)
    return None


def _held(item: Any, where: str) -> Iterable[tuple[Any, str]]:
    """The values a mapping, a list or a tuple holds, each with where it is."""
    if isinstance(item, dict):
        return ((inner, f"{where}/{storable(str(key))[:40]}") for key, inner in item.items())
    if isinstance(item, list | tuple):
        return ((inner, f"{where}/{n}") for n, inner in enumerate(item))
    return ()


def unstorable_value(value: Any) -> str | None:
    """A description of the first part of ``value`` (a setting: a number, a text, a list of
    names, a mapping, a JSON document) no backend can store: an integer outside 64 bits, or a
    text (a mapping's key too) holding NUL or a lone surrogate; None when all of it can be
    stored. Iterative: a deep value cannot exhaust the stack."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        problem = _unstorable_part(item, f" at {where}" if where else "")
        if problem is not None:
            return problem
        stack.extend(_held(item, where))
    return None
