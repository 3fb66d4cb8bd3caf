"""Exact match and token F1 as the official HotpotQA evaluation script computes them
(hotpot_evaluate_v1.py, itself the SQuAD v1.1 normalization), so our figures compare with the
ReAct paper's.

The normalization is kept byte for byte, quirks included, because a "better" one would make our
numbers incomparable: only ASCII punctuation is removed ("1,000" and "1000" match, but so do
"3.5" and "35"; a curly apostrophe or an en dash stays), accents are kept ("Mühlhausen" does not
match "Muhlhausen"), and an answer that normalizes to nothing exact-matches another such answer
with F1 0. Gold lists work around the first two; the readers reject golds that normalize to
nothing, so the last cannot arise from our inputs."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
# The official script zeroes F1 for these unless they match exactly: a yes/no question answered
# "no, it is not yes" must not earn partial credit for sharing a token.
_CLOSED_ANSWERS = frozenset(["yes", "no", "noanswer"])


class Score(NamedTuple):
    """One prediction's score against its gold answers: each in [0, 1]."""

    em: float
    f1: float


def normalize_answer(text: str) -> str:
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when prediction and gold normalize to the same text, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """The harmonic mean of token precision and recall over normalized answers."""
    predicted = normalize_answer(prediction)
    expected = normalize_answer(gold)
    if predicted != expected and (predicted in _CLOSED_ANSWERS or expected in _CLOSED_ANSWERS):
        return 0.0
    predicted_tokens = predicted.split()
    expected_tokens = expected.split()
    common = Counter(predicted_tokens) & Counter(expected_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(predicted_tokens)
    recall = same / len(expected_tokens)
    return 2 * precision * recall / (precision + recall)


def golds_of(gold: str | Sequence[str]) -> list[str]:
    """The accepted answers as a list; a bare string is one answer."""
    golds = [gold] if isinstance(gold, str) else list(gold)
    if not golds:
        raise ValueError("no gold answer to score against")
    return golds


def score_answer(prediction: str | None, gold: str | Sequence[str]) -> Score:
    """The best EM and the best F1 over the accepted answers (each maximised on its own, as the
    ReAct code does). ``None`` - the run ended without an answer - scores 0/0."""
    golds = golds_of(gold)
    if prediction is None:
        return Score(0.0, 0.0)
    return Score(
        max(exact_match(prediction, g) for g in golds),
        max(token_f1(prediction, g) for g in golds),
    )
