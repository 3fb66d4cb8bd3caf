"""The compiled graph ``build_graph`` returns: LangGraph's own, with its input and run context
checked before anything is stored, and writes made durable by default.

``invoke``/``ainvoke`` go through ``stream``/``astream``, so checking there covers every way to
run the graph, including the LangGraph server's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from reactgraph.nodes.storable import unstorable

# Each step's checkpoint is written before the next step starts, so a run killed at any point
# resumes where it stopped ("async", LangGraph's default, can lose the last steps).
DURABILITY = "sync"


def _human_text(messages: Any) -> str | None:
    try:
        converted = convert_to_messages(messages)
    except (TypeError, ValueError, NotImplementedError) as error:
        raise ValueError(f"'messages' is not a list of chat messages: {error}") from None
    humans = [m for m in converted if isinstance(m, BaseMessage) and m.type == "human"]
    if not humans:
        return None
    content = humans[-1].content
    return content if isinstance(content, str) else None


def check_input(input: Any) -> None:
    """A new run's input: a non-empty question, storable by every checkpointer. Resuming
    (None) and LangGraph commands pass through."""
    if input is None or not isinstance(input, Mapping):
        return  # None resumes; a Command or anything else is LangGraph's to judge
    question = input.get("question")
    if question is None and "messages" in input:
        question = _human_text(input["messages"])
        what = "the last human message"
    else:
        what = "'question'"
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"the input needs a non-empty {what} string")
    problem = unstorable(question)
    if problem is not None:
        raise ValueError(f"the question cannot be stored: it holds a {problem}")


def check_thread(config: RunnableConfig | None) -> None:
    """A thread id every checkpointer can store (it keys the thread's rows and files)."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    if isinstance(thread, str) and unstorable(thread):
        raise ValueError(f"the thread id cannot be stored: it holds a {unstorable(thread)}")


class ReactGraph(CompiledStateGraph):
    """A compiled variant of the ReAct loop (see ``reactgraph.build_graph``)."""

    def _prepare(self, input: Any, config: RunnableConfig | None, kwargs: dict[str, Any]) -> None:
        check_input(input)
        check_thread(config)
        context = kwargs.get("context")
        if isinstance(context, Mapping):
            kwargs["context"] = self.context_schema(**context)  # checks every field
        elif context is not None and not isinstance(context, self.context_schema):
            raise TypeError(
                f"context must be a dict, a RunContext or this graph's context schema, got "
                f"{type(context).__name__}"
            )
        if kwargs.get("durability") is None and self.checkpointer not in (None, False, True):
            kwargs["durability"] = DURABILITY

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        self._prepare(input, config, kwargs)
        return super().stream(input, config, **kwargs)

    def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        self._prepare(input, config, kwargs)
        return super().astream(input, config, **kwargs)


def adopt(compiled: CompiledStateGraph) -> ReactGraph:
    """``compiled`` as a ``ReactGraph``, built the way LangGraph's own ``copy`` rebuilds it."""
    return ReactGraph(**{k: v for k, v in vars(compiled).items() if k != "__orig_class__"})
