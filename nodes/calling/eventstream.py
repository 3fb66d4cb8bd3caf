"""A complete chat completion sent back to a streamed request, as some proxies and servers do,
made into the event stream the request asked for: its content, tool calls, finish reason and
usage as the chunks a streamed reply would have carried, so the client reads it as it reads any
stream (``transport`` applies it to each response).

Only a 200 reply to a ``stream: true`` chat-completions request whose type is not an event stream
is read here, at most ``MAX_BODY`` bytes of it. A body that is no chat completion (not UTF-8, not
JSON, no ``choices``) is handed on as it came, for the client to refuse as malformed.
"""

from __future__ import annotations

import json
from typing import Any

from reactgraph.nodes.calling import replies
from reactgraph.nodes.calling.replies import MalformedReply

MAX_BODY = 16 * 1024 * 1024  # a reply of 4,096 tokens is about 16 KB


def unstreamed(request: Any, response: Any) -> bool:
    """Whether ``response`` is a plain 200 reply to a streamed chat-completions request."""
    if response.status_code != 200 or request.method != "POST":
        return False
    if "event-stream" in response.headers.get("content-type", ""):
        return False
    if not request.url.path.endswith("/chat/completions"):
        return False
    try:
        return json.loads(request.content).get("stream") is True
    except (ValueError, AttributeError, TypeError):  # a streamed request body, or not JSON
        return False


def gathered(body: bytearray, chunk: bytes) -> None:
    """``chunk`` added to ``body``; a body past ``MAX_BODY`` is a malformed reply."""
    body += chunk
    if len(body) > MAX_BODY:
        raise MalformedReply(f"a plain reply to a streamed request over {MAX_BODY} bytes")


def _delta(message: dict[str, Any]) -> dict[str, Any]:
    delta = {key: value for key, value in message.items() if value is not None}
    calls = delta.get("tool_calls")
    if isinstance(calls, list):
        delta["tool_calls"] = [
            {**call, "index": n} if isinstance(call, dict) else call for n, call in enumerate(calls)
        ]
    return delta


def _choices(completion: Any) -> list[dict[str, Any]] | None:
    """A completion's choices, each with its message; None for a body that is no
    completion."""
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if not isinstance(choices, list) or not choices:
        return None
    if not all(isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices):
        return None
    return choices


def _chunk_choice(n: int, choice: dict[str, Any]) -> dict[str, Any]:
    """A completion's choice as a chunk's: its message as the delta."""
    return {
        "index": choice.get("index", n),
        "delta": _delta(choice["message"]),
        "finish_reason": choice.get("finish_reason"),
        "logprobs": choice.get("logprobs"),
    }


def as_events(body: bytes) -> bytes | None:
    """The event stream carrying the completion in ``body``, or None if it holds none."""
    try:
        completion = json.loads(body)
    except ValueError:
        return None
    choices = _choices(completion)
    if choices is None:
        return None
    head = {k: v for k, v in completion.items() if k not in ("choices", "usage", "object")}
    head["object"] = "chat.completion.chunk"
    events = [{**head, "choices": [_chunk_choice(n, c) for n, c in enumerate(choices)]}]
    if isinstance(completion.get("usage"), dict):
        events.append({**head, "choices": [], "usage": completion["usage"]})
    lines = [f"data: {json.dumps(event)}\n\n" for event in events]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def reply(response: Any, body: bytes) -> Any:
    """The response to hand on in place of ``response``, whose ``body`` was read: the body as
    events when it holds a completion, else as it came (without its transfer headers: it is
    whole and decoded now)."""
    events = as_events(body)
    if events is None:
        replies.note_unreadable()  # the client's "no chunks" then means this, not a cut stream
    kind = "text/event-stream" if events is not None else response.headers.get("content-type")
    return type(response)(
        200,
        headers={"content-type": kind or "application/octet-stream"},
        content=events if events is not None else body,
        request=response.request,
    )
