"""A known problem of `langgraph dev`, pinned: after a thread with checkpoints is deleted, the
in-memory runtime (``langgraph_runtime_inmem``) replaces its persisted checkpoint ``writes``
with a plain dict, so later writes are no longer saved to disk. After a restart, a later
thread's delta-channel state (``turns``, ``messages``) comes back empty. When this test fails,
upstream fixed it: drop the README's warning and this test."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes import FakeOpenAIServer, seed_responder
from tests.langgraph_dev import LANGGRAPH, langgraph_dev

pytestmark = pytest.mark.slow


def ask(client: Any, openai_server: FakeOpenAIServer) -> str:
    thread = client.threads.create()["thread_id"]
    context = {"model_name": "gpt-4o-mini", "base_url": openai_server.url}
    values = client.runs.wait(thread, "transcript", input={"question": "Q?"}, context=context)
    assert values["answer"] == "48"
    return thread


def test_a_thread_delete_stops_the_dev_server_saving_checkpoint_writes(
    tmp_path: Any, openai_server: FakeOpenAIServer
) -> None:
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    from langgraph_sdk import get_sync_client

    openai_server.responder = seed_responder
    with langgraph_dev(tmp_path) as url:
        client = get_sync_client(url=url)
        client.threads.delete(ask(client, openai_server))
        after = ask(client, openai_server)
    with langgraph_dev(tmp_path) as url:
        client = get_sync_client(url=url)
        after_delete = client.threads.get_state(after)["values"]
    assert after_delete.get("answer") == "48"  # the checkpoints themselves were saved
    # The upstream fault: the writes the delta channels are rebuilt from were not.
    assert not after_delete.get("messages") and not after_delete.get("turns"), (
        "langgraph dev now keeps checkpoint writes after a thread delete: "
        "remove the README's warning and this test"
    )
