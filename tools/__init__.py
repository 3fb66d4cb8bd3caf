"""The agent's tools. Plain langchain-core tools; nothing here knows about LangGraph."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from langchain_core.tools import BaseTool

from reactgraph.tools.calculator import calculator
from reactgraph.tools.search import DEFAULT_CORPUS, LocalCorpus, search_tools

__all__ = ["DEFAULT_CORPUS", "LocalCorpus", "calculator", "default_tools", "search_tools"]


def default_tools(
    corpus: str | Path | None = None,
    pages: Mapping[str, str | Sequence[str]] | None = None,
) -> list[BaseTool]:
    """The bundled tools: ``search`` and ``lookup`` over ``corpus`` (a folder; the bundled corpus
    by default) or over ``pages`` (title -> paragraphs), and the calculator."""
    return [*search_tools(corpus, pages=pages), calculator]
