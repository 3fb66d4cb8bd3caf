"""The compaction variant: the transcript loop, summarizing its history whenever the prompt
nears the context window and going on in a fresh window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph

from reactgraph.assembly import core_builder, twin
from reactgraph.nodes import compaction
from reactgraph.nodes.control import route_after_parse_reply
from reactgraph.nodes.deps import TokenCounterFn, model_name
from reactgraph.nodes.model import aforce_answer, force_answer

DEFAULTS: dict[str, Any] = {"max_turns": 60}


def build(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver | None = None,
    token_counter: TokenCounterFn | None = None,
    summarizer: BaseChatModel | None = None,
    **settings: Any,
) -> CompiledStateGraph:
    """Compile the compaction graph. ``token_counter`` decides when to compact (default:
    tiktoken, cached per message); ``summarizer`` writes the summaries (default: ``model``)."""
    if summarizer is not None and not isinstance(summarizer, BaseChatModel):
        raise TypeError(f"summarizer must be a BaseChatModel, got {type(summarizer).__name__}")
    if token_counter is not None and not callable(token_counter):
        raise TypeError("token_counter must be callable: token_counter(messages) -> int")
    settings = {**DEFAULTS, **settings}
    if settings.get("context_window") is None and isinstance(model, BaseChatModel):
        settings["context_window"] = compaction.context_window_for(model_name(model))
    builder, deps = core_builder(model, tools, settings)
    compactor = compaction.Compactor(
        counter=token_counter or deps.token_counter, summarizer=summarizer or model
    )
    builder.add_node(
        "compact_history",
        twin(
            "compact_history",
            compaction.compact_history,
            compaction.acompact_history,
            deps=deps,
            compactor=compactor,
        ),
    )
    builder.add_node("force_answer", twin("force_answer", force_answer, aforce_answer, deps=deps))
    builder.add_edge("start_run", "compact_history")
    builder.add_conditional_edges("compact_history", compaction.route_after_compact_history)
    builder.add_conditional_edges("parse_reply", route_after_parse_reply)
    builder.add_conditional_edges("run_tool", compaction.route_after_run_tool)
    builder.add_edge("force_answer", END)
    return builder.compile(checkpointer=checkpointer, name="compaction")
