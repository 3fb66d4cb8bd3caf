"""reactgraph: the ReAct loop (Thought, Action, Observation, until a Final Answer) as LangGraph
graphs. ``build_graph(variant, ...)`` is the entry point; ``VARIANTS`` lists the variants.

The names load on first use: the command line's Ctrl-C guard starts before LangChain's imports
(seconds on a busy machine), so a Ctrl-C during them is handled too."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from reactgraph.build import build_graph
    from reactgraph.graph import ReactGraph
    from reactgraph.settings import RunContext
    from reactgraph.variants import REGISTRY, VARIANTS

__all__ = ["REGISTRY", "VARIANTS", "ReactGraph", "RunContext", "build_graph"]

_HOMES = {
    "build_graph": "reactgraph.build",
    "ReactGraph": "reactgraph.graph",
    "RunContext": "reactgraph.settings",
    "REGISTRY": "reactgraph.variants",
    "VARIANTS": "reactgraph.variants",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'reactgraph' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
