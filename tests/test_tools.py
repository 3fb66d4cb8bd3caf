"""The calculator and the local search, as plain functions and as tools."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reactgraph.tools import LocalCorpus, calculator, search_tools
from reactgraph.tools.calculator import CalculatorError, format_number

# The package's `calculator` attribute is the tool, which shadows the module of that name.
calculator_module = importlib.import_module("reactgraph.tools.calculator")


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
        ("round(1234.5678, 2)", "1234.57"),
        ("round(1234, -2)", "1200"),
        ("round(2.5)", "2"),
        ("round(7, -1.0)", "10"),
        ("min(3, 1, 2) + max(2, 7.5)", "8.5"),
        ("min(4)", "4"),
        ("log(8, 2)", "3"),
        ("factorial(5.0)", "120"),
        ("(-8)**2.0", "64"),
        ("(-2)**3", "-8"),
        ("2**-1074", "4.94065645841e-324"),
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
        ("(-8)**(1/3)", "a negative number to a fractional power is not a real number"),
        ("abs(1, 2)", "abs takes 1 argument(s), not 2"),
        ("min()", "min takes 1 to 200 argument(s), not 0"),
        ("round(2.5, 0.5)", "round needs a whole number of digits"),
        ("factorial(-1)", "non-negative whole number"),
        ("factorial(2.5)", "non-negative whole number"),
        ("log(2, 1)", "division by zero"),
        ("log(0)", "math error"),
        ("1 << 10", "unsupported"),
        ("sqrt(x=4)", "unsupported"),
        ("1\x002", "not an arithmetic expression"),
        ("(1", "not an arithmetic expression"),
    ],
)
def test_calculator_refuses_with_a_clear_error(expression: str, message: str) -> None:
    out = calculator.invoke(expression)
    assert out.startswith("Error: ") and message in out


# Inputs that hang or crash an unbounded evaluator are in test_calculator_bounds.py, each in a
# child process; everything here is cheap however the calculator is written.


def test_a_host_with_a_lower_str_limit_still_gets_an_error() -> None:
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)  # the least Python allows; str() of 10**700 now raises
    try:
        out = calculator.invoke("10**700")
    finally:
        sys.set_int_max_str_digits(limit)
    assert out == "Error: the result has 701 digits, too many to show (about 1.0000000e+700)"


def test_an_unforeseen_failure_still_reads_as_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(value: float) -> float:
        raise RuntimeError("boom")

    monkeypatch.setitem(calculator_module._FUNCTIONS, "sqrt", (broken, 1, 1))
    assert calculator.invoke("sqrt(4)") == "Error: the calculator failed (RuntimeError: boom)"


@example(10**4000)  # the first number refused
@example(10**4001 - 1)  # the digit estimate is one too many here
@example(-(2**19999))
@given(st.integers(10**4000, 2**20000) | st.integers(-(2**20000), -(10**4000)))
def test_a_number_too_long_to_show_is_described_exactly(value: int) -> None:
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        text = str(abs(value))
    finally:
        sys.set_int_max_str_digits(limit)
    sign = "-" if value < 0 else ""
    about = f"{sign}{text[0]}.{text[1:8]}e+{len(text) - 1}"
    with pytest.raises(CalculatorError) as refused:
        format_number(value)
    assert (
        str(refused.value) == f"the result has {len(text)} digits, too many to show (about {about})"
    )


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


# Per-question corpora: the pages a HotpotQA question brings, searched on their own.

FIRST_QUESTION = {
    "Alder Bridge": ["The Alder Bridge crosses the Wend river. It opened in 1901."],
    "Wend": ["The Wend is a river in the north. Its bridges include the Alder Bridge."],
}
SECOND_QUESTION = {
    "Birch Bridge": ["The Birch Bridge crosses the Wend estuary. It opened in 1955."],
    "Wend estuary": "The Wend estuary is wide and shallow; one bridge spans it.",
}


def test_a_corpus_from_pages_in_memory() -> None:
    corpus = LocalCorpus.from_pages(FIRST_QUESTION, top_k=1)
    assert corpus.search("when did the Alder Bridge open") == (
        "[Alder Bridge] The Alder Bridge crosses the Wend river. It opened in 1901."
    )
    assert set(corpus.pages) == {"Alder Bridge", "Wend"}
    long = LocalCorpus.from_pages({"Long": ["Word. " * 400], "Blank": ["  ", ""]})
    assert list(long.pages) == ["Long"] and len(long.pages["Long"]) > 1
    with pytest.raises(ValueError, match="no pages with text"):
        LocalCorpus.from_pages({"Blank": ["   "]})


def test_search_over_one_questions_pages_never_returns_another_questions_text() -> None:
    first_search, first_lookup = search_tools(pages=FIRST_QUESTION)
    second_search, second_lookup = search_tools(pages=SECOND_QUESTION)
    first_text = " ".join(p for ps in FIRST_QUESTION.values() for p in ps)
    for query in ("Wend", "bridge opened", "Birch Bridge", "estuary", "Alder Bridge 1901"):
        out = second_search.invoke(query)
        assert "Alder" not in out and "1901" not in out and "north" not in out
        assert not any(sentence in out for sentence in first_text.split(". "))
        assert "Birch" not in first_search.invoke(query)
    # Each question's lookup reads its own last page, whatever the other found.
    first_search.invoke("Alder Bridge")
    second_search.invoke("Birch Bridge")
    assert "[Alder Bridge]" in first_lookup.invoke("opened")
    assert "[Birch Bridge]" in second_lookup.invoke("opened")
    assert second_search.invoke("Eiffel Tower").startswith("No pages match")  # nor the bundled


def test_search_tools_take_a_folder_or_pages_not_both(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nAlpha text.")
    assert search_tools(tmp_path)[0].invoke("alpha").startswith("[A]")
    with pytest.raises(ValueError, match="not both"):
        search_tools(tmp_path, pages=FIRST_QUESTION)
