"""Bounded caches: the most recently used entries kept, the oldest let go (a run's context, a
server's address and a model's name are anyone's on a server, so no cache may grow with them)."""

from __future__ import annotations

from typing import TypeVar

MOST_REMEMBERED = 32
"""Per-run models (``model_name``/``base_url``) and notes limits a graph keeps made, the most
recently used: a run's context is anyone's (a server), and each model holds its connections."""

_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


def remembered(
    cache: dict[_Key, _Value], key: _Key, value: _Value, most: int = MOST_REMEMBERED
) -> _Value:
    """``value``, kept under ``key`` as the newest of ``cache``, whose oldest is let go beyond
    ``most`` (the caller holds the lock)."""
    cache.pop(key, None)
    cache[key] = value
    while len(cache) > most:
        del cache[next(iter(cache))]
    return value
