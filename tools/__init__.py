"""The agent's tools. Plain langchain-core tools; nothing here knows about LangGraph."""

from tools.calculator import calculator
from tools.search import DEFAULT_CORPUS, LocalCorpus, search_tools

__all__ = ["DEFAULT_CORPUS", "LocalCorpus", "calculator", "search_tools"]
