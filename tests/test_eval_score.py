"""Exact match and F1 as the official HotpotQA script computes them, quirks included."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactgraph.app.eval.score import (
    Score,
    exact_match,
    golds_of,
    normalize_answer,
    score_answer,
    token_f1,
)


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Eiffel Tower", "eiffel tower"),
        ("  an   apple, a day!  ", "apple day"),
        ("Theatre", "theatre"),  # articles go only as whole words
        ("A.D. 80", "ad 80"),
        ("1,000", "1000"),
        ("3.5", "35"),  # the official script's quirk: the decimal point is punctuation too
        ("Shreve, Lamb & Harmon", "shreve lamb harmon"),
        ("Émile Nouguier", "émile nouguier"),  # lower-cased, accents kept
        ("Mühlhausen", "mühlhausen"),
        ("1832\u20131923", "1832\u20131923"),  # the en dash is not ASCII punctuation: it stays
        ("Eiffel\u2019s", "eiffel\u2019s"),  # nor is the curly apostrophe
        ("Eiffel's", "eiffels"),
        ("the", ""),
        ("", ""),
        ("\tnew\nyork ", "new york"),
    ],
)
def test_normalization_matches_the_official_script(text: str, normalized: str) -> None:
    assert normalize_answer(text) == normalized


@pytest.mark.parametrize(
    ("prediction", "gold", "em", "f1"),
    [
        ("the Eiffel Tower", "Eiffel Tower", 1.0, 1.0),
        ("Eiffel Tower.", "eiffel tower", 1.0, 1.0),
        ("1,000", "1000", 1.0, 1.0),
        ("1 000", "1000", 0.0, 0.0),
        ("Gustave Eiffel", "Eiffel", 0.0, 2 / 3),  # precision 1/2, recall 1
        ("Eiffel", "Gustave Eiffel", 0.0, 2 / 3),
        ("about 48 years", "48", 0.0, 0.5),
        ("Paris", "London", 0.0, 0.0),
        ("Muhlhausen", "Mühlhausen", 0.0, 0.0),  # accents matter: list both spellings
        ("MÜHLHAUSEN", "Mühlhausen", 1.0, 1.0),
        ("yes", "yes", 1.0, 1.0),
        ("Yes.", "yes", 1.0, 1.0),
        ("no", "yes", 0.0, 0.0),
        ("yes it is", "yes", 0.0, 0.0),  # gold yes/no: no partial credit
        ("yes", "yes it is", 0.0, 0.0),  # predicted yes/no: none either
        ("noanswer", "no answer", 0.0, 0.0),
        ("", "Paris", 0.0, 0.0),
        ("the", "a", 1.0, 0.0),  # both normalize to nothing: EM 1, F1 0, as the script does
        ("new new york", "new york", 0.0, 0.8),  # repeated tokens count once per match
    ],
)
def test_single_gold(prediction: str, gold: str, em: float, f1: float) -> None:
    assert exact_match(prediction, gold) == em
    assert token_f1(prediction, gold) == pytest.approx(f1)
    assert score_answer(prediction, gold) == pytest.approx((em, f1))


def test_the_best_em_and_the_best_f1_over_a_list_of_golds() -> None:
    golds = ["1,298 metres", "4,260 feet", "1298"]
    assert score_answer("1298", golds) == Score(1.0, 1.0)
    assert score_answer("4260 ft", golds) == pytest.approx((0.0, 0.5))
    assert score_answer("the main span is 1,298 metres", golds).f1 == pytest.approx(4 / 7)
    assert score_answer("Gustave Eiffel", ["Eiffel", "Gustave Eiffel Tower"]).f1 == pytest.approx(
        0.8
    )
    assert score_answer("Canberra", ["Sydney", "Melbourne"]) == (0.0, 0.0)


def test_a_missing_prediction_scores_zero() -> None:
    assert score_answer(None, "48") == Score(0.0, 0.0)
    assert score_answer(None, ["yes"]) == Score(0.0, 0.0)


def test_a_gold_string_is_one_answer_and_an_empty_list_is_refused() -> None:
    assert golds_of("New York") == ["New York"]
    assert golds_of(("a", "b")) == ["a", "b"]
    with pytest.raises(ValueError, match="no gold answer"):
        score_answer("x", [])


@given(st.text(), st.lists(st.text(min_size=1), min_size=1, max_size=4))
def test_scores_are_bounded_and_em_implies_full_f1(prediction: str, golds: list[str]) -> None:
    em, f1 = score_answer(prediction, golds)
    assert em in (0.0, 1.0) and 0.0 <= f1 <= 1.0
    if em and normalize_answer(prediction):
        assert f1 == 1.0
    assert score_answer(prediction, [*golds, prediction]).em == 1.0


@given(st.text())
def test_normalization_is_idempotent(text: str) -> None:
    once = normalize_answer(text)
    assert normalize_answer(once) == once
