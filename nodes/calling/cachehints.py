"""Prefix-cache hints: the request fields that help a server reuse the cache of a prompt's
prefix, sent only to a server seen to take them.

- OpenAI routes requests with the same ``prompt_cache_key`` to the same cache: the key is
  made from the run's thread, so every call of a thread's runs shares it.
- llama.cpp's ``llama-server`` reuses its slot's KV cache for the prompt's common prefix when
  the request says ``cache_prompt`` (its default in recent builds, not in older ones).

Which server is which is learned from its replies, as ``streamchoice`` learns whether a server
sends usage on streams, never from a request of its own: a reply whose ``system_fingerprint`` is
OpenAI's (``fp_...``) or which comes from OpenAI's own API says OpenAI; one whose fingerprint is
a llama.cpp build (``b6123-abcdef0``) or that carries llama.cpp's ``timings`` says llama.cpp.
A server's first call, and every call to a server whose replies say neither (vLLM, Ollama,
llama-cpp-python's server, which keeps its prefix cache without being asked), carries no hint.
A server that answers a hint with a 400 or 422 naming it is sent none again (servers
remembered: the most recent ``MOST_SERVERS``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Mapping
from typing import Any, Literal

from reactgraph.nodes.calling.streamchoice import OPENAI_URL
from reactgraph.nodes.vocabulary.bounded import remembered

logger = logging.getLogger(__name__)

Kind = Literal["openai", "llama.cpp"]
KEY_FIELD = "prompt_cache_key"
LLAMA_FIELD = "cache_prompt"
FIELDS: dict[Kind, str] = {"openai": KEY_FIELD, "llama.cpp": LLAMA_FIELD}
MOST_SERVERS = 256
_LLAMA_BUILD = re.compile(r"b\d{1,7}-[0-9a-f]{6,40}")

_kinds: dict[str, Kind] = {}  # server URL -> what its replies showed it is
_refused: dict[str, None] = {}  # servers that answered a hint with an error naming it
_lock = threading.Lock()


def cache_key(thread_id: str) -> str:
    """The ``prompt_cache_key`` of a thread: a hash (a thread id is anyone's text, of any
    length; the key is short and says nothing of it)."""
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"reactgraph-{digest[:32]}"


def kind_of(url: str, message: Any) -> Kind | None:
    """What a reply shows its server to be (None: neither OpenAI nor llama.cpp's server)."""
    metadata = getattr(message, "response_metadata", None)
    if not isinstance(metadata, Mapping):
        return None
    fingerprint = metadata.get("system_fingerprint")
    if isinstance(fingerprint, str) and _LLAMA_BUILD.fullmatch(fingerprint):
        return "llama.cpp"
    if isinstance(metadata.get("timings"), Mapping):
        return "llama.cpp"
    if OPENAI_URL in url or (isinstance(fingerprint, str) and fingerprint.startswith("fp_")):
        return "openai"
    return None


def note_reply(url: str, message: Any) -> None:
    """Learn from a reply what its server is. A reply that says neither changes nothing (a
    streamed reply may lack its fingerprint); a reply that says the other does."""
    kind = kind_of(url, message)
    if kind is None:
        return
    with _lock:
        known = _kinds.get(url)
        remembered(_kinds, url, kind, MOST_SERVERS)
    if known != kind:
        logger.info("the server at %s is %s: its calls carry %s", url, kind, FIELDS[kind])


def hints(url: str, thread_id: str | None) -> dict[str, Any]:
    """The call arguments that carry the hint the server at ``url`` takes ({} for none: a
    server not yet seen, one that takes none, or one that refused it)."""
    with _lock:
        kind = None if url in _refused else _kinds.get(url)
    if kind == "openai" and thread_id:
        return {KEY_FIELD: cache_key(thread_id)}
    if kind == "llama.cpp":
        return {"extra_body": {LLAMA_FIELD: True}}
    return {}


def _status(error: BaseException) -> int | None:
    for found in (error, error.__cause__):
        status = getattr(found, "status_code", None)
        if status is None:
            status = getattr(getattr(found, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
    return None


def rejects(url: str, error: BaseException) -> bool:
    """Whether ``error`` is the server refusing a hint (a 400 or 422 naming its field): then it
    is noted, with one warning, and none is sent to that server again."""
    if _status(error) not in (400, 422):
        return False
    text = f"{error} {error.__cause__ or ''}".lower()
    if not any(field in text for field in FIELDS.values()):
        return False
    with _lock:
        known = url in _refused
        remembered(_refused, url, None, MOST_SERVERS)
    if not known:
        logger.warning(
            "the server at %s refused a prefix-cache hint (%s); calling it without one from now on",
            url,
            " ".join(str(error).split())[:200],
        )
    return True


def forget() -> None:
    """Forget every server (one replaced by another at the same address; tests)."""
    with _lock:
        _kinds.clear()
        _refused.clear()
