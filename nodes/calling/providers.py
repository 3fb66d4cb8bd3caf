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
from http import HTTPStatus
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from reactgraph.nodes.calling import constrained, streamchoice
from reactgraph.nodes.calling.constrained import Constraint
from reactgraph.nodes.calling.replies import MalformedReply, StreamCut, http_status
from reactgraph.nodes.calling.streaming import ModelCall, cap_arguments
from reactgraph.nodes.running import deadlines
from reactgraph.nodes.vocabulary.effects import Effect, Pause
from reactgraph.nodes.vocabulary.run_settings import RunSettings

logger = logging.getLogger(__name__)

# OpenAI's reasoning families answer 400 to `stop` on chat completions.
NO_STOP_PREFIXES = ("o1", "o3", "o4", "gpt-5")
MAX_BACKOFF_S = 30.0
MIN_TRY_S = 0.05
"""The least time a try needs: one that the run's time budget would cut sooner is not made."""
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


class ModelRefused(ModelCallError):
    """The model's server refused the call with an HTTP status that another try cannot change
    (400, 401, 403, 404, 413, 422...: a bad key, an unknown model, a prompt too large): the run
    stops at that step, resumably (``resume``, with another model or key once it is fixed).
    Its cause (``__cause__``) is the client's error."""


class RunOutOfTime(Exception):
    """A model call the run's time budget (``max_run_seconds``) could not hold: abandoned when
    the time left ran out, or its next try (or the wait before it) would have ended past it, so
    none was started. Not a fault: the node shell ends the run ``budget_exhausted``
    (``reactgraph.nodes.loop.middleware.budgets.account``). ``prompt_tokens`` is what the abandoned
    call counts (``model.ask`` sets it: its prompt, when the try the time cut was in flight,
    ``abandoned``; a try its server answered with an error is billed nothing)."""

    def __init__(self, message: str, abandoned: bool = False) -> None:
        super().__init__(message)
        self.abandoned = abandoned
        self.prompt_tokens = 0


def timed_out(error: BaseException) -> bool:
    """Whether a try was given up on in flight (its deadline, the client's timeout): its server
    may have answered, and billed, all the same."""
    return isinstance(error, TimeoutError | deadlines.TimedOut) or "Timeout" in type(error).__name__


MOST_SAID_CHARS = 300
"""The most characters of a server's error message an error repeats."""


def server_said(error: BaseException) -> str:
    """A server's error message in one short line: the body's ``error.message`` when it has
    one, else the client's text (without the OpenAI SDK's "Error code: N - " prefix)."""
    body = getattr(error, "body", None)
    inner = body.get("error", body) if isinstance(body, Mapping) else None
    text = inner.get("message") if isinstance(inner, Mapping) else None
    if not isinstance(text, str) or not text.strip():
        text = str(error)
        prefix = f"Error code: {http_status(error)} - "
        text = text[len(prefix) :] if text.startswith(prefix) else text
    text = " ".join(text.split()) or type(error).__name__
    return text if len(text) <= MOST_SAID_CHARS else text[:MOST_SAID_CHARS] + "…"


def refused(error: BaseException, url: str | None) -> ModelRefused | None:
    """The ``ModelRefused`` a client's error stands for: an HTTP status of 400 or more that is
    no transient fault; None for any other error."""
    status = http_status(error)
    if status is None or status < 400 or is_transient(error):
        return None
    try:
        phrase = f" {HTTPStatus(status).phrase}"
    except ValueError:
        phrase = ""
    where = f" at {url}" if url else ""
    return ModelRefused(
        f"the model{where} refused the call: HTTP {status}{phrase} ({server_said(error)})"
    )


def accepts_stop(model_name: str | None) -> bool:
    """False for model families known to reject the ``stop`` parameter."""
    name = (model_name or "").lower().split("/")[-1]
    return not name.startswith(NO_STOP_PREFIXES)


def rejects_stop(error: BaseException) -> bool:
    """A 400 answer that names the ``stop`` parameter."""
    return http_status(error) == 400 and "stop" in str(error).lower()


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
    status = http_status(error)
    if status is not None and status >= 400:  # a 200 whose body could not be read falls through
        return status in (408, 409, 429) or status >= 500
    if isinstance(error, TimeoutError | ConnectionError | MalformedReply):
        return True
    if isinstance(error, IndexError | ValueError) and any(m in str(error) for m in _EMPTY_RESPONSE):
        return True
    return any(cls.__name__ in _TRANSIENT_NAMES for cls in type(error).__mro__)


def model_name(model: BaseChatModel) -> str | None:
    """The model's name as its client reports it, if it does."""
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


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
        self,
        error: Exception,
        attempt: int,
        stop: list[str] | None,
        settings: RunSettings,
        until: float | None = None,
    ) -> float:
        """Seconds to wait before the next attempt; raises when there is none (``RunOutOfTime``
        when the wait and a try after it would end past ``until``)."""
        if stop and self._stop_ok and rejects_stop(error):
            with self._lock:
                self._stop_ok = False
            logger.warning("the model rejects `stop`; calling it without (replies are cut here)")
            return 0.0
        if not is_transient(error):
            refusal = refused(error, self.url)
            if refusal is not None:
                raise refusal from error
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
        self._within(until, delay, error)
        logger.warning(
            "model call failed (%s); retry %d of %d in %.2f s",
            error,
            attempt,
            settings.model_retries,
            delay,
        )
        return delay

    @staticmethod
    def _within(until: float | None, wait: float, error: BaseException) -> None:
        """``RunOutOfTime`` when the run's time left (to ``until``, on ``time.monotonic``) ends
        before ``wait`` seconds from now, with room for a try after it."""
        if until is not None and time.monotonic() + wait + MIN_TRY_S >= until:
            raise RunOutOfTime(
                "the run's time budget (max_run_seconds) ran out during a model call "
                f"({type(error).__name__}); no further try was started",
                abandoned=timed_out(error),
            ) from error

    def call(
        self,
        messages: list[BaseMessage],
        config: RunnableConfig | None,
        stop: list[str] | None,
        settings: RunSettings,
        bound: Mapping[str, Any] | None = None,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
        constraint: Constraint | None = None,
        extra: Mapping[str, Any] | None = None,
        until: float | None = None,
    ) -> Generator[Effect, Any, Any]:
        """The model's reply message, with the quirks handled (a node body's ``yield from``).
        ``settings``: the run's, whose ``model_retries``, ``retry_backoff_s`` and
        ``max_completion_tokens`` bound the call. ``bound``: call arguments of the model's
        ``bind_tools`` (the tools), sent with each attempt; ``on_retry(attempt, error, delay)``
        is told of each retry (the traces).
        ``constraint``: what constrains the reply (``constrained_decoding``), unless this server
        rejected it: then it is sent without, once told (``constrained``). ``extra``: more
        call arguments (a middleware's ``model_settings``).
        rejected it: then it is sent without, once told (``constrained``).
        ``until``: when the run's time budget ends (``time.monotonic``; None: no time budget):
        each try's deadline is at most the time left, and no try or backoff starts that would
        end past it (``RunOutOfTime``)."""
        attempt, plain = 0, bool(bound) and self._tools_plain
        active = constraint is not None and not constrained.refused(self.url)
        while True:
            attempt += 1
            chosen = constraint if active else None
            tools = bound if chosen is None or chosen.bound is None else chosen.bound
            own = dict(extra or {})
            # A middleware's request-body fields (a cache hint) go with the constraint's.
            body = {**(own.pop("extra_body", None) or {}), **(chosen.body if chosen else {})}
            arguments = {**(tools or {}), **own, **self._arguments(stop, settings, body)}
            deadline = self.deadline
            if until is not None:
                left = until - time.monotonic()
                if left <= 0:
                    raise RunOutOfTime(
                        "the run's time budget (max_run_seconds) ran out before a model call"
                    )
                deadline = left if deadline is None else min(deadline, left)
            call = ModelCall(self.model, messages, config, arguments, deadline, plain)
            try:
                return (yield call)
            except StreamCut as error:
                if plain:
                    yield Pause(self._on_error(error, attempt, stop, settings, until))
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
                if is_transient(error):
                    self._within(until, 0.0, error)  # the time left ran out on this try
                delay = self._on_error(error, attempt, stop, settings, until)
                if on_retry is not None:
                    on_retry(attempt, error, delay)
                yield Pause(delay)
