"""LangGraph's prebuilt ReAct agent as an eval contender: the anchor, on the same model, server,
tools, questions and database as the variants.

It runs as its users run it: ``create_react_agent(model, tools)`` with no prompt of its own, the
question as the human message, the tools bound natively (with ``tool_choice="auto"`` for the
OpenAI family, as reactgraph binds them: llama-cpp-python's chatml-function-calling calls no tool
without it). Its turn cap is the run's ``max_turns``: ``recursion_limit = 2 * max_turns + 2``
lets it run ``max_turns`` tool calls, and its next call, if it still wants a tool, ends with its
own "Sorry, need more steps" (status ``turn_limit``; no forced answer). ``Contender`` wraps it so
the eval's runner reads it as it reads a variant: asked ``{"question": ...}``, read back as the
fields a result line needs (answer, status, turns with their tokens).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool

from reactgraph.nodes.calling.binding import binding_options
from reactgraph.nodes.calling.tokens import TokenCounter, message_text, usage_of

NEED_MORE_STEPS = "Sorry, need more steps to process this request."
"""What the prebuilt agent answers when its steps run out."""


def recursion_limit(max_turns: int) -> int:
    """The prebuilt agent's recursion limit for ``max_turns`` tool calls (two steps each)."""
    return 2 * max_turns + 2


def outcome(values: Mapping[str, Any], counter: TokenCounter) -> dict[str, Any]:
    """The agent's final state as a result line reads it: the last AI message's text is the
    answer (none when its steps ran out), one turn per model call with its tokens (the
    provider's usage, else counted)."""
    messages: list[BaseMessage] = list(values.get("messages") or [])
    turns = []
    for index, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        usage = usage_of(message)
        if usage is None:
            completion = counter([message]) - counter([])
            usage = (counter(messages[:index]), completion)
        turns.append({"prompt_tokens": usage[0], "completion_tokens": usage[1]})
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if last is None or last.tool_calls:
        return {"answer": None, "status": None, "turns": turns}
    text = message_text(last).strip()
    if text == NEED_MORE_STEPS:
        return {"answer": None, "status": "turn_limit", "turns": turns}
    return {"answer": text or None, "status": "answered", "turns": turns}


class Contender:
    """The prebuilt agent, asked and read as the eval's runner asks and reads a variant."""

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[BaseTool],
        checkpointer: Any,
        max_turns: int,
    ) -> None:
        bound = model.bind_tools(list(tools), **binding_options(model))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # create_react_agent is deprecated: it is the anchor
            from langgraph.prebuilt import create_react_agent

            self.agent = create_react_agent(bound, list(tools), checkpointer=checkpointer)
        self.checkpointer = checkpointer
        self.limit = recursion_limit(max_turns)
        self._counter = TokenCounter(getattr(model, "model_name", None))

    async def ainvoke(self, payload: Mapping[str, Any] | None, config: Any) -> dict[str, Any]:
        """A run (``{"question": ...}``), or the resumed run (None)."""
        given = None if payload is None else {"messages": [HumanMessage(payload["question"])]}
        values = await self.agent.ainvoke(given, {**config, "recursion_limit": self.limit})
        return outcome(values, self._counter)

    async def aget_state(self, config: Any) -> Any:
        """The thread's snapshot, its values read as a result line reads them."""
        snapshot = await self.agent.aget_state(config)
        values = outcome(snapshot.values, self._counter) if snapshot.values else {}
        return snapshot._replace(values=values)
