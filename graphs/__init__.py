"""reactgraph: the ReAct loop (Thought, Action, Observation, until a Final Answer) as LangGraph
graphs. ``build_graph(variant, ...)`` is the entry point; ``VARIANTS`` lists the variants.

The registry and the settings import no LangGraph, so the command line's parser starts at once;
``build_graph`` and ``ReactGraph`` load LangGraph when first used.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str
    from reactgraph.build import build_graph
    from reactgraph.context import RunContext
    from reactgraph.graph import ReactGraph
    from reactgraph.nodes.loop.middleware.rungs import Rung
    from reactgraph.variants import REGISTRY, VARIANTS

__all__ = [
    "REGISTRY",
    "VARIANTS",
    "ReactGraph",
    "RunContext",
    "Rung",
    "__version__",
    "build_graph",
]

# Each imported on first use, so ``reactgraph --version`` (``reactgraph.app.entry``) loads none.
_LAZY = {
    "build_graph": "reactgraph.build",
    "ReactGraph": "reactgraph.graph",
    "RunContext": "reactgraph.context",
    "REGISTRY": "reactgraph.variants",
    "VARIANTS": "reactgraph.variants",
    "Rung": "reactgraph.nodes.loop.middleware.rungs",
}


def installed_version() -> str:
    """The installed distribution's version (declared once, in pyproject.toml): the
    ``Version:`` line of the first ``reactgraph-*.dist-info/METADATA`` on ``sys.path``, as
    ``importlib.metadata.version`` finds it, without the e-mail parser it loads (a third of
    ``--version``'s time); ``importlib.metadata`` for any other layout."""
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for name in names:
            if not (name.startswith("reactgraph-") and name.endswith(".dist-info")):
                continue
            try:
                with open(os.path.join(folder or ".", name, "METADATA"), encoding="utf-8") as f:
                    for line in f:
                        if line.startswith("Version:"):
                            return line.split(":", 1)[1].strip()
                        if not line.strip():
                            break  # the headers end at the first blank line
            except OSError:
                pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("reactgraph")
    except PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> Any:
    """``build_graph``, ``ReactGraph``, ``RunContext``, ``Rung`` and the registry, imported on
    first use; ``__version__``, the installed package's (``installed_version``), read on first
    use."""
    if name == "__version__":
        found = installed_version()
        globals()[name] = found
        return found
    if name not in _LAZY:
        raise AttributeError(f"module 'reactgraph' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
