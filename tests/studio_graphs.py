"""The graphs `langgraph dev` serves to the chat tests: every variant as ``graphs/studio.py``
builds it, plus a ``slow`` tool that holds its Observation until the test lets it go (it waits
for the file ``$REACTGRAPH_TEST_RELEASE/<input>`` to exist), so a test can look at the chat
while a tool runs, and a ``send`` tool whose every Action waits for a person's approval (a
run's context may name others); ``snapshots``, whose ``messages`` are copied in full every 3
updates; and ``budgets``, a run capped at 300 tokens on a scripted model that reports 120 a
call and searches on and on (warned after its second call, stopped at its third)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from langchain_core.messages import BaseMessage
from langchain_core.tools import tool

from reactgraph import VARIANTS, build_graph
from reactgraph.scripted import ScriptedChatModel
from reactgraph.studio import _model
from reactgraph.tools import calculator, search_tools

# The longest a slow call waits when the test never releases it.
LONGEST_WAIT_S = 60.0


@tool
def slow(name: str) -> str:
    """Wait until the test releases this call, then say so."""
    folder = Path(os.environ.get("REACTGRAPH_TEST_RELEASE") or ".")
    marker = folder / name.strip()
    (folder / f"{name.strip()}.started").touch()
    deadline = time.monotonic() + LONGEST_WAIT_S
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"released {name.strip()}"


@tool
def send(text: str) -> str:
    """Send a message to the team."""
    return f"sent {text}"


TOOLS = [*search_tools(), calculator, slow, send]
globals().update(
    {
        name: build_graph(name, model=_model(), tools=TOOLS, tool_timeout=120, approve=["send"])
        for name in VARIANTS
    }
)

# The transcript variant storing ``messages`` in full every 3 updates instead of every
# SNAPSHOT_EVERY, so a test reaches the periodic full copy in two runs.
snapshots = build_graph("transcript", model=_model(), tools=[*search_tools(), calculator, slow])
snapshots.channels["messages"].snapshot_frequency = 3


def _search_on(messages: list[BaseMessage]) -> str:
    """A reply that searches once more: a new topic each turn, never an answer."""
    done = sum(str(m.content).startswith("Observation:") for m in messages)
    return f"Thought: Look further.\nAction: search[topic {done}]"


budgets = build_graph(
    "transcript",
    model=ScriptedChatModel(replies=[_search_on] * 10_000, fixed_usage=(100, 20)),
    tools=TOOLS,
    max_run_tokens=300,
)
