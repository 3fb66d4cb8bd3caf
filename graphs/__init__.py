"""reactgraph: the ReAct loop (Thought, Action, Observation, until a Final Answer) as LangGraph
graphs. ``build_graph(variant, ...)`` is the entry point; ``VARIANTS`` lists the variants.

The registry and the settings import no LangGraph, so the command line's parser starts at once;
``build_graph`` and ``ReactGraph`` load LangGraph when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from reactgraph.settings import RunContext
from reactgraph.variants import REGISTRY, VARIANTS

if TYPE_CHECKING:
    __version__: str
    from reactgraph.build import build_graph
    from reactgraph.graph import ReactGraph

__all__ = ["REGISTRY", "VARIANTS", "ReactGraph", "RunContext", "__version__", "build_graph"]

_LAZY = {"build_graph": "reactgraph.build", "ReactGraph": "reactgraph.graph"}


def __getattr__(name: str) -> Any:
    """``build_graph`` and ``ReactGraph``, imported on first use; ``__version__``, the
    installed package's (declared once, in pyproject.toml), read on first use."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("reactgraph")
        except PackageNotFoundError:
            found = "0+unknown"
        globals()[name] = found
        return found
    if name not in _LAZY:
        raise AttributeError(f"module 'reactgraph' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
