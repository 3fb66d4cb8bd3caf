"""The Ctrl-C guard's own rule, in this process: once a stop is under way, no ``on_stop`` block
is entered (what it would start, worker processes, the stop would never end). The real
processes interrupted at every moment are ``tests/test_interrupts*.py`` (``make test-kills``)."""

from __future__ import annotations

import threading

import pytest

from reactgraph.app import interrupts


class Parked(Exception):
    """Where the command's thread would wait forever (``park_if_stopping``)."""


def test_on_stop_is_never_entered_once_a_stop_is_under_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stopping = threading.Event()
    monkeypatch.setattr(interrupts, "_stopping", stopping)

    def park() -> None:  # what park_if_stopping does, raising instead of waiting forever
        if stopping.is_set():
            raise Parked

    monkeypatch.setattr(interrupts, "park_if_stopping", park)
    entered = []
    with interrupts.on_stop(lambda: None):
        entered.append("before")
    stopping.set()
    with pytest.raises(Parked), interrupts.on_stop(lambda: None):
        entered.append("during")
    assert entered == ["before"]
    assert not interrupts._state.cleanups  # a block that was left takes its cleanup with it
