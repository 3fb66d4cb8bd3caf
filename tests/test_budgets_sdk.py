"""A deployment's budget through `langgraph dev` and the official SDK client: the server's
``REACTGRAPH_MAX_RUN_*`` variables are a ceiling a run's context, sent by any client, can lower
and never raise or remove, in every variant; Studio's form (the context schema) shows it; a
model server reporting negative usage does not lower a served run's spend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reactgraph import VARIANTS
from tests.fakes import FakeOpenAIServer, seed_responder
from tests.langgraph_dev import LANGGRAPH, langgraph_dev

pytestmark = [pytest.mark.slow, pytest.mark.servers]

QUESTION = {"type": "human", "content": "How many years apart?"}
SERVER_BUDGET = {
    "REACTGRAPH_MAX_RUN_TOKENS": "1000000",
    "REACTGRAPH_MAX_RUN_SECONDS": "600",
    "REACTGRAPH_MAX_RUN_COST": "1000",
    "REACTGRAPH_TOKEN_PRICES": "1,2",
    "REACTGRAPH_TOOL_CALL_LIMITS": "calculator=0",
}
# What a client sends to lift each of them.
LIFTED = {
    "max_run_tokens": 10**12,
    "max_run_seconds": 10**9,
    "max_run_cost": 10**9,
    "token_prices": [0, 0],
    "tool_call_limits": {"calculator": 99},
}


def test_a_clients_context_cannot_lift_the_servers_budget(tmp_path: Path) -> None:
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    from langgraph_sdk import get_sync_client

    model = FakeOpenAIServer()
    model.responder = seed_responder
    served = {"model_name": "gpt-4o-mini", "base_url": model.url}
    try:
        with langgraph_dev(tmp_path, None, env=SERVER_BUDGET) as url:  # graphs/studio.py
            client = get_sync_client(url=url)
            for variant in VARIANTS:
                out = ask(client, variant, {**served, **LIFTED})
                kept = out["settings"]
                assert kept["max_run_tokens"] == 1_000_000, variant
                assert (kept["max_run_seconds"], kept["max_run_cost"]) == (600, 1000), variant
                assert kept["token_prices"] == [1, 2] and kept["tool_call_limits"] == {
                    "calculator": 0
                }, variant
                (calculator,) = [t for t in out["turns"] if t["action"] == "calculator"]
                assert "Not run: calculator may be called at most 0" in calculator["observation"]
                assert out["usage"]["cost"] > 0 and "calculator" not in out["usage"]["tool_calls"]
            # Lowering is the client's to do.
            lowered = ask(client, "transcript", {**served, "max_run_tokens": 1})
            assert lowered["status"] == "budget_exhausted"
            assert lowered["budget"]["budget"] == "max_run_tokens"
            assert lowered["budget"]["limit"] == 1
            # A model server reporting negative counts cannot lower the spend under it either.
            model.usage_sent = {"completion_tokens": -300_000, "total_tokens": -299_000}
            hostile = ask(client, "transcript", {**served, "max_run_tokens": 500})
            assert hostile["status"] == "budget_exhausted"
            assert hostile["usage"]["total_tokens"] >= 500
            assistant = client.assistants.search(graph_id="transcript")[0]["assistant_id"]
            form = client.assistants.get_schemas(assistant)["context_schema"]["properties"]
            assert form["max_run_tokens"]["default"] == 1_000_000
            assert "At most: 1000000 (this server's budget" in form["max_run_tokens"]["description"]
            assert "At most: calculator=0" in form["tool_call_limits"]["description"]
            assert "Fixed by this server: 1,2" in form["token_prices"]["description"]
    finally:
        model.close()


def ask(client: Any, variant: str, context: dict[str, Any]) -> dict[str, Any]:
    thread = client.threads.create()["thread_id"]
    return client.runs.wait(thread, variant, input={"messages": [QUESTION]}, context=context)
