"""Prefix-cache hints as middleware: each model call to an OpenAI-compatible server carries the
hint its server takes (``reactgraph.nodes.calling.cachehints``: OpenAI's ``prompt_cache_key``,
made from the run's thread; llama.cpp's ``cache_prompt``), learned from that server's earlier
replies, never asked for; a call whose server refuses the hint is sent again at once without
it (that server then gets none). It sits outside the budgets and the traces, so a call sent
again is counted and traced as the actual call it is."""

from __future__ import annotations

from typing import Any

from reactgraph.nodes.calling import cachehints
from reactgraph.nodes.calling.providers import model_url
from reactgraph.nodes.calling.streamchoice import openai_family
from reactgraph.nodes.loop.middleware.scope import Scope
from reactgraph.nodes.loop.middleware.seam import Middleware


def _with(settings: dict[str, Any], hints: dict[str, Any]) -> dict[str, Any]:
    """The request's model settings with the hints in them (request-body fields merged)."""
    merged = {**settings, **hints}
    if "extra_body" in hints:
        merged["extra_body"] = {**(settings.get("extra_body") or {}), **hints["extra_body"]}
    return merged


class PromptCache(Middleware):
    """Each call to an OpenAI-compatible server with the prefix-cache hint its server takes."""

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        model = request.model
        url = model_url(model) if openai_family(model) else None
        if url is None:
            return (yield from call(request))
        thread = scope.state.get("thread_id") or (scope.config.get("configurable") or {}).get(
            "thread_id"
        )
        hints = cachehints.hints(url, thread if isinstance(thread, str) else None)
        sent = request
        if hints:
            sent = request.override(model_settings=_with(dict(request.model_settings), hints))
        try:
            response = yield from call(sent)
        except Exception as error:
            if hints and cachehints.rejects(url, error):
                return (yield from call(request))
            raise
        if response.result:
            cachehints.note_reply(url, response.result[-1])
        return response
