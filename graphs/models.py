"""The public name of the chat model factory: ``reactgraph.models.chat_model`` (its code is
model calling's, ``reactgraph.nodes.calling.clients``)."""

from reactgraph.nodes.calling.clients import DEFAULT_TIMEOUT_S, chat_model

__all__ = ["DEFAULT_TIMEOUT_S", "chat_model"]
