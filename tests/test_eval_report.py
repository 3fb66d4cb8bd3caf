"""The eval report: the table's figures are what the result lines add up to; the PNG is a PNG."""

from __future__ import annotations

import builtins
import logging
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from reactgraph.app.eval.report import MISSING, STATUSES, markdown_table, summarize, write_report


def result(variant: str, key: str, **fields: Any) -> dict[str, Any]:
    line = {
        "id": key,
        "variant": variant,
        "answer": "48",
        "gold": ["48"],
        "em": 1.0,
        "f1": 1.0,
        "status": "answered",
        "turns": 4,
        "prompt_tokens": 1000,
        "completion_tokens": 50,
        "seconds": 2.0,
        "error": None,
    }
    return {**line, **fields}


def random_results(seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    lines = []
    for variant in ("transcript", "notes", "compaction"):
        for n in range(25):
            error = "TimeoutError: slow" if rng.random() < 0.1 else None
            em = float(rng.random() < 0.4)
            lines.append(
                result(
                    variant,
                    f"b{n:02d}",
                    em=em,
                    f1=max(em, round(rng.random(), 3)),
                    status=None if error else rng.choice(STATUSES),
                    error=error,
                    turns=0 if error else rng.randint(1, 12),
                    prompt_tokens=0 if error else rng.randint(500, 9000),
                    completion_tokens=0 if error else rng.randint(20, 900),
                    seconds=round(rng.uniform(0.5, 30), 3),
                )
            )
    return lines


def table_rows(table: str) -> dict[str, dict[str, str]]:
    header, _rule, *rows = table.splitlines()
    names = [cell.strip() for cell in header.strip("|").split("|")]
    out = {}
    for row in rows:
        cells = dict(zip(names, (c.strip() for c in row.strip("|").split("|")), strict=True))
        out[cells["variant"]] = cells
    return out


def figure(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_the_table_adds_up_the_result_lines(tmp_path: Path) -> None:
    lines = random_results()
    table = write_report(lines, tmp_path, model="gpt-4o-mini", wall_seconds={"notes": 61.25})
    rows = table_rows(table)
    assert list(rows) == ["transcript", "notes", "compaction"]
    for variant, row in rows.items():
        mine = [line for line in lines if line["variant"] == variant]
        ended = [line for line in mine if not line["error"]]
        assert int(row["n"]) == len(mine) == 25
        assert figure(row["EM %"]) == pytest.approx(
            100 * statistics.fmean(x["em"] for x in mine), abs=0.05
        )
        assert figure(row["F1 %"]) == pytest.approx(
            100 * statistics.fmean(x["f1"] for x in mine), abs=0.05
        )
        for status in STATUSES:
            assert int(row[status]) == sum(x["status"] == status for x in ended)
        assert int(row["errors"]) == len(mine) - len(ended)
        assert sum(int(row[s]) for s in STATUSES) + int(row["errors"]) == 25
        turns = [x["turns"] for x in ended]
        assert figure(row["turns mean"]) == pytest.approx(statistics.fmean(turns), abs=0.05)
        assert figure(row["turns median"]) == pytest.approx(statistics.median(turns), abs=0.05)
        for kind in ("prompt", "completion"):
            total = sum(x[f"{kind}_tokens"] for x in mine)
            assert figure(row[f"{kind} tokens"]) == total
            assert figure(row[f"{kind} / q"]) == pytest.approx(total / len(ended), abs=0.5)
        assert figure(row["seconds"]) == pytest.approx(sum(x["seconds"] for x in mine), abs=0.05)
    assert rows["notes"]["wall s"] == "61.2" and rows["transcript"]["wall s"] == MISSING
    summary = (tmp_path / "summary.md").read_text("utf-8")
    assert table in summary and "`gpt-4o-mini`" in summary and "summary.png" in summary
    png = (tmp_path / "summary.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png[12:16] == b"IHDR" and len(png) > 5000
    assert png.rstrip(b"\x00").endswith(b"IEND\xaeB`\x82")


def test_the_last_line_of_a_pair_counts_and_missing_scores_are_computed() -> None:
    lines = [
        result("v", "q1", status=None, error="RuntimeError: boom", em=0.0, f1=0.0),
        result("v", "q1", answer="It is 48.", em=None, f1=None),  # the retry, scored here
        result("v", "q2", answer=None, status="turn_limit", em=None, f1=None, turns=12),
        result("w", "q1", status="interrupted"),
    ]
    v, w = summarize(lines)
    assert (v.variant, v.n, v.errors) == ("v", 2, 0)
    assert v.em == 0.0 and v.f1 == pytest.approx(0.5 / 2)  # "it is 48" against "48": F1 0.5
    assert v.statuses == {"answered": 1, "turn_limit": 1}
    assert (v.mean_turns, v.median_turns) == (8.0, 8.0)
    assert w.statuses == {"interrupted": 1}
    table = markdown_table([v, w])
    assert "| interrupted |" in table.splitlines()[0]


def test_a_variant_whose_runs_all_failed() -> None:
    (only,) = summarize([result("v|x", "q", status=None, error="E", turns=0, prompt_tokens=0)])
    assert only.errors == 1 and only.mean_turns is None and only.prompt_per_question is None
    row = markdown_table([only]).splitlines()[2]
    assert row.startswith("| v\\|x | 1 |") and f"| {MISSING} |" in row


def test_without_matplotlib_the_markdown_is_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with caplog.at_level(logging.WARNING, logger="reactgraph.app.eval.report"):
        table = write_report([result("v", "q")], tmp_path / "out", model="m")
    assert "| v | 1 | 100.0 | 100.0 | 1,050 | \u2013 | 1 |" in table
    assert (tmp_path / "out" / "summary.md").exists()
    assert not (tmp_path / "out" / "summary.png").exists()
    assert "pip install matplotlib" in caplog.text


def test_tokens_and_cost_stand_beside_em_and_f1(tmp_path: Path) -> None:
    lines = [
        result("cheap", "q1", total_tokens=1050, cost=0.5),
        result("cheap", "q2", total_tokens=2000, cost=0.25, status="budget_exhausted", em=0.0),
        result("unpriced", "q1", cost=None),
    ]
    summaries = {s.variant: s for s in summarize(lines)}
    assert summaries["cheap"].total_tokens == 3050 and summaries["cheap"].cost == 0.75
    assert summaries["cheap"].statuses == {"answered": 1, "budget_exhausted": 1}
    assert summaries["unpriced"].total_tokens == 1050 and summaries["unpriced"].cost is None
    table = write_report(lines, tmp_path, model="m")
    header = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    assert header[2:6] == ["EM %", "F1 %", "tokens", "cost"] and "budget_exhausted" in header
    assert "| cheap | 2 | 50.0 | 100.0 | 3,050 | 0.75 | 1 |" in table
    assert "| unpriced | 1 | 100.0 | 100.0 | 1,050 | \u2013 |" in table


def test_the_report_shows_the_cached_share_of_prompt_tokens() -> None:
    lines = [
        result("notes", "a", prompt_tokens=1000, cache_read_tokens=800),
        result("notes", "b", prompt_tokens=1000, cache_read_tokens=400),
        result("transcript", "a", prompt_tokens=1000),  # a line from before they were counted
    ]
    notes, transcript = summarize(lines)
    assert (notes.cache_read_tokens, notes.cached_share) == (1200, 0.6)
    assert (transcript.cache_read_tokens, transcript.cached_share) == (0, 0.0)
    table = markdown_table([notes, transcript]).splitlines()
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    column = header.index("cached %")
    assert table[2].strip("|").split("|")[column].strip() == "60.0"
    assert table[3].strip("|").split("|")[column].strip() == "0.0"
    assert summarize([result("x", "a", prompt_tokens=0)])[0].cached_share is None
