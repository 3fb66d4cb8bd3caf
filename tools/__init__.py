"""The agent's tools. Plain langchain-core tools; nothing here knows about LangGraph."""

from reactgraph.tools.calculator import calculator
from reactgraph.tools.search import DEFAULT_CORPUS, LocalCorpus, search_tools

__all__ = ["DEFAULT_CORPUS", "LocalCorpus", "calculator", "search_tools"]
