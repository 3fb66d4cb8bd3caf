"""reactgraph: the ReAct loop (Thought, Action, Observation, until a Final Answer) as LangGraph
graphs. ``build_graph(variant, ...)`` is the entry point; ``VARIANTS`` lists the variants."""

from __future__ import annotations

from reactgraph.build import build_graph
from reactgraph.graph import ReactGraph
from reactgraph.settings import RunContext
from reactgraph.variants import REGISTRY, VARIANTS

__all__ = ["REGISTRY", "VARIANTS", "ReactGraph", "RunContext", "build_graph"]
