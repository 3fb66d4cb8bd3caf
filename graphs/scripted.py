"""A scripted chat model: replays fixed replies and records every prompt and ``stop`` it gets.

It drives the offline demo and the benchmark, and the tests build their fakes on it. It is a
real ``BaseChatModel``, so the graph cannot tell it from a provider's client.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

Reply = str | AIMessage | Callable[[list[BaseMessage]], str | AIMessage]
"""A scripted reply: text, a message (one with ``tool_calls``, for the tool_calls format), or a
function of the prompt returning either."""

DEMO_QUESTION = (
    "How many years after the Eiffel Tower was completed did the Golden Gate Bridge open?"
)
DEMO_REPLIES: tuple[str, ...] = (
    "Thought: I need the year the Eiffel Tower was completed.\nAction: search[Eiffel Tower]",
    "Thought: The Eiffel Tower was completed in 1889. Now I need the year the Golden Gate "
    "Bridge opened.\nAction: search[Golden Gate Bridge]",
    "Thought: The Golden Gate Bridge opened in 1937. The difference is 1937 - 1889.\n"
    "Action: calculator[1937-1889]",
    "Thought: I now have enough information.\nFinal Answer: 48",
)


def tool_call_reply(
    name: str, args: dict[str, Any], thought: str = "", call_id: str = ""
) -> AIMessage:
    """A reply that calls one tool natively (the tool_calls format), with its Thought as text."""
    call = {"name": name, "args": args, "id": call_id or f"call-{name}", "type": "tool_call"}
    return AIMessage(thought, tool_calls=[call])


# The demo as a model that calls its tools natively (``action_format="tool_calls"``).
DEMO_TOOL_CALLS: tuple[AIMessage, ...] = (
    tool_call_reply(
        "search",
        {"query": "Eiffel Tower"},
        "I need the year the Eiffel Tower was completed.",
        "call-1",
    ),
    tool_call_reply(
        "search",
        {"query": "Golden Gate Bridge"},
        "The Eiffel Tower was completed "
        "in 1889. Now I need the year the Golden Gate Bridge opened.",
        "call-2",
    ),
    tool_call_reply(
        "calculator",
        {"expression": "1937-1889"},
        "The Golden Gate Bridge opened in 1937. The difference is 1937 - 1889.",
        "call-3",
    ),
    AIMessage("Thought: I now have enough information.\nFinal Answer: 48"),
)


class ScriptedChatModel(BaseChatModel):
    """Returns ``replies`` in order (a callable reply gets the prompt); raises when they run out.

    ``honour_stop`` cuts each reply at the first stop sequence, as most providers do; a reply
    longer than the call's ``max_tokens`` (or ``max_completion_tokens``) at four characters a
    token is cut there with ``finish_reason`` "length", as providers do; ``report_usage``
    attaches usage metadata (about four characters a token); ``latency_s`` makes each call take
    that long (``asyncio.sleep`` under ``ainvoke``). A reply may be an ``AIMessage`` with
    ``tool_calls``; ``bind_tools`` binds the tools as ``ChatOpenAI`` does (each call's
    ``options`` then hold them).
    """

    # Neither the script nor the calls are in its repr, which LangChain writes (once a model)
    # for its callbacks: a long script made that one write cost more than a run's turns.
    replies: Sequence[Any] = Field(default_factory=list, repr=False)  # each a Reply
    honour_stop: bool = False
    report_usage: bool = False
    fixed_usage: tuple[int, int] | tuple[int, int, int] | None = None
    """Usage metadata of the same (prompt, completion) tokens on every reply, and with a third
    number that many of the prompt's read from a prefix cache (``input_token_details``'
    ``cache_read``); a reply that is an ``AIMessage`` with its own ``usage_metadata`` keeps
    that."""
    latency_s: float = 0.0
    model_name: str = "scripted"
    calls: list[dict[str, Any]] = Field(default_factory=list, repr=False)
    takes_extra_body: ClassVar[bool] = True
    """Its calls take request-body fields (``extra_body``: a grammar), kept in ``calls``."""
    _index: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """The model with the tools bound as OpenAI function schemas (and ``tool_choice``)."""
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _next_reply(
        self, messages: list[BaseMessage], stop: list[str] | None, options: dict[str, Any]
    ) -> str | AIMessage:
        with self._lock:
            index = self._index
            self._index += 1
            self.calls.append({"messages": list(messages), "stop": stop, "options": options})
        if index >= len(self.replies):
            raise RuntimeError(f"the scripted model has only {len(self.replies)} replies")
        reply = self.replies[index]
        text = reply(list(messages)) if callable(reply) else reply
        if self.honour_stop and stop and isinstance(text, str):
            for sequence in stop:
                text = text.split(sequence, 1)[0]
        return text

    def _result(
        self, messages: list[BaseMessage], reply: str | AIMessage, options: dict[str, Any]
    ) -> ChatResult:
        cap = options.get("max_tokens") or options.get("max_completion_tokens")
        calls = reply.tool_calls if isinstance(reply, AIMessage) else []
        text = reply if isinstance(reply, str) else str(reply.content)
        finish = "tool_calls" if calls else "stop"
        if isinstance(cap, int) and len(text) > cap * 4:
            text, finish = text[: cap * 4], "length"
        message = AIMessage(text, tool_calls=calls, response_metadata={"finish_reason": finish})
        if isinstance(reply, AIMessage) and reply.invalid_tool_calls:
            message.invalid_tool_calls = list(reply.invalid_tool_calls)
        if isinstance(reply, AIMessage) and reply.usage_metadata:
            message.usage_metadata = reply.usage_metadata  # the reply's own, as scripted
        elif self.fixed_usage is not None:
            prompt, completion, *cached = self.fixed_usage
            message.usage_metadata = {
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
            }
            if cached:
                message.usage_metadata["input_token_details"] = {"cache_read": cached[0]}
        elif self.report_usage:
            prompt = sum(len(str(m.content)) for m in messages) // 4 + 1
            completion = len(text) // 4 + 1
            message.usage_metadata = {
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        return self._result(messages, self._next_reply(messages, stop, kwargs), kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return self._result(messages, self._next_reply(messages, stop, kwargs), kwargs)
