"""What streams is what stays: a reply's tokens, as chat clients receive them, carry the line
breaks of the message the chat view stores.

Chat clients render messages as Markdown, which joins lines that one newline separates, so the
chat view stores each of the model's lines with a hard break
(``reactgraph.nodes.chatview.chat.shown``).
The tokens LangGraph streams (``stream_mode="messages"``) are the model's own, which would show
a turn on one line until the stored message replaces them. ``HardBreaks`` is a callback that
runs before LangGraph's: it puts the same hard breaks into each streamed chunk, and into the
reply of a model that does not stream, before the messages stream reads them. ``plain`` takes
them out of the reply again, so the loop parses and records what the model wrote. A call
nothing listens to (no handler in its config or on its model, a model that does not stream a
plain call itself: a plain ``invoke``) goes without it (``streaming.ModelCall``).

It relies on callbacks running in their list's order (langchain-core runs inline handlers in
order, sync and async); ``tests/test_linebreaks.py`` fails if that stops being true.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

_SOFT = re.compile(r"(?<!  )\n")
BREAK = "  \n"


def hard(text: str) -> str:
    """Every newline a Markdown hard break (one already hard is left as it is)."""
    return _SOFT.sub(BREAK, text)


def _harden(message: Any) -> None:
    if (
        isinstance(message, BaseMessage)
        and isinstance(message.content, str)
        and "\n" in message.content
    ):
        message.content = hard(message.content)


class HardBreaks(BaseCallbackHandler):
    """Hard line breaks in a reply before any later callback (LangGraph's messages stream)
    sees it."""

    run_inline = True  # in order, before the handlers after it, on the async path too

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        """Nothing. Defined so langchain-core does not fall back to ``on_llm_start`` for this
        handler, which renders the whole prompt as one string on every call (linear in the
        transcript)."""

    def on_llm_new_token(self, token: Any, *, chunk: Any = None, **kwargs: Any) -> None:
        _harden(getattr(chunk, "message", None))

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        for generations in getattr(response, "generations", None) or []:
            for generation in generations:
                _harden(getattr(generation, "message", None))


_HANDLER = HardBreaks()


def with_hard_breaks(config: RunnableConfig | None) -> RunnableConfig | None:
    """The model call's config with ``HardBreaks`` first among its callbacks; a config with no
    callbacks (nothing streams) is left as it is."""
    callbacks = (config or {}).get("callbacks")
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.handlers = [_HANDLER, *manager.handlers]
        manager.inheritable_handlers = [_HANDLER, *manager.inheritable_handlers]
        return {**(config or {}), "callbacks": manager}
    if callbacks:
        return {**(config or {}), "callbacks": [_HANDLER, *callbacks]}
    return config


def plain(message: Any) -> Any:
    """The reply as the model wrote it: the hard breaks ``HardBreaks`` put in taken out (in a
    copy: the messages stream may still hold the object)."""
    text = getattr(message, "content", None)
    if isinstance(message, BaseMessage) and isinstance(text, str) and BREAK in text:
        return message.model_copy(update={"content": text.replace(BREAK, "\n")})
    return message
