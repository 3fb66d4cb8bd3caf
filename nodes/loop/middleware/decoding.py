"""Constrained decoding as middleware (``constrained_decoding="gbnf"``): each model call of a
turn carries the step's grammar (the text format) or its tools bound strict (``tool_calls``) in
its request's ``model_settings``, made for the tools the request offers, so a middleware that
narrowed them narrows the grammar too. It sits inside the application's middleware, so every
call a middleware's handler makes is constrained; a summary's call is not."""

from __future__ import annotations

from typing import Any

from reactgraph.nodes.calling.binding import names_of
from reactgraph.nodes.loop import formats
from reactgraph.nodes.loop.middleware.scope import Scope
from reactgraph.nodes.loop.middleware.seam import Middleware


class Decoding(Middleware):
    """The grammar (or strict tools) of each turn's model call, when the run asks for it."""

    def wraps(self, hook: str, scope: Scope) -> bool:
        return scope.settings.constrained_decoding == "gbnf" and scope.purpose != "summary"

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        settings = scope.settings
        names = names_of(request.tools)
        chosen = None if names == tuple(scope.deps.action_names) else names
        forced = scope.purpose == "forced"
        extra = formats.of(settings).decoding(scope.deps, settings, forced, chosen)
        return (
            yield from call(request.override(model_settings={**request.model_settings, **extra}))
        )
