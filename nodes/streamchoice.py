"""Whether a model call streams: the model's own setting, or what its server was found to do.

A streamed call can be closed when abandoned, so the server stops generating it; a plain call
carries the server's token counts on every OpenAI-compatible server. A streamed one carries them
only where the server honours ``stream_options.include_usage``: OpenAI, vLLM, Ollama and
llama.cpp's own ``llama-server`` do; llama-cpp-python's server (0.3.36) sends none, and, by
default, ends a stream early when another request is waiting (``--interrupt_requests``).

So a ChatOpenAI left to choose (neither ``streaming=True`` nor ``disable_streaming``, as
``chat_model`` makes it by default) streams at OpenAI, and elsewhere asks its server once per
process, with a one-token streamed request marked ``X-Reactgraph-Probe``: a server whose reply
carries usage is streamed to from then on; one that sends none, cuts the reply short or refuses
the request is called plain. Calls made while that request is out are plain. A server that cuts
a streamed reply later is called plain from then on too (``note_cut``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel

logger = logging.getLogger(__name__)

PROBE_HEADER = "X-Reactgraph-Probe"
OPENAI_URL = "api.openai.com"
FAKES_MODULE = "langchain_core.language_models.fake_chat_models"
MOST_SERVERS = 256  # servers remembered (a run's base_url is anyone's on a server)
MAX_PROBE_CHUNKS = 64  # a one-token reply is a handful of chunks: the probe never reads more
Mode = Literal["stream", "plain", "probe"]

_found: dict[tuple[str, str], bool] = {}  # (URL, model) -> whether its streams carry usage
_probing: set[tuple[str, str]] = set()
_lock = threading.Lock()


def openai_family(model: BaseChatModel) -> bool:
    """ChatOpenAI and its kin (by name: importing langchain-openai costs a second that a
    scripted run does not need)."""
    return any(cls.__name__ == "BaseChatOpenAI" for cls in type(model).__mro__)


def streams(model: BaseChatModel) -> bool:
    """Whether the model has a streaming call of its own (else ``stream`` is one invoke).
    langchain-core's own fakes are called plain: their streams carry the text alone
    (``GenericFakeChatModel`` drops a reply's tool calls), and ``invoke`` gives the reply whole."""
    if getattr(model, "disable_streaming", False) is True:
        return False
    own = type(model)._stream
    return own is not BaseChatModel._stream and own.__module__ != FAKES_MODULE


def _chooses(model: BaseChatModel) -> bool:
    """An OpenAI-family model at a server other than OpenAI's, its streaming left unset."""
    if not openai_family(model) or "streaming" in model.model_fields_set:
        return False
    url = getattr(model, "openai_api_base", None)
    return isinstance(url, str) and bool(url) and OPENAI_URL not in url


def _key(model: BaseChatModel) -> tuple[str, str]:
    return (str(getattr(model, "openai_api_base", "")), str(getattr(model, "model_name", "")))


def mode(model: BaseChatModel) -> Mode:
    """How the next call goes: streamed, plain, or "probe" (the caller asks the server first,
    with ``probe``/``aprobe``, and then streams if it says so)."""
    if not streams(model):
        return "plain"
    if not _chooses(model):
        return "stream"
    key = _key(model)
    with _lock:
        if key in _found:
            return "stream" if _found[key] else "plain"
        if key in _probing:
            return "plain"
        _probing.add(key)
    return "probe"


def note_cut(model: BaseChatModel) -> None:
    """The model's server cut a streamed reply short: a model left to choose is called plain
    from now on."""
    if _chooses(model):
        _settle(_key(model), False, "it cut a streamed reply short")


def forget() -> None:
    """Forget every server (one replaced by another at the same address)."""
    with _lock:
        _found.clear()
        _probing.clear()


def _settle(key: tuple[str, str], counted: bool | None, why: str = "") -> bool:
    """Record what the probe found (None: nothing, ask again next time); whether to stream."""
    before = None
    with _lock:
        _probing.discard(key)
        if counted is not None:
            before = _found.pop(key, None)
            _found[key] = counted
            while len(_found) > MOST_SERVERS:  # the oldest let go: asked again if called again
                del _found[next(iter(_found))]
    if counted is False and before is not False:
        logger.info("calling the model at %s plain: %s", key[0], why)
    return bool(counted)


def _request(model: BaseChatModel) -> dict[str, Any]:
    return {
        "model": model.model_name,  # type: ignore[attr-defined]
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
        "extra_headers": {PROBE_HEADER: "stream-usage"},
    }


def _counted(chunk: Any, seen: dict[str, bool]) -> None:
    usage = getattr(chunk, "usage", None)
    if usage is not None and (getattr(usage, "prompt_tokens", 0) or 0) > 0:
        seen["usage"] = True
    for choice in getattr(chunk, "choices", None) or []:
        if getattr(choice, "finish_reason", None):
            seen["finished"] = True


def _verdict(seen: dict[str, bool]) -> tuple[bool, str]:
    if not seen.get("finished"):
        return False, "it cut a streamed reply short"
    if not seen.get("usage"):
        return False, "it sends no token counts on a streamed reply"
    return True, ""


def _failed(error: Exception) -> bool | None:
    """What a probe that raised says: a refusal (a 4xx other than 408/409/429) is answered by
    calling plain; anything else (down, busy, garbled) is asked again next call."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 409, 429):
        return False
    logger.debug("the streaming probe failed (%s); asking again next call", error)
    return None


def probe(model: BaseChatModel) -> bool:
    """Ask the server once (after ``mode`` said "probe"); whether to stream to it."""
    key, seen = _key(model), dict[str, Any]()
    try:
        stream = model.root_client.chat.completions.create(**_request(model))  # type: ignore[attr-defined]
        try:
            for n, chunk in enumerate(stream):
                _counted(chunk, seen)
                if n >= MAX_PROBE_CHUNKS:
                    break
        finally:
            stream.close()
    except Exception as error:
        return _settle(key, _failed(error), "it refused a streamed request")
    except BaseException:
        _settle(key, None)
        raise
    return _settle(key, *_verdict(seen))


async def aprobe(model: BaseChatModel) -> bool:
    """``probe`` on the running event loop."""
    key, seen = _key(model), dict[str, Any]()
    try:
        client = model.root_async_client  # type: ignore[attr-defined]
        stream = await client.chat.completions.create(**_request(model))
        try:
            n = 0
            async for chunk in stream:
                _counted(chunk, seen)
                n += 1
                if n > MAX_PROBE_CHUNKS:
                    break
        finally:
            await stream.close()
    except Exception as error:
        return _settle(key, _failed(error), "it refused a streamed request")
    except BaseException:  # cancelled (its deadline): ask again next call
        _settle(key, None)
        raise
    return _settle(key, *_verdict(seen))
