"""Counting tokens offline: tiktoken when an encoding can be had, a character estimate when not;
and what a provider reported a call cost, checked before it is taken (``read_usage``).

tiktoken downloads encodings on first use and has no timeout; on a machine without network that
can hang. cl100k_base ships with this package (``bundled``); any other encoding is loaded in a
worker thread with a deadline, falling back to cl100k_base (and, were its copy unreadable, to a
characters/4 estimate), with one warning saying the counts are estimates and how to give
tiktoken its files.

A server's (or a proxy's) usage is anyone's numbers: a negative count would lower a run's spend,
NaN or a string would fail the run, an integer of 2^64 or more cannot be stored. ``read_usage``
takes only whole numbers from 0 to ``MAX_CALL_TOKENS``; anything else is refused (the call is
then counted here, as a call without usage is).
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from reactgraph.nodes.calling import bundled
from reactgraph.nodes.vocabulary.bounded import remembered

logger = logging.getLogger(__name__)

FALLBACK_ENCODING = "cl100k_base"
LOAD_TIMEOUT_S = 10.0
GIVE_TIKTOKEN_ITS_FILES = (
    "for exact counts, put tiktoken's file of that encoding in a folder named by "
    "TIKTOKEN_CACHE_DIR (see 'Token counts offline' in docs/models.md)"
)
"""What the offline warning tells a user to do (said once per encoding and process)."""
# OpenAI's accounting for chat messages: a few tokens of framing per message and per reply.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3
_CACHE_LIMIT = 50_000
MAX_CALL_TOKENS = 100_000_000
"""The most tokens a provider may report for one call's prompt or reply: no model's context
holds that many, so a count above it is refused (as is one that would not fit a checkpoint)."""
UNREADABLE_USAGE = "reactgraph_unreadable_usage"
"""The key a streamed reply's ``response_metadata`` gets when the event carrying its usage could
not be read (``streaming``): the error, in a few words."""


def _load(name: str, timeout: float) -> tuple[Any | None, str]:
    """The encoding, or None and why it could not be had (one line). cl100k_base is this
    package's own copy (``bundled``: no download); any other is tiktoken's, from its cache or
    downloaded, within ``timeout``."""
    if name == FALLBACK_ENCODING:
        try:
            return bundled.cl100k_base(), ""
        except (OSError, ValueError) as exc:  # the copy is missing or damaged
            return None, f"{name}: its copy in reactgraph cannot be read ({exc})"
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


def encoding_for(model_name: str | None, timeout: float = LOAD_TIMEOUT_S) -> Any | None:
    """The tiktoken encoding for a model name; cl100k_base (this package's copy) when that one
    cannot be had; None (use ``estimate_tokens``) when no encoding loads. Whenever the counts are
    not the model's own encoding's, a warning says so, once per encoding and process."""
    try:
        import tiktoken

        name = tiktoken.encoding_name_for_model(model_name or "")
    except (KeyError, ImportError):
        name = FALLBACK_ENCODING
    return _encoding_named(name, timeout)


@functools.cache
def _encoding_named(name: str, timeout: float) -> Any | None:
    encoding, why = _load(name, timeout)
    if encoding is not None:
        return encoding
    reasons = [why]
    if name != FALLBACK_ENCODING:
        fallback, why_not = _load(FALLBACK_ENCODING, timeout)
        if fallback is not None:
            logger.warning(
                "token counts are estimated with %s: %s; %s",
                FALLBACK_ENCODING,
                why,
                GIVE_TIKTOKEN_ITS_FILES,
            )
            return fallback
        reasons.append(why_not)
    logger.warning(
        "token counts are estimated (characters / 4): no tiktoken encoding loaded (%s); %s",
        "; ".join(reasons),
        GIVE_TIKTOKEN_ITS_FILES,
    )
    return None


def _refusal(name: str, value: Any) -> str | None:
    """Why a reported count cannot be taken, or None when it can."""
    if type(value) is int and 0 <= value <= MAX_CALL_TOKENS:  # the common case, at once
        return None
    shown = repr(value)[:40]
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name}={shown}: not a finite number"
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{name}={shown}: not a whole number"
    if value < 0:
        return f"{name}={shown}: negative"
    if value > MAX_CALL_TOKENS:
        return f"{name}={shown}: more than one call can have ({MAX_CALL_TOKENS:,})"
    return None


def _unreadable(message: Any) -> str | None:
    """Why a call's usage event could not be read (``UNREADABLE_USAGE`` in its metadata), or
    None."""
    metadata = getattr(message, "response_metadata", None)
    if isinstance(metadata, Mapping) and isinstance(metadata.get(UNREADABLE_USAGE), str):
        return str(metadata[UNREADABLE_USAGE])
    return None


def _unreported(prompt: Any) -> bool:
    """A prompt count that reports nothing: absent, or 0 (some servers send zeros on streams)."""
    return prompt is None or (type(prompt) is int and prompt == 0)


def read_usage(message: Any) -> tuple[int, int] | str | None:
    """The prompt and completion tokens a provider reported for a call (``usage_metadata``); a
    text saying why they are refused (a count that is negative, not a whole number, not finite,
    or over ``MAX_CALL_TOKENS``, or a usage event that could not be read); None when none was
    reported (or a prompt of 0 tokens: some servers send zeros on streams). Pure; never raises."""
    unreadable = _unreadable(message)
    if unreadable is not None:
        return unreadable
    usage = getattr(message, "usage_metadata", None)
    if not usage:
        return None
    if not isinstance(usage, Mapping):
        return f"usage of type {type(usage).__name__}, not an object"
    prompt: Any = usage.get("input_tokens")  # Any: _refusal checks each
    completion: Any = usage.get("output_tokens")
    if prompt is None and completion is None:
        return None
    why = _refusal("completion_tokens", completion)
    if _unreported(prompt) and why is None:
        return None
    why = _refusal("prompt_tokens", prompt) or why
    if why is not None:
        return why
    return prompt, completion  # whole numbers: _refusal took both


def _detail(found: Any, *path: str) -> Any:
    """``found[path[0]][path[1]]...``, or None where a step is not a mapping or lacks it."""
    for key in path:
        if type(found) is not dict and not isinstance(found, Mapping):  # a dict: no ABC check
            return None
        found = found.get(key)
    return found


def read_cached(message: Any, prompt: int) -> int:
    """How many of a call's ``prompt`` tokens its provider read from its prefix cache: LangChain's
    ``usage_metadata["input_token_details"]["cache_read"]`` (OpenAI's and vLLM's
    ``prompt_tokens_details.cached_tokens``, llama.cpp's ``llama-server`` too), else the raw
    usage's ``prompt_tokens_details.cached_tokens`` or llama.cpp's ``timings.cache_n`` in the
    reply's metadata; 0 when none is reported, or when the count cannot be right (not a whole
    number from 0 to ``prompt``). Pure; never raises."""
    metadata = getattr(message, "response_metadata", None)
    for found in (
        _detail(getattr(message, "usage_metadata", None), "input_token_details", "cache_read"),
        _detail(metadata, "token_usage", "prompt_tokens_details", "cached_tokens"),
        _detail(metadata, "timings", "cache_n"),
    ):
        if found is None:
            continue
        if _refusal("cache_read_tokens", found) is None and found <= prompt:
            return int(found)
        return 0
    return 0


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


def usage_of(message: Any) -> tuple[int, int] | None:
    """Prompt and completion tokens as the provider reported them, if it did and they can be
    right (``read_usage``: whole numbers from 0 to ``MAX_CALL_TOKENS``)."""
    found = read_usage(message)
    return found if isinstance(found, tuple) else None


MOST_SERVERS = 256
"""Servers whose refused token counts were said (the most recent)."""
_refused: dict[str, None] = {}
_refused_lock = threading.Lock()


def refused_usage(server: str, why: str) -> None:
    """Say, once per server (for the process; the last ``MOST_SERVERS``), that its reported
    token counts were refused and the calls are counted here instead."""
    with _refused_lock:
        known = server in _refused
        remembered(_refused, server, None, MOST_SERVERS)
    if not known:
        logger.warning(
            "the model at %s reported token counts that cannot be right (%s); its calls are "
            "counted by the token counter instead, as a call without usage is (said once per "
            "server)",
            server,
            why,
        )


def count_tokens(
    counter: Callable[[Sequence[BaseMessage]], int],
    messages: list[BaseMessage],
    message: Any,
    server: str | None = None,
) -> tuple[int, int, str]:
    """A call's prompt and completion tokens and where they came from: the provider's usage
    when it reports one that can be right, else ``counter`` (a refused usage is said once per
    ``server``, the model's URL or name)."""
    found = read_usage(message)
    if isinstance(found, tuple):
        return (*found, "usage")
    if found is not None:
        refused_usage(server or "an unnamed server", found)
    from langchain_core.messages import AIMessage

    calls = getattr(message, "tool_calls", None) or []
    completion = counter([AIMessage(message_text(message), tool_calls=calls)]) - counter([])
    return counter(messages), completion, getattr(counter, "source", "estimate")
