"""``reactgraph eval``'s parts that run no graph: scoring, the question sets, the report."""

from reactgraph.app.eval.inputs import (
    BUNDLED_QUESTIONS,
    Item,
    Problem,
    bundled_questions,
    id_text,
    read_hotpotqa,
    read_jsonl,
    read_questions,
)
from reactgraph.app.eval.report import VariantSummary, markdown_table, summarize, write_report
from reactgraph.app.eval.score import Score, exact_match, normalize_answer, score_answer, token_f1

__all__ = [
    "BUNDLED_QUESTIONS",
    "Item",
    "Problem",
    "Score",
    "VariantSummary",
    "bundled_questions",
    "exact_match",
    "id_text",
    "markdown_table",
    "normalize_answer",
    "read_hotpotqa",
    "read_jsonl",
    "read_questions",
    "score_answer",
    "summarize",
    "token_f1",
    "write_report",
]
