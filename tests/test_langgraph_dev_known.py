"""Known problems of `langgraph dev`, pinned (the warnings in docs/chat-clients.md).

- After a thread with checkpoints is deleted, the in-memory runtime (``langgraph_runtime_inmem``)
  replaces its persisted checkpoint ``writes`` with a plain dict, so later writes are no longer
  saved to disk. After a restart, a later thread's delta-channel state (``turns``, ``messages``)
  comes back empty. When its test fails, upstream fixed it: drop the warning and the test.
- A SIGKILL may lose a thread's state, however long after its run. The periodic writes to
  ``.langgraph_api/`` (every 10 s) keep the thread list, but the checkpoints only while the
  runtime's first checkpointer holds the registration of their files: each request whose
  checkpointer has an ``unpack_hook`` (``langgraph_runtime_inmem.checkpoint.Checkpointer``)
  builds another saver, whose dicts (loaded from disk, then set aside for the first saver's)
  take the files over. From then on a periodic write holds that copy, as old as its request,
  and none at all once it is collected. Seen in CI and under load: the thread listed, its state
  empty, after two periodic writes that followed the run. The test checks what holds: the
  thread is listed, and its state is whole or absent, never partial."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import tests.langgraph_dev as dev
from tests.fakes import FakeOpenAIServer, seed_responder
from tests.langgraph_dev import LANGGRAPH, langgraph_dev

pytestmark = [pytest.mark.slow, pytest.mark.servers]


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
        "remove the warning in docs/chat-clients.md and this test"
    )


def flushed(folder: Path, since: float) -> bool:
    """Whether `langgraph dev` has written every one of its files since ``since``."""
    files = list((folder / ".langgraph_api").glob("*.pckl"))
    return bool(files) and all(f.stat().st_mtime > since for f in files)


def test_a_sigkill_of_the_dev_server_keeps_the_thread_and_its_state_whole_or_none(
    tmp_path: Path, openai_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    from langgraph_sdk import get_sync_client

    def kill(server: Any) -> None:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(60)

    openai_server.responder = seed_responder
    with monkeypatch.context() as patched:
        patched.setattr(dev, "stop", kill)
        with langgraph_dev(tmp_path) as url:
            thread = ask(get_sync_client(url=url), openai_server)
            written = time.time()
            deadline = written + 300
            while not flushed(tmp_path, written):  # its next periodic write, after the run
                assert time.time() < deadline, "langgraph dev never wrote its files"
                time.sleep(0.5)
    with langgraph_dev(tmp_path) as url:
        client = get_sync_client(url=url)
        client.threads.get(thread)  # the thread is still listed
        after_kill = client.threads.get_state(thread)["values"]
    if after_kill:  # its state came back whole, or (the upstream fault above) not at all
        assert after_kill.get("answer") == "48", after_kill
        assert len(after_kill["turns"]) == 4 and after_kill["messages"]
