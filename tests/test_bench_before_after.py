"""``bench/before_after.py --concurrency`` reads each tree's concurrency section from what it
prints (an earlier tree's section prints the same lines): the section's own printing, fed known
walls, is read back as the ratios those walls make. No timing here: bench/ measures."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench() -> Iterator[tuple[ModuleType, ModuleType]]:
    sys.path.insert(0, str(BENCH))
    try:
        import before_after
        import concurrency

        yield before_after, concurrency
    finally:
        sys.path.remove(str(BENCH))


def test_the_concurrency_sections_lines_are_read_back_as_their_ratios(
    bench: tuple[ModuleType, ModuleType],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before_after, concurrency = bench
    # (one run alone, many at once, client CPU a turn in seconds) by contender and transport
    walls = {
        ("ours", "httpx"): (0.5, 4.0, 0.011),
        ("ours", "aiohttp"): (0.4, 3.6, 0.009),
        ("prebuilt", "httpx"): (0.45, 3.2, 0.008),
        ("prebuilt", "aiohttp"): (0.42, 3.0, 0.006),
    }

    def timed(make: functools.partial[Any], repeats: int) -> tuple[float, float, float]:
        return walls[make.func.__name__, make.args[1]]

    monkeypatch.setattr(concurrency, "local_server", lambda *a: contextlib.nullcontext("url"))
    monkeypatch.setattr(concurrency, "timed", timed)
    monkeypatch.setattr(concurrency, "in_workers", lambda *a: (6.0, 1.5, 0.9))
    concurrency.bench_concurrency(2)
    figures = before_after.concurrency_figures(capsys.readouterr().out)
    assert figures == pytest.approx(
        {
            "1 process": 1.2,  # 3.6 s against the prebuilt agent's best, 3.0 s
            "first batch": 2.0,
            "later batch": 0.5,
            "client CPU a turn, 1 process": 1.5,  # 9 ms against 6 ms
        },
        abs=0.005,
    )
    assert list(figures) == list(before_after.CONCURRENCY_ROWS)


def test_a_section_that_printed_no_figures_reads_as_none(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    before_after, _ = bench
    assert before_after.concurrency_figures("Traceback (most recent call last):\n") == {}
