"""The calculator and the local search, as plain functions and as tools."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reactgraph.tools import LocalCorpus, calculator, search_tools
from reactgraph.tools.calculator import CalculatorError, evaluate


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("1937-1889", "48"),
        ("(1+2)*3.5", "10.5"),
        ("2^10", "1024"),
        ("2**-2", "0.25"),
        ("7 // 2", "3"),
        ("7 % 4", "3"),
        ("sqrt(16) + abs(-2)", "6"),
        ("factorial(5)", "120"),
        ("1937 \u2212 1889 =", "48"),
        ("3 \u00d7 4 \u00f7 2", "6"),
        ("pi", "3.14159265359"),
    ],
)
def test_calculator_computes(expression: str, result: str) -> None:
    assert calculator.invoke(expression) == result


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9**9**9", "too large"),
        ("factorial(100000)", "limited to n <= 1000"),
        ("10**5000 * 10**5000", "too large"),
        ("1e308 * 10", "too large"),
        ("10/0", "division by zero"),
        ("sqrt(-1)", "math error"),
        ("__import__('os').system('echo hi')", "unsupported"),
        ("().__class__", "unsupported"),
        ("open('x')", "unsupported"),
        ("[1, 2]", "unsupported"),
        ("'a' * 10", "unsupported"),
        ("", "empty expression"),
        ("1 +", "not an arithmetic expression"),
        ("1+" * 300 + "1", "longer than"),
    ],
)
def test_calculator_refuses_with_a_clear_error(expression: str, message: str) -> None:
    out = calculator.invoke(expression)
    assert out.startswith("Error: ") and message in out


def test_calculator_bounds_its_work() -> None:
    started = time.perf_counter()
    for expression in ("9**9**9", "2**2**2**2**2", "factorial(factorial(10))", "99999**99999"):
        with pytest.raises(CalculatorError):
            evaluate(expression)
    assert time.perf_counter() - started < 5


def test_search_returns_titled_passages_with_the_seed_facts() -> None:
    search, lookup = search_tools()
    eiffel = search.invoke("Eiffel Tower")
    assert eiffel.startswith("[Eiffel Tower]") and "1889" in eiffel
    assert "1937" in search.invoke("Golden Gate Bridge")
    assert eiffel.count("\n") <= 2  # top three passages
    found = lookup.invoke("opened")
    assert "[Golden Gate Bridge]" in found and "1937" in found and found.startswith("(1/")


def test_search_and_lookup_edge_cases(tmp_path: Path) -> None:
    search, lookup = search_tools()
    assert lookup.invoke("x").startswith("Error: no page found yet")
    assert "No pages match" in search.invoke("zzzz qqqq")
    assert search.invoke("  ").startswith("Error: empty query")
    search.invoke("Colosseum")
    assert "No sentence" in lookup.invoke("submarine")


def test_search_reads_a_users_folder(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "my_topic.txt").write_text("Widgets were invented in 1901.\n\nMore.")
    (tmp_path / "other.md").write_text("# Gadgets\n\nGadgets came later, in 1950.")
    corpus = LocalCorpus(tmp_path)
    assert corpus.search("widgets invented").startswith("[My Topic] Widgets")
    assert corpus.search("gadgets").startswith("[Gadgets]")


def test_search_rejects_a_missing_or_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not found"):
        LocalCorpus(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"no \.md or \.txt"):
        LocalCorpus(tmp_path)
