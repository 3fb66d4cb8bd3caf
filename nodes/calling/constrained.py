"""Sending a grammar with a model call (``constrained_decoding="gbnf"``), and what happens when
a server will not take it.

The text format's grammar (``grammar.react_grammar``) goes in the request body, through
ChatOpenAI's ``extra_body``, under the names each server reads: ``grammar`` (llama.cpp's
``llama-server`` and llama-cpp-python's server) and ``structured_outputs.grammar`` (vLLM 0.10.2
on; it replaced ``guided_grammar``, removed in 0.12). Each server ignores the other's field.
The ``tool_calls`` format binds its tools ``strict`` instead: the server constrains each call's
arguments to its tool's schema (OpenAI; llama.cpp's servers always do).

A server that answers such a request with a 400/422 naming the field (OpenAI's "Unrecognized
request argument supplied: grammar", a grammar it cannot parse, strict schemas it refuses) is
noted: one warning naming the server and the setting, the call is sent again at once without
the constraint, and every later call to that server goes unconstrained (servers remembered,
the most recent ``MOST_SERVERS``). A server that takes the field but ignores it is told apart by
its replies: a reply under the grammar always starts with ``Thought:``; the first that does
not gets one warning too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel

from reactgraph.nodes.calling.replies import http_status
from reactgraph.nodes.calling.streamchoice import openai_family

logger = logging.getLogger(__name__)

SETTING = "constrained_decoding='gbnf'"
GRAMMAR = "grammar"
"""The model request's setting (``ModelRequest.model_settings``) that carries the text format's
GBNF grammar."""
STRICT_TOOLS = "strict_tools"
"""The model request's setting that binds the tool_calls format's tools strict."""
LLAMA_FIELD = "grammar"
VLLM_FIELD = "structured_outputs"
MOST_SERVERS = 256
_NAMED = ("grammar", "structured_output", "strict", "extra_forbidden", "unrecognized request")

_refused: dict[str, str] = {}  # server -> why (the most recent MOST_SERVERS)
_ignoring: dict[str, None] = {}  # servers warned of replies outside the grammar
_lock = threading.Lock()


@dataclass(frozen=True)
class Constraint:
    """What constrains one call: fields merged into the request body (the text format's
    grammar), or the tools bound strict in place of the call's binding (``tool_calls``)."""

    body: Mapping[str, Any] = field(default_factory=dict)
    bound: Mapping[str, Any] | None = None

    @property
    def grammar(self) -> str | None:
        value = self.body.get(LLAMA_FIELD)
        return value if isinstance(value, str) else None


def grammar_constraint(grammar: str) -> Constraint:
    """The request fields that carry ``grammar`` to llama.cpp's and vLLM's servers."""
    return Constraint(body={LLAMA_FIELD: grammar, VLLM_FIELD: {"grammar": grammar}})


def takes_grammar(model: BaseChatModel) -> bool:
    """Whether a call of ``model`` can carry request-body fields: ChatOpenAI and its kin (any
    OpenAI-compatible server), or a model that says it takes them (``takes_extra_body``: the
    scripted test model, which records them)."""
    return openai_family(model) or getattr(type(model), "takes_extra_body", False) is True


def check_strict_model(model: BaseChatModel) -> None:
    """ValueError, saying what to do, for ``constrained_decoding="gbnf"`` in the ``tool_calls``
    format with a model that cannot bind its tools strict (only the OpenAI family can: their
    servers constrain tool-call arguments)."""
    if not openai_family(model):
        raise ValueError(
            f"{SETTING} with action_format='tool_calls' constrains tool-call arguments through "
            f"strict tool schemas, which only an OpenAI-compatible chat model (ChatOpenAI: "
            f"llama.cpp, vLLM, OpenAI) sends; {type(model).__name__} cannot: use "
            "action_format='text' (the grammar), or constrained_decoding='off'"
        )


def check_grammar_model(model: BaseChatModel) -> None:
    """ValueError, saying what to do, for ``constrained_decoding="gbnf"`` in the text format
    with a model whose calls cannot carry a request field."""
    if not takes_grammar(model):
        raise ValueError(
            f"{SETTING} sends a grammar in the request body of an OpenAI-compatible server "
            f"(ChatOpenAI at llama.cpp's or vLLM's server); {type(model).__name__} cannot carry "
            "one: use constrained_decoding='off' with it"
        )


def _key(url: str | None) -> str:
    return url or "(the model's own client)"


def refused(url: str | None) -> bool:
    """Whether the server at ``url`` was found to reject the constraint."""
    with _lock:
        return _key(url) in _refused


def rejects(error: BaseException) -> bool:
    """A 400/422 answer that names the constraint (its field, a grammar, strict schemas)."""
    if http_status(error) not in (400, 422):
        return False
    text = str(error).lower()
    return any(word in text for word in _NAMED)


def note_refused(url: str | None, error: BaseException) -> None:
    """The server at ``url`` rejected the constraint: one warning, and none sent to it again."""
    key = _key(url)
    detail = " ".join(str(error).split())[:300] or type(error).__name__
    with _lock:
        known = _refused.pop(key, None)
        _refused[key] = detail
        while len(_refused) > MOST_SERVERS:
            del _refused[next(iter(_refused))]
    if known is None:
        logger.warning(
            "the server at %s rejected %s (%s); going on unconstrained", key, SETTING, detail
        )


def check_reply(url: str | None, constraint: Constraint, text: str, cut: bool) -> None:
    """One warning the first time a reply made under the grammar is outside it: the server
    took the field but did not honour it."""
    if constraint.grammar is None or cut or text.startswith("Thought: "):
        return
    key = _key(url)
    with _lock:
        if key in _ignoring:
            return
        _ignoring[key] = None
        while len(_ignoring) > MOST_SERVERS:
            del _ignoring[next(iter(_ignoring))]
    logger.warning(
        "the server at %s does not seem to honour %s: a reply came back outside the grammar "
        "(llama.cpp's servers read `grammar`, vLLM >= 0.10.2 `structured_outputs`)",
        key,
        SETTING,
    )


def forget() -> None:
    """Forget every server's answer (a server replaced by another at the same address)."""
    with _lock:
        _refused.clear()
        _ignoring.clear()
