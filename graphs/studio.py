"""Every variant as a LangGraph server entry point (see ``langgraph.json``), one per name in the
registry.

They are compiled without a checkpointer: the server brings its own. The model comes from
``REACTGRAPH_MODEL``, ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (see ``.env.example``), and a
run's context can switch it (``model_name``, ``base_url``) along with the variant's settings.
The tools are the bundled ones (unless ``REACTGRAPH_DEFAULT_TOOLS=0``) and those that
``REACTGRAPH_TOOLS`` names (``module:name`` or ``path/to/file.py:name``, separated by spaces).
``REACTGRAPH_APPROVE`` names the tools whose Actions wait for a person's decision (names
separated by spaces or commas, or ``all``): the server's policy (``approve_floor``), which a
run's ``approve`` context can extend but never reduce (``docs/approval-policy.md``).
``REACTGRAPH_MAX_RUN_TOKENS``, ``REACTGRAPH_MAX_RUN_COST``, ``REACTGRAPH_MAX_RUN_SECONDS`` and
``REACTGRAPH_TOOL_CALL_LIMITS`` (``search=5, calculator=20``) are the server's budget
(``budget_ceiling``), which a run's context can lower but never raise or remove; a cost budget
needs ``REACTGRAPH_TOKEN_PRICES`` (``0.15,0.60``), then fixed for every run (``docs/budgets.md``).
Set them in the environment, or in ``langgraph.json``'s ``env``.
"""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from reactgraph import VARIANTS, build_graph
from reactgraph.models import chat_model
from reactgraph.tools import default_tools
from reactgraph.tools.loading import tools_from_env


def _model() -> BaseChatModel:
    name = os.environ.get("REACTGRAPH_MODEL") or "gpt-4o-mini"
    base_url = os.environ.get("OPENAI_BASE_URL") or None
    # Without a key the graphs still load (and show in Studio); a call then answers 401.
    key = os.environ.get("OPENAI_API_KEY") or ("not-needed" if base_url else "missing-key")
    return chat_model(name, base_url=base_url, api_key=key)


def _tools() -> list[BaseTool]:
    bundled = os.environ.get("REACTGRAPH_DEFAULT_TOOLS", "1").strip().lower() not in ("0", "no")
    return [*(default_tools() if bundled else []), *tools_from_env()]


def approve() -> list[str]:
    """The tools ``REACTGRAPH_APPROVE`` names (spaces or commas between them), or ``all``."""
    return (os.environ.get("REACTGRAPH_APPROVE") or "").replace(",", " ").split()


# The server's budget: each budget's variable, and how its text is read.
CEILING_ENV: dict[str, tuple[str, type]] = {
    "max_run_tokens": ("REACTGRAPH_MAX_RUN_TOKENS", int),
    "max_run_cost": ("REACTGRAPH_MAX_RUN_COST", float),
    "max_run_seconds": ("REACTGRAPH_MAX_RUN_SECONDS", float),
    "tool_call_limits": ("REACTGRAPH_TOOL_CALL_LIMITS", str),  # NAME=N, separated by commas
}
PRICES_ENV = "REACTGRAPH_TOKEN_PRICES"


def budget_ceiling() -> dict[str, object]:
    """The server's budget from ``REACTGRAPH_MAX_RUN_TOKENS`` and its kin (empty or ``none``: no
    ceiling); ValueError naming the variable for a value that is not a number."""
    ceiling: dict[str, object] = {}
    for budget, (variable, kind) in CEILING_ENV.items():
        text = (os.environ.get(variable) or "").strip()
        if not text or text.lower() == "none":
            continue
        try:
            ceiling[budget] = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise ValueError(f"{variable} must be {what} (or none), got {text[:60]!r}") from None
    return ceiling


def token_prices() -> str | None:
    """``REACTGRAPH_TOKEN_PRICES`` (``INPUT,OUTPUT``: a million tokens' prices), or None."""
    return (os.environ.get(PRICES_ENV) or "").strip() or None


# `langgraph.json` names each graph as an attribute of this module.
globals().update(
    {
        name: build_graph(
            name,
            model=_model(),
            tools=_tools(),
            approve_floor=approve(),
            budget_ceiling=budget_ceiling(),
            token_prices=token_prices(),
        )
        for name in VARIANTS
    }
)
