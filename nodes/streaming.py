"""How a model call goes out: the reply's cap in each provider's own words, the call streamed
(and the stream closed when the call is abandoned), and whether the reply was cut at the cap.

Servers stop generating a reply when its streaming client disconnects (llama.cpp, vLLM,
llama-cpp-python, OpenAI), but go on with a plain request whose client gave up. A call that runs
past its deadline therefore streams, and closing the stream closes the HTTP response.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from reactgraph.nodes import deadlines
from reactgraph.nodes.linebreaks import plain, with_hard_breaks

# How a finished reply says it was cut at the cap: OpenAI-compatible servers' finish_reason,
# Anthropic's stop_reason, Ollama's done_reason.
_CUT = {"finish_reason": ("length", "max_tokens"), "stop_reason": ("max_tokens",)}
_CUT_OLLAMA = {"done_reason": ("length",)}
OPENAI_URL = "api.openai.com"


def _openai_family(model: BaseChatModel) -> bool:
    # By name: importing langchain-openai costs a second that a scripted run does not need.
    return any(cls.__name__ == "BaseChatOpenAI" for cls in type(model).__mro__)


def streams(model: BaseChatModel) -> bool:
    """Whether the model has a streaming call of its own (else ``stream`` is one invoke)."""
    if getattr(model, "disable_streaming", False) is True:
        return False
    return type(model)._stream is not BaseChatModel._stream


def cap_arguments(model: BaseChatModel, cap: int) -> dict[str, Any]:
    """The call's keyword arguments that cap the reply at ``cap`` tokens.

    ChatOpenAI sends ``max_completion_tokens`` (OpenAI's name; ``max_tokens`` is refused by its
    reasoning models). An OpenAI-compatible server elsewhere also gets ``max_tokens``, the name
    older servers (LM Studio, Ollama, llama.cpp's) read. Other chat models take ``max_tokens``.
    """
    if not _openai_family(model):
        return {"max_tokens": cap}
    arguments: dict[str, Any] = {"max_completion_tokens": cap}
    url = getattr(model, "openai_api_base", None)
    if url and OPENAI_URL not in url:
        arguments["extra_body"] = {**(getattr(model, "extra_body", None) or {}), "max_tokens": cap}
    return arguments


def was_cut(message: Any) -> bool:
    """Whether the provider says the reply stopped at the token cap."""
    metadata = getattr(message, "response_metadata", None)
    if not isinstance(metadata, Mapping):
        return False
    return any(metadata.get(key) in values for key, values in (*_CUT.items(), *_CUT_OLLAMA.items()))


def _stream_options(model: BaseChatModel) -> dict[str, Any]:
    # Usage comes in the stream's last chunk only when asked for.
    return {"stream_usage": True} if _openai_family(model) else {}


def _join(message: Any, chunk: Any) -> Any:
    return chunk if message is None else message + chunk


def _whole(message: Any) -> Any:
    """The gathered reply; a stream that never carried a choice (no text, no finish reason:
    only a usage chunk, or nothing) is a malformed response, retried like one."""
    metadata = getattr(message, "response_metadata", None) or {}
    ended = any(key in metadata for key in (*_CUT, *_CUT_OLLAMA))
    if message is None or (not ended and not getattr(message, "content", None)):
        raise ValueError("No generations found in the streamed reply")
    return message


def gather(
    model: BaseChatModel,
    messages: list[BaseMessage],
    config: RunnableConfig | None,
    arguments: dict[str, Any],
    abandoned: threading.Event,
) -> Any:
    """The streamed reply as one message; once ``abandoned`` is set, the stream is closed at
    its next chunk (the caller has given up on it)."""
    stream: Any = model.stream(messages, config, **_stream_options(model), **arguments)
    message = None
    try:
        for chunk in stream:
            if abandoned.is_set():
                break
            message = _join(message, chunk)
    finally:
        stream.close()
    return _whole(message)


async def agather(
    model: BaseChatModel,
    messages: list[BaseMessage],
    config: RunnableConfig | None,
    arguments: dict[str, Any],
) -> Any:
    """The streamed reply as one message; cancelling it closes the stream."""
    message = None
    stream: Any = model.astream(messages, config, **_stream_options(model), **arguments)
    async with contextlib.aclosing(stream) as chunks:
        async for chunk in chunks:
            message = _join(message, chunk)
    return _whole(message)


@dataclass(frozen=True)
class ModelCall:
    """One request to the model, within ``deadline`` seconds when it has one; streamed when the
    model streams, so that giving up closes the response."""

    model: BaseChatModel
    messages: list[BaseMessage]
    config: RunnableConfig | None
    arguments: dict[str, Any]
    deadline: float | None

    def run(self) -> Any:
        """The reply (as the model wrote it; ``reactgraph.nodes.linebreaks``)."""
        config = with_hard_breaks(self.config)
        if not streams(self.model):
            call = lambda: self.model.invoke(self.messages, config, **self.arguments)  # noqa: E731
        else:
            abandoned = threading.Event()
            call = lambda: gather(  # noqa: E731
                self.model, self.messages, config, self.arguments, abandoned
            )
        if self.deadline is None:
            return plain(call())
        try:
            return plain(deadlines.in_thread(call, self.deadline, "model call").result())
        except deadlines.TimedOut:
            if streams(self.model):
                abandoned.set()  # the stream closes at its next chunk
            raise

    async def arun(self) -> Any:
        config = with_hard_breaks(self.config)
        if streams(self.model):
            call = agather(self.model, self.messages, config, self.arguments)
        else:
            call = self.model.ainvoke(self.messages, config, **self.arguments)
        if self.deadline is None:
            return plain(await call)
        try:
            return plain(await asyncio.wait_for(call, self.deadline))
        except TimeoutError:
            raise deadlines.TimedOut(f"model call over its {self.deadline:g} s deadline") from None
