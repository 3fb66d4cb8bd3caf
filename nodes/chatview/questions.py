"""What a human message asks: its text, in every form LangChain and the chat clients send.

A message may be a string, a LangChain message object, or a dict with ``type`` (LangChain's
form, ``{"type": "human", ...}``) or ``role`` (OpenAI's, ``{"role": "user", ...}``); its
content a string or a list of content blocks. Text blocks are joined as written (as LangChain's
``BaseMessage.text`` joins them); other blocks (images, files, audio) are named, so a run can
say it did not read them. Pure functions, no LangGraph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

# The block types that hold text (LangChain's standard ``text``, OpenAI's ``input_text``).
_TEXT_BLOCKS = ("text", "input_text")


def _text_of(block: Any) -> str | None:
    """A content block's text: a string as is, a text block's text ("" when it holds none);
    None for a block that holds something else."""
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and block.get("type") in _TEXT_BLOCKS:
        text = block.get("text")
        return text if isinstance(text, str) else ""
    return None


def content_parts(content: Any) -> tuple[str, list[str]]:
    """A message content's text, its text blocks joined as written, and the types of the
    blocks that hold something else (in order, each named once)."""
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    others: list[str] = []
    for block in content if isinstance(content, Sequence) else []:
        text = _text_of(block)
        if text is not None:
            texts.append(text)
            continue
        kind = block.get("type") if isinstance(block, Mapping) else None
        name = str(kind or "unknown")
        if name not in others:
            others.append(name)
    return "".join(texts), others


def as_messages(messages: Any) -> list[BaseMessage]:
    """Chat messages in any form LangChain accepts, as message objects; ValueError for
    anything else."""
    if isinstance(messages, BaseMessage | Mapping | str):
        messages = [messages]
    try:
        return convert_to_messages(messages)
    except (TypeError, ValueError, NotImplementedError, KeyError) as error:
        raise ValueError(f"'messages' is not a list of chat messages: {error}") from None


def last_human(messages: Sequence[BaseMessage]) -> BaseMessage | None:
    """The last human message, or None."""
    for message in reversed(messages):
        if message.type == "human":
            return message
    return None


def unread_note(kinds: Sequence[str]) -> str:
    """What a run says about blocks it did not read, e.g. 'an image block' or 'image and file
    blocks'."""
    if len(kinds) == 1:
        article = "an" if kinds[0][:1] in "aeiou" else "a"
        return f"{article} {kinds[0]} block"
    return f"{', '.join(kinds[:-1])} and {kinds[-1]} blocks"
