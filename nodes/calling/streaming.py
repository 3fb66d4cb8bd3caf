"""How a model call goes out: the reply's cap in each provider's own words, the call streamed
(and the stream closed when the call is abandoned) or plain (``streamchoice`` says which), the
reply checked for being whole, and whether it was cut at the cap. A whole streamed reply without
token counts tells ``streamchoice`` that its server sends none on streams.

Servers stop generating a reply when its streaming client disconnects (llama.cpp, vLLM,
llama-cpp-python, OpenAI), but llama-cpp-python's goes on with a plain request whose client
gave up. A streamed call past its deadline is therefore closed, which closes the HTTP response.

A streamed reply that ends before its finish reason is a ``StreamCut`` (``replies``: what
cannot be read as a reply), never acted on; a reply that did finish with no text is the model's
own: the loop answers it with a corrective Observation.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import operator
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.runnables import RunnableConfig

from reactgraph.nodes.calling import replies, streamchoice
from reactgraph.nodes.calling.linebreaks import plain, with_hard_breaks
from reactgraph.nodes.calling.replies import MalformedReply, StreamCut
from reactgraph.nodes.calling.streamchoice import OPENAI_URL, openai_family
from reactgraph.nodes.calling.tokens import UNREADABLE_USAGE, read_usage
from reactgraph.nodes.reading.toolcalls import reread_calls
from reactgraph.nodes.running import deadlines

# How a finished reply says it was cut at the cap: OpenAI-compatible servers' finish_reason,
# Anthropic's stop_reason, Ollama's done_reason.
_CUT = {"finish_reason": ("length", "max_tokens"), "stop_reason": ("max_tokens",)}
_CUT_OLLAMA = {"done_reason": ("length",)}


def cap_arguments(model: BaseChatModel, cap: int) -> dict[str, Any]:
    """The call's keyword arguments that cap the reply at ``cap`` tokens.

    ChatOpenAI sends ``max_completion_tokens`` (OpenAI's name; ``max_tokens`` is refused by its
    reasoning models). An OpenAI-compatible server elsewhere also gets ``max_tokens``, the name
    older servers (LM Studio, Ollama, llama.cpp's) read. Other chat models take ``max_tokens``.
    """
    if not openai_family(model):
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
    return {"stream_usage": True} if openai_family(model) else {}


def _joined(chunks: list[Any]) -> Any:
    """The chunks as one message, merged once: merging them one by one re-reads the tool
    calls' arguments at every chunk, quadratic in their length."""
    if not chunks:
        return None
    if all(isinstance(chunk, AIMessageChunk) for chunk in chunks):
        joined = add_ai_message_chunks(chunks[0], *chunks[1:]) if len(chunks) > 1 else chunks[0]
    else:
        joined = functools.reduce(operator.add, chunks)
    return reread_calls(joined)


class RawCalls(BaseCallbackHandler):
    """The tool-call chunks of a plain call that LangChain streams itself (to a messages
    stream, or a model built with ``streaming=True``): the reply it returns has its calls'
    arguments repaired by partial-JSON reading, and no longer their text."""

    run_inline = True

    def __init__(self) -> None:
        self.chunks: list[AIMessageChunk] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Nothing: defined so that LangChain does not fall back to ``on_llm_start``, which
        writes the whole prompt out as one string at every call."""

    def on_llm_new_token(self, token: Any, *, chunk: Any = None, **kwargs: Any) -> None:
        message = getattr(chunk, "message", None)
        if isinstance(message, AIMessageChunk) and message.tool_call_chunks:
            self.chunks.append(
                AIMessageChunk(content="", tool_call_chunks=message.tool_call_chunks)
            )

    def config(self, config: RunnableConfig | None) -> RunnableConfig:
        """``config`` with this handler among its callbacks."""
        callbacks = (config or {}).get("callbacks")
        if isinstance(callbacks, BaseCallbackManager):
            manager = callbacks.copy()
            manager.add_handler(self, inherit=False)
            return {**(config or {}), "callbacks": manager}
        return {**(config or {}), "callbacks": [*(callbacks or []), self]}

    def read(self, reply: Any) -> Any:
        """The plain call's reply, its calls read from their whole text when it streamed."""
        if not self.chunks:
            return reply
        joined = add_ai_message_chunks(self.chunks[0], *self.chunks[1:])
        return reread_calls(reply, joined.tool_call_chunks)


def _heard(model: BaseChatModel, config: RunnableConfig | None) -> bool:
    """Whether anything besides the loop listens to the call: a callback handler in its config
    (a messages stream, a tracer) or on the model, or a model that streams a plain call itself.
    A call nobody hears needs neither ``HardBreaks`` nor ``RawCalls``, whose copies of the
    callback manager are a tenth of a turn's own cost (docs/performance.md)."""
    callbacks = (config or {}).get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        callbacks = callbacks.handlers or callbacks.inheritable_handlers
    return bool(callbacks or model.callbacks or getattr(model, "streaming", None) is True)


def _said(message: Any) -> bool:
    """Whether a reply holds text or a tool call."""
    return bool(
        getattr(message, "content", None)
        or getattr(message, "tool_calls", None)
        or getattr(message, "tool_call_chunks", None)
    )


def _ended(message: Any) -> bool:
    metadata = getattr(message, "response_metadata", None) or {}
    return any(key in metadata for key in (*_CUT, *_CUT_OLLAMA))


def _whole(model: BaseChatModel, message: Any) -> Any:
    """The gathered reply. An OpenAI-compatible stream ends a whole reply with its finish
    reason: without one it was cut short. Other models' streams without any text, tool call or
    ending (only a usage chunk, or nothing) are malformed."""
    if message is not None and _ended(message):
        return message
    if openai_family(model):
        raise StreamCut("the streamed reply ended before its finish reason (cut short)")
    if message is None or not _said(message):
        raise MalformedReply("No generations found in the streamed reply")
    return message


def _usage_noted(model: BaseChatModel, message: Any, unread: str | None = None) -> Any:
    """The whole streamed reply, its server noted as sending no usage on streams if it sent
    none (the call is counted with tiktoken; the next ones go plain). ``unread``: why the usage
    it sent could not be read or was refused, kept on the reply (``tokens.UNREADABLE_USAGE``):
    the call is counted with tiktoken, and its server does send usage."""
    if unread is not None:
        metadata = {**(getattr(message, "response_metadata", None) or {}), UNREADABLE_USAGE: unread}
        return message.model_copy(update={"response_metadata": metadata})
    if read_usage(message) is None:
        streamchoice.note_no_usage(model)
    return message


# What reading a stream's next event may raise in the client: a message type refusing a value
# (pydantic's ValidationError is a ValueError), langchain-openai's sums over counts that are no
# numbers, a usage that is no object.
_READING = (ValueError, TypeError, AttributeError, KeyError, IndexError)


def _unread_usage(chunks: list[Any], error: Exception) -> str | None:
    """Why a stream's usage could not be read, when ``error`` (raised reading its next event)
    came after the reply's finish reason: what follows it is the usage event (OpenAI's comes
    last, alone), and the reply is whole. None when the reply had not ended: another failure."""
    if not any(_ended(chunk) for chunk in chunks):
        return None
    lines = str(error).strip().splitlines()
    said = f"{type(error).__name__}: {lines[0][:120] if lines else ''}".rstrip(": ")
    return f"its usage event could not be read ({said})"


def _counted(chunks: list[Any]) -> tuple[list[Any], str | None]:
    """The chunks with any usage that cannot be right taken out of them (merged, NaN or a
    string would fail the reply; a negative count would be taken), and why it was refused
    (``tokens.read_usage``)."""
    refused: str | None = None
    kept = list(chunks)
    for index, chunk in enumerate(chunks):
        if getattr(chunk, "usage_metadata", None):
            found = read_usage(chunk)
            if isinstance(found, str):
                refused = found
                kept[index] = chunk.model_copy(update={"usage_metadata": None})
    return kept, refused


def _checked(model: BaseChatModel, message: Any, forced: bool) -> Any:
    """A plain call's reply. One that LangChain streamed itself (to a messages stream) and that
    holds no text and no finish reason was cut short; a forced plain call is taken as it came."""
    if forced or not openai_family(model) or _ended(message) or _said(message):
        return message
    raise StreamCut("the reply ended with no text and no finish reason (cut short)")


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
    chunks: list[Any] = []
    unread: str | None = None
    try:
        for chunk in stream:
            if abandoned.is_set():
                break
            chunks.append(chunk)
    except _READING as error:
        unread = _unread_usage(chunks, error)
        if unread is None:
            raise
    finally:
        stream.close()
    chunks, refused = _counted(chunks)
    if abandoned.is_set():
        return _joined(chunks)
    return _usage_noted(model, _whole(model, _joined(chunks)), unread or refused)


async def agather(
    model: BaseChatModel,
    messages: list[BaseMessage],
    config: RunnableConfig | None,
    arguments: dict[str, Any],
) -> Any:
    """The streamed reply as one message; cancelling it closes the stream."""
    chunks: list[Any] = []
    unread: str | None = None
    stream: Any = model.astream(messages, config, **_stream_options(model), **arguments)
    async with contextlib.aclosing(stream) as streamed:
        try:
            async for chunk in streamed:
                chunks.append(chunk)
        except _READING as error:
            unread = _unread_usage(chunks, error)
            if unread is None:
                raise
    chunks, refused = _counted(chunks)
    return _usage_noted(model, _whole(model, _joined(chunks)), unread or refused)


# The ``abandoned`` of a call without a deadline: nothing gives up on it (never set).
_NEVER = threading.Event()


@dataclass(frozen=True)
class ModelCall:
    """One request to the model, within ``deadline`` seconds when it has one; streamed when
    ``streamchoice`` says so (giving up then closes the response), else plain; ``plain`` makes
    it plain whatever the model's setting (the call asked again after a ``StreamCut``)."""

    model: BaseChatModel
    messages: list[BaseMessage]
    config: RunnableConfig | None
    arguments: dict[str, Any]
    deadline: float | None
    plain: bool = False

    def _plain_arguments(self) -> dict[str, Any]:
        # `stream=False` keeps LangChain from streaming it itself (to a messages stream).
        forced = self.plain and openai_family(self.model)
        return {**self.arguments, "stream": False} if forced else self.arguments

    def _config(self) -> tuple[RunnableConfig | None, RawCalls | None]:
        """The call's config and the ``RawCalls`` a plain call reads its reply with, when
        anything listens to the call (``_heard``); else the config as it is, and none."""
        if not _heard(self.model, self.config):
            return self.config, None
        return with_hard_breaks(self.config), RawCalls()

    def run(self) -> Any:
        """The reply (as the model wrote it; ``reactgraph.nodes.calling.linebreaks``)."""
        config, raw = self._config()
        abandoned = threading.Event() if self.deadline is not None else _NEVER

        def call() -> Any:
            streamed = not self.plain and streamchoice.mode(self.model) == "stream"
            with replies.reading(self.model):
                if streamed:
                    return gather(self.model, self.messages, config, self.arguments, abandoned)
                sent = config if raw is None else raw.config(config)
                reply = self.model.invoke(self.messages, sent, **self._plain_arguments())
                return _checked(self.model, reply if raw is None else raw.read(reply), self.plain)

        if self.deadline is None:
            return plain(call())
        try:
            return plain(deadlines.in_thread(call, self.deadline, "model call").result())
        except deadlines.TimedOut:
            abandoned.set()  # a stream closes at its next chunk
            raise

    async def _call(self) -> Any:
        config, raw = self._config()
        streamed = not self.plain and streamchoice.mode(self.model) == "stream"
        with replies.reading(self.model):
            if streamed:
                return await agather(self.model, self.messages, config, self.arguments)
            sent = config if raw is None else raw.config(config)
            reply = await self.model.ainvoke(self.messages, sent, **self._plain_arguments())
            return _checked(self.model, reply if raw is None else raw.read(reply), self.plain)

    async def arun(self) -> Any:
        call = self._call()
        if self.deadline is None:
            return plain(await call)
        try:
            return plain(await asyncio.wait_for(call, self.deadline))
        except TimeoutError:
            raise deadlines.TimedOut(f"model call over its {self.deadline:g} s deadline") from None
