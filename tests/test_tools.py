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
