"""The notes variant: a long loop whose plan and findings live in notes outside the process;
the model sees the notes and only the most recent turns."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from reactgraph.assembly import core_builder
from reactgraph.nodes import notes, prompts

DEFAULTS: dict[str, Any] = {"max_turns": 40, "window_turns": 8}


def build(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checkpointer: BaseCheckpointSaver | None = None,
    store: BaseStore | None = None,
    **settings: Any,
) -> CompiledStateGraph:
    """Compile the notes graph; with a ``store`` the notes are rows there instead of files."""
    if store is not None and not isinstance(store, BaseStore):
        raise TypeError(f"store must be a LangGraph BaseStore, got {type(store).__name__}")
    settings = {**DEFAULTS, **settings}
    action = (notes.UPDATE_NOTES, prompts.UPDATE_NOTES_DESCRIPTION)
    builder, _ = core_builder(model, tools, settings, extra_actions=[action])
    backend = notes.StoreNotes(store) if store is not None else None
    builder.add_node("load_notes", partial(notes.load_notes, backend=backend))
    builder.add_node("update_notes", partial(notes.update_notes, backend=backend))
    builder.add_node("stop_run", notes.stop_run)
    builder.add_edge("start_run", "load_notes")
    builder.add_edge("load_notes", "call_model")
    builder.add_conditional_edges("parse_reply", notes.route_after_parse_reply)
    builder.add_conditional_edges("run_tool", notes.route_after_turn)
    builder.add_conditional_edges("update_notes", notes.route_after_turn)
    builder.add_edge("stop_run", END)
    return builder.compile(checkpointer=checkpointer, store=store, name="notes")
