"""``reactgraph eval``'s parts that run no graph: scoring, the question sets, the report.

The names load their modules on first use, so the command line's parser (``eval.parser``)
imports none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from reactgraph.app.eval.report import (
        VariantSummary,
        markdown_table,
        summarize,
        write_report,
    )
    from reactgraph.app.eval.score import (
        Score,
        exact_match,
        normalize_answer,
        score_answer,
        token_f1,
    )

_HOMES = {
    "inputs": (
        "BUNDLED_QUESTIONS",
        "Item",
        "Problem",
        "bundled_questions",
        "id_text",
        "read_hotpotqa",
        "read_jsonl",
        "read_questions",
    ),
    "report": ("VariantSummary", "markdown_table", "summarize", "write_report"),
    "score": ("Score", "exact_match", "normalize_answer", "score_answer", "token_f1"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}
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


def __getattr__(name: str) -> Any:
    """A name of ``inputs``, ``report`` or ``score``, imported on first use."""
    if name not in _HOME:
        raise AttributeError(f"module 'reactgraph.app.eval' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"reactgraph.app.eval.{_HOME[name]}"), name)
    globals()[name] = value
    return value
