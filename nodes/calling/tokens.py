"""Counting tokens offline: tiktoken when an encoding can be had, a character estimate when not.

tiktoken downloads encodings on first use and has no timeout; on a machine without network that
can hang. Encodings are therefore loaded in a worker thread with a deadline, falling back to
cl100k_base and then to a characters/4 estimate, each with one warning.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

logger = logging.getLogger(__name__)

FALLBACK_ENCODING = "cl100k_base"
LOAD_TIMEOUT_S = 10.0
# OpenAI's accounting for chat messages: a few tokens of framing per message and per reply.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3
_CACHE_LIMIT = 50_000


def _load(name: str, timeout: float) -> tuple[Any | None, str]:
    """The encoding, or None and why it could not be had (one line)."""
    import tiktoken

    result: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def target() -> None:
        try:
            result.set_result(tiktoken.get_encoding(name))
        except BaseException as exc:  # a failed download raises many kinds of error
            result.set_exception(exc)

    # A daemon thread, not an executor: a download that never returns must not block exit.
    threading.Thread(target=target, name=f"tiktoken-{name}", daemon=True).start()
    try:
        return result.result(timeout=timeout), ""
    except concurrent.futures.TimeoutError:
        return None, f"{name}: its download timed out after {timeout:.0f} s"
    except Exception as exc:
        kind = type(exc).__name__
        offline = isinstance(exc, OSError) or "Connection" in kind or "Timeout" in kind
        return None, f"{name}: cannot download it ({kind}{', offline?' if offline else ''})"


@functools.cache
def encoding_for(model_name: str | None, timeout: float = LOAD_TIMEOUT_S) -> Any | None:
    """The tiktoken encoding for a model name, cl100k_base when that one is unavailable, or
    None (use ``estimate_tokens``) when no encoding loads. One log line at most, once."""
    try:
        import tiktoken

        name = tiktoken.encoding_name_for_model(model_name or "")
    except (KeyError, ImportError):
        name = FALLBACK_ENCODING
    encoding, why = _load(name, timeout)
    if encoding is not None:
        return encoding
    reasons = [why]
    if name != FALLBACK_ENCODING:
        fallback, why_not = _load(FALLBACK_ENCODING, timeout)
        if fallback is not None:
            # Close enough for compaction budgets and the turn records (usage, when the provider
            # reports it, is exact anyway): not worth a warning on every run.
            logger.info("token counts use %s (%s)", FALLBACK_ENCODING, why)
            return fallback
        reasons.append(why_not)
    logger.warning(
        "token counts are estimated (characters / 4): no tiktoken encoding loaded (%s); set "
        "TIKTOKEN_CACHE_DIR to a folder holding the encodings for exact counts",
        "; ".join(reasons),
    )
    return None


def estimate_tokens(text: str) -> int:
    """A rough count for when no encoding is available: about four characters a token."""
    return (len(text) + 3) // 4


def message_text(message: BaseMessage) -> str:
    """A message's text, also when its content is a list of blocks."""
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


class TokenCounter:
    """``counter(messages) -> int`` that counts each distinct message text once.

    The cache is keyed by text, so a prompt rebuilt each turn from the same transcript costs
    only its new messages: O(new text) per check, not O(transcript).
    """

    def __init__(self, model_name: str | None = None, encoding: Any | None = None) -> None:
        self.model_name = model_name
        self._encoding = encoding
        self._resolved = encoding is not None
        self._cache: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def source(self) -> str:
        """``tiktoken`` or ``estimate``: what the counts are."""
        return "tiktoken" if self._get_encoding() is not None else "estimate"

    def _get_encoding(self) -> Any | None:
        if not self._resolved:
            with self._lock:
                if not self._resolved:
                    self._encoding = encoding_for(self.model_name)
                    self._resolved = True
        return self._encoding

    def count_text(self, text: str) -> int:
        """Tokens of one text, cached."""
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        encoding = self._get_encoding()
        count = (
            len(encoding.encode(text, disallowed_special=()))
            if encoding is not None
            else estimate_tokens(text)
        )
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[text] = count
        return count

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        total = TOKENS_PER_REPLY
        for message in messages:
            total += TOKENS_PER_MESSAGE + self.count_text(message_text(message))
            for call in getattr(message, "tool_calls", None) or ():
                # A native tool call's name and arguments are tokens of the message too.
                total += self.count_text(f"{call['name']}{json.dumps(call['args'], default=str)}")
        return total
