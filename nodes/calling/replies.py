"""A 200 reply that cannot be read as a chat completion, and how to tell the kinds apart; the
HTTP status of a reply that failed (``http_status``).

A body that is not UTF-8, a completion without choices, or a streamed request answered with a
plain body that holds no completion is a ``MalformedReply``, retried like a 5xx. A streamed reply
that ends before its finish reason is a ``StreamCut``: the server or a proxy stopped it
(llama-cpp-python's server does so when another request is waiting, and sends no event at all
when its chatml-function-calling chooses a tool), so it is not the model's reply; the caller
asks again at once, plain. An OpenAI-compatible event stream with no event in it is such a cut,
unless the transport (``reactgraph.nodes.calling.eventstream``) said the body was no event stream
at all.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from langchain_core.language_models import BaseChatModel

from reactgraph.nodes.calling.streamchoice import openai_family

# langchain-core's words for a stream that yielded nothing (a body that was no event stream),
# and langchain-openai's for a completion without choices (KeyError, or TypeError when null).
NO_CHUNKS = "No generation chunks were returned"
NO_CHOICES = "'choices'"
READERS = frozenset({"openai", "langchain_openai"})  # the packages that read a reply's body


# Set by the transport (``reactgraph.nodes.calling.eventstream``) when the streamed request it just
# sent got a plain 200 body that is no chat completion; an empty event stream is a cut one.
_UNREADABLE = contextvars.ContextVar("reactgraph_unreadable_reply", default=False)


def note_unreadable() -> None:
    """The request being read got a plain reply that no stream can be made of."""
    _UNREADABLE.set(True)


class MalformedReply(ValueError):
    """A 200 reply that is not a readable chat completion; retried like a 5xx."""


class StreamCut(MalformedReply):
    """A streamed reply that ended before its finish reason: stopped by the server or a proxy,
    not written whole by the model; asked again at once, plain."""


def _read_by_the_client(error: BaseException) -> bool:
    """Whether ``error`` was raised inside the OpenAI client or langchain-openai (the code
    that reads the body), not in ours: langchain-openai's "Unexpected response type" for a
    body that is no JSON object, an AttributeError for a choice without a message, an
    IndexError for ``choices: []``."""
    trace = error.__traceback__
    if trace is None:
        return False
    while trace.tb_next is not None:
        trace = trace.tb_next
    module = str(trace.tb_frame.f_globals.get("__name__", ""))
    return module.split(".", 1)[0] in READERS


@contextlib.contextmanager
def reading(model: BaseChatModel) -> Iterator[None]:
    """Reading the reply: a body that is not UTF-8, a completion without choices, a body the
    client cannot read as one, or a streamed request answered with no event stream at all, is
    a ``MalformedReply``; an OpenAI-compatible event stream with no event in it, a
    ``StreamCut``."""
    _UNREADABLE.set(False)
    try:
        yield
    except UnicodeDecodeError as error:
        detail = f"{error.reason} at byte {error.start}"
        raise MalformedReply(f"the reply is not UTF-8 ({detail})") from error
    except ValueError as error:
        if NO_CHUNKS not in str(error):
            if not _read_by_the_client(error):
                raise
            raise MalformedReply(f"the reply is not a chat completion ({_said(error)})") from error
        if openai_family(model) and not _UNREADABLE.get():
            raise StreamCut("the streamed reply ended with no event (cut short)") from error
        raise MalformedReply("the reply to a streamed request was not an event stream") from error
    except (KeyError, TypeError, AttributeError, IndexError) as error:
        if NO_CHOICES in str(error):
            raise MalformedReply("the reply holds no choices") from error
        if not _read_by_the_client(error):
            raise
        raise MalformedReply(f"the reply is not a chat completion ({_said(error)})") from error


def _said(error: BaseException) -> str:
    """The error in one short line: its type and the start of its first line."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:120] if lines else ''}".rstrip(": ")


def http_status(error: BaseException) -> int | None:
    """The HTTP status a provider's error carries (on itself or its response), or None."""
    status = getattr(error, "status_code", None)
    if status is None:
        status = getattr(getattr(error, "response", None), "status_code", None)
    return status if isinstance(status, int) else None
