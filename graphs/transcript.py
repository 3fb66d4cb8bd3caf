"""The transcript variant: the plain loop over the whole transcript, with a forced last answer
at the turn cap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph

from reactgraph.assembly import core_builder, twin
from reactgraph.nodes.control import route_after_parse_reply, route_after_run_tool
from reactgraph.nodes.model import aforce_answer, force_answer

DEFAULTS: dict[str, Any] = {"max_turns": 10}


def build(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver | None = None,
    **settings: Any,
) -> CompiledStateGraph:
    """Compile the transcript graph; ``settings`` are the keyword arguments of ``build_graph``."""
    builder, deps = core_builder(model, tools, {**DEFAULTS, **settings})
    builder.add_node("force_answer", twin("force_answer", force_answer, aforce_answer, deps=deps))
    builder.add_edge("start_run", "call_model")
    builder.add_conditional_edges("parse_reply", route_after_parse_reply)
    builder.add_conditional_edges("run_tool", route_after_run_tool)
    builder.add_edge("force_answer", END)
    return builder.compile(checkpointer=checkpointer, name="transcript")
