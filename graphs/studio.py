"""Every variant as a LangGraph server entry point (see ``langgraph.json``), one per name in the
registry.

They are compiled without a checkpointer: the server brings its own. The model comes from
``REACTGRAPH_MODEL``, ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (see ``.env.example``), and a
run's context can switch it (``model_name``, ``base_url``) along with the variant's settings.
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel

from reactgraph import VARIANTS, build_graph
from reactgraph.models import chat_model
from reactgraph.tools import default_tools


def _model() -> BaseChatModel:
    name = os.environ.get("REACTGRAPH_MODEL") or "gpt-4o-mini"
    base_url = os.environ.get("OPENAI_BASE_URL") or None
    # Without a key the graphs still load (and show in Studio); a call then answers 401.
    key = os.environ.get("OPENAI_API_KEY") or ("not-needed" if base_url else "missing-key")
    return chat_model(name, base_url=base_url, api_key=key)


# `langgraph.json` names each graph as an attribute of this module.
globals().update(
    {name: build_graph(name, model=_model(), tools=default_tools()) for name in VARIANTS}
)
