"""Whether a model call streams: the model's own setting, or what its server was seen to do.

A streamed call can be closed when abandoned, so the server stops generating it; a plain call
carries the server's token counts on every OpenAI-compatible server. A streamed one carries them
only where the server honours ``stream_options.include_usage``: OpenAI, vLLM, Ollama and
llama.cpp's own ``llama-server`` do; llama-cpp-python's server (0.3.36) sends none, and, by
default, ends a stream early when another request is waiting (``--interrupt_requests``).

So a ChatOpenAI left to choose (neither ``streaming=True`` nor ``disable_streaming``, as
``chat_model`` makes it by default) streams, and learns from the replies, never from a request
of its own: a server whose streamed reply ends without usage (that call is counted with
tiktoken, ``tokens.count_tokens``, ``note_no_usage``) or is cut short (``note_cut``) is called
plain from then on, per server and model, for the process (the last ``MOST_SERVERS``).
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Literal

from langchain_core.language_models import BaseChatModel

logger = logging.getLogger(__name__)

OPENAI_URL = "api.openai.com"
FAKES_MODULE = "langchain_core.language_models.fake_chat_models"
MOST_SERVERS = 256  # servers remembered (a run's base_url is anyone's on a server)
Mode = Literal["stream", "plain"]

_plain: dict[tuple[str, str], str] = {}  # (URL, model) -> why it is called plain
_lock = threading.Lock()


def openai_family(model: BaseChatModel) -> bool:
    """ChatOpenAI and its kin (by name: importing langchain-openai costs a second that a
    scripted run does not need); asked several times a call, answered once per class."""
    return _openai_class(type(model))


@functools.cache
def _openai_class(kind: type) -> bool:
    return any(cls.__name__ == "BaseChatOpenAI" for cls in kind.__mro__)


def streams(model: BaseChatModel) -> bool:
    """Whether the model has a streaming call of its own (else ``stream`` is one invoke).
    langchain-core's own fakes are called plain: their streams carry the text alone
    (``GenericFakeChatModel`` drops a reply's tool calls), and ``invoke`` gives the reply whole."""
    if getattr(model, "disable_streaming", False) is True:
        return False
    own = type(model)._stream
    return own is not BaseChatModel._stream and own.__module__ != FAKES_MODULE


def chooses(model: BaseChatModel) -> bool:
    """An OpenAI-family model at a server other than OpenAI's, its streaming left unset."""
    if not openai_family(model) or "streaming" in model.model_fields_set:
        return False
    url = getattr(model, "openai_api_base", None)
    return isinstance(url, str) and bool(url) and OPENAI_URL not in url


def _key(model: BaseChatModel) -> tuple[str, str]:
    return (str(getattr(model, "openai_api_base", "")), str(getattr(model, "model_name", "")))


def mode(model: BaseChatModel) -> Mode:
    """How the next call goes: streamed, or plain (the model cannot stream, or its server was
    seen to send no usage on a stream or to cut one short)."""
    if not streams(model):
        return "plain"
    if not chooses(model):
        return "stream"
    with _lock:
        return "plain" if _key(model) in _plain else "stream"


def _settle(model: BaseChatModel, why: str) -> None:
    """A model left to choose is called plain at its server from now on."""
    if not chooses(model):
        return
    key = _key(model)
    with _lock:
        known = key in _plain
        _plain[key] = _plain.pop(key, why)
        while len(_plain) > MOST_SERVERS:  # the oldest let go: streamed to again if called
            del _plain[next(iter(_plain))]
    if not known:
        logger.info("calling the model at %s plain from now on: %s", key[0], why)


def note_cut(model: BaseChatModel) -> None:
    """The model's server cut a streamed reply short."""
    _settle(model, "it cut a streamed reply short")


def note_no_usage(model: BaseChatModel) -> None:
    """The model's server ended a streamed reply without its token counts (asked for with
    ``stream_options.include_usage``)."""
    _settle(model, "it sends no token counts on a streamed reply")


def forget() -> None:
    """Forget every server (one replaced by another at the same address)."""
    with _lock:
        _plain.clear()
