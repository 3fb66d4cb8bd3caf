"""Calling chat models: the ``stop`` quirks of providers, a cap on each reply, a total deadline
per call, and retries of transient faults (429, 5xx, timeouts, malformed responses) that honour
Retry-After. A model that streams is called streaming where its server counts a streamed reply,
so a call abandoned at its deadline closes its response and the server stops generating it (see
``streaming`` and ``streamchoice``); a streamed reply cut short is asked again at once, plain,
and that is not counted as a retry.

``ModelCaller.call`` is one generator body for sync and async runs (see ``effects``); the model
call itself is the ``ModelCall`` effect, its only sync/async pair."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Generator, Mapping
from email.utils import parsedate_to_datetime
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from reactgraph.nodes.calling import constrained, streamchoice
from reactgraph.nodes.calling.constrained import Constraint
from reactgraph.nodes.calling.replies import MalformedReply, StreamCut
from reactgraph.nodes.calling.streaming import ModelCall, cap_arguments
from reactgraph.nodes.loop.effects import Effect, Pause
from reactgraph.nodes.loop.run_settings import RunSettings

logger = logging.getLogger(__name__)

# OpenAI's reasoning families answer 400 to `stop` on chat completions.
NO_STOP_PREFIXES = ("o1", "o3", "o4", "gpt-5")
MAX_BACKOFF_S = 30.0
_TRANSIENT_NAMES = {
    "APITimeoutError",
    "APIConnectionError",
    "ConnectError",
    "ConnectTimeout",
    "ReadTimeout",
    "RemoteProtocolError",
    "Timeout",
    "TimeoutException",
    "TimedOut",
    "JSONDecodeError",  # a truncated or garbled body from a proxy or an overloaded server
}
# What a response without choices looks like from inside the client libraries.
_EMPTY_RESPONSE = ("No generations found", "list index out of range")


class ModelCallError(RuntimeError):
    """The model could not be reached after every retry; the run can be resumed later."""


def accepts_stop(model_name: str | None) -> bool:
    """False for model families known to reject the ``stop`` parameter."""
    name = (model_name or "").lower().split("/")[-1]
    return not name.startswith(NO_STOP_PREFIXES)


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    if status is None:
        status = getattr(getattr(error, "response", None), "status_code", None)
    return status if isinstance(status, int) else None


def rejects_stop(error: BaseException) -> bool:
    """A 400 answer that names the ``stop`` parameter."""
    return _status(error) == 400 and "stop" in str(error).lower()


def retry_after(error: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After, in seconds or as a date)."""
    headers = getattr(getattr(error, "response", None), "headers", None)
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def is_transient(error: BaseException) -> bool:
    """429, 408/409, 5xx, timeouts and dropped connections: worth another try."""
    status = _status(error)
    if status is not None and status >= 400:  # a 200 whose body could not be read falls through
        return status in (408, 409, 429) or status >= 500
    if isinstance(error, TimeoutError | ConnectionError | MalformedReply):
        return True
    if isinstance(error, IndexError | ValueError) and any(m in str(error) for m in _EMPTY_RESPONSE):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(error).__mro__)


def model_url(model: BaseChatModel) -> str | None:
    """Where the model is served, when its client says (for error messages)."""
    for attribute in ("openai_api_base", "base_url", "api_base"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return "https://api.openai.com/v1" if type(model).__name__ == "ChatOpenAI" else None


def call_deadline(model: BaseChatModel) -> float | None:
    """Seconds a whole call may take: the client's request timeout, which the client itself
    applies per read only (a server trickling tokens would otherwise hold a call forever)."""
    timeout = getattr(model, "request_timeout", None)
    if isinstance(timeout, tuple):
        timeout = max((t for t in timeout if isinstance(t, int | float)), default=None)
    elif timeout is not None and not isinstance(timeout, int | float):
        parts = [getattr(timeout, name, None) for name in ("read", "connect", "write", "pool")]
        timeout = max((t for t in parts if isinstance(t, int | float)), default=None)
    return float(timeout) if isinstance(timeout, int | float) and timeout > 0 else None


class ModelCaller:
    """Calls one chat model with the stop sequence where it is accepted and the run's cap on
    the reply, retrying transient faults with exponential backoff (or the server's Retry-After)
    as often as the run's settings say (``model_retries``, ``retry_backoff_s``,
    ``max_completion_tokens``)."""

    def __init__(self, model: BaseChatModel, model_name: str | None) -> None:
        self.model = model
        self.deadline = call_deadline(model)
        self.url = model_url(model)
        self._stop_ok = accepts_stop(model_name)
        self._tools_plain = False  # its server cut a stream of a call with tools bound
        self._lock = threading.Lock()

    def _arguments(
        self, stop: list[str] | None, settings: RunSettings, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        arguments: dict[str, Any] = {"stop": stop} if stop and self._stop_ok else {}
        if settings.max_completion_tokens is not None:
            arguments.update(cap_arguments(self.model, settings.max_completion_tokens))
        if body:
            # The call's extra_body replaces the model's own: both go, with the cap's.
            own = getattr(self.model, "extra_body", None) or {}
            arguments["extra_body"] = {**own, **arguments.get("extra_body", {}), **body}
        return arguments

    def _on_error(
        self, error: Exception, attempt: int, stop: list[str] | None, settings: RunSettings
    ) -> float:
        """Seconds to wait before the next attempt; raises when there is none."""
        if stop and self._stop_ok and rejects_stop(error):
            with self._lock:
                self._stop_ok = False
            logger.warning("the model rejects `stop`; calling it without (replies are cut here)")
            return 0.0
        if not is_transient(error):
            raise error
        if attempt > settings.model_retries:
            where = f" at {self.url}" if self.url else ""
            detail = str(error).strip().rstrip(".") or type(error).__name__
            raise ModelCallError(
                f"the model{where} failed after {attempt} attempt{'s' if attempt > 1 else ''} "
                f"({type(error).__name__}: {detail})"
            ) from error
        delay = retry_after(error)
        if delay is None:
            delay = settings.retry_backoff_s * 2 ** (attempt - 1) * (0.5 + random.random() / 2)
        delay = min(delay, MAX_BACKOFF_S)
        logger.warning(
            "model call failed (%s); retry %d of %d in %.2f s",
            error,
            attempt,
            settings.model_retries,
            delay,
        )
        return delay

    def call(
        self,
        messages: list[BaseMessage],
        config: RunnableConfig | None,
        stop: list[str] | None,
        settings: RunSettings,
        bound: Mapping[str, Any] | None = None,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
        constraint: Constraint | None = None,
    ) -> Generator[Effect, Any, Any]:
        """The model's reply message, with the quirks handled (a node body's ``yield from``).
        ``settings``: the run's, whose ``model_retries``, ``retry_backoff_s`` and
        ``max_completion_tokens`` bound the call. ``bound``: call arguments of the model's
        ``bind_tools`` (the tools), sent with each attempt; ``on_retry(attempt, error, delay)``
        is told of each retry (the traces).
        ``constraint``: what constrains the reply (``constrained_decoding``), unless this server
        rejected it: then it is sent without, once told (``constrained``)."""
        attempt, plain = 0, bool(bound) and self._tools_plain
        active = constraint is not None and not constrained.refused(self.url)
        while True:
            attempt += 1
            chosen = constraint if active else None
            tools = bound if chosen is None or chosen.bound is None else chosen.bound
            body = chosen.body if chosen is not None else None
            arguments = {**(tools or {}), **self._arguments(stop, settings, body)}
            call = ModelCall(self.model, messages, config, arguments, self.deadline, plain)
            try:
                return (yield call)
            except StreamCut as error:
                if plain:
                    yield Pause(self._on_error(error, attempt, stop, settings))
                    continue
                # Not the model's reply, nor a fault of its: asked again at once, plain (a
                # server that cuts streams when busy, as llama-cpp-python's does, never cuts
                # those, and its chatml-function-calling cannot stream the tool calls it
                # chooses), and not counted as a retry.
                logger.warning("%s; asking again, not streamed", error)
                streamchoice.note_cut(self.model)
                if bound and not self._tools_plain:  # chatml-function-calling's tool calls
                    logger.warning("calling it without streaming when it has tools from now on")
                    self._tools_plain = True
                attempt, plain = attempt - 1, True
            except Exception as error:
                if active and constrained.rejects(error):
                    constrained.note_refused(self.url, error)
                    active, attempt = False, attempt - 1  # asked again at once: not a retry
                    continue
                delay = self._on_error(error, attempt, stop, settings)
                if on_retry is not None:
                    on_retry(attempt, error, delay)
                yield Pause(delay)
