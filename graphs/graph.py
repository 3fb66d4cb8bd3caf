"""The compiled graph ``build_graph`` returns: LangGraph's own, with its input and run context
checked before anything is stored, and writes made durable by default.

``invoke``/``ainvoke`` go through ``stream``/``astream``, so checking there covers every way to
run the graph, including the LangGraph server's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from reactgraph.nodes.decisions import check_resume
from reactgraph.nodes.questions import as_messages, content_parts, last_human, unread_note
from reactgraph.nodes.storable import unstorable

# Each step's checkpoint is written before the next step starts, so a run killed at any point
# resumes where it stopped ("async", LangGraph's default, can lose the last steps).
DURABILITY = "sync"


def _human_question(messages: Any) -> str:
    """The text of the last human message of a chat client's input (ValueError when it has
    none)."""
    human = last_human(as_messages(messages))
    if human is None:
        raise ValueError("the input needs a question: 'messages' holds no human message")
    text, others = content_parts(human.content)
    if not text.strip():
        if others:
            raise ValueError(
                f"the question has no text to answer: the last human message holds only "
                f"{unread_note(others)}, and this loop reads only text"
            )
        raise ValueError("the question is empty: the last human message holds no text")
    return text


def check_input(input: Any) -> None:
    """A new run's input: a non-empty question, storable by every checkpointer; a resume
    value (a person's decision, from any client) bounded and storable, before it is stored.
    Resuming (None) and other LangGraph commands pass through."""
    if isinstance(input, Command):
        if input.resume is not None:
            check_resume(input.resume)  # its shape is read by the node that asked
        return
    if input is None or not isinstance(input, Mapping):
        return  # None resumes; anything else is LangGraph's to judge
    question = input.get("question")
    if question is None and "messages" in input:
        question = _human_question(input["messages"])
    elif not isinstance(question, str) or not question.strip():
        raise ValueError("the input needs a question: a non-empty 'question' string")
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
        schema: Any = self.context_schema  # the variant's own (``settings.context_schema``)
        if isinstance(context, Mapping):
            kwargs["context"] = schema(**context)  # checks every field
        elif context is not None and not isinstance(context, schema):
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
