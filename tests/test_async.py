"""Every variant under ``ainvoke`` with the scripted model: the async twins of the nodes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from reactgraph import build_graph
from tests.fakes import ToolLog, action, answer, fake_model, prompt_text


def test_transcript_async_cap_and_answer() -> None:
    model = fake_model(action("echo", "1"), "Final Answer: forced")
    graph = build_graph("transcript", model=model, tools=[ToolLog().echo()], max_turns=1)
    out = asyncio.run(graph.ainvoke({"question": "q"}))
    assert (out["status"], out["answer"]) == ("turn_limit", "forced")
    assert model.stops == [["Observation:"], ["Observation:"]]


def test_notes_async(tmp_path: Path) -> None:
    model = fake_model("Action: update_notes[plan]", action("echo", "x"), answer("done"))
    graph = build_graph("notes", model=model, tools=[ToolLog().echo()], notes_dir=str(tmp_path))
    out = asyncio.run(graph.ainvoke({"question": "q"}, {"configurable": {"thread_id": "a"}}))
    assert out["notes"] == "plan" and out["status"] == "answered"
    assert (tmp_path / "a.md").read_text() == "plan"


def test_compaction_async() -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 5)], answer("done"))
    summarizer = fake_model("the summary")

    def count(messages: list) -> int:
        text = prompt_text(messages)
        return 9_000 if "echo: 3" in text and "Progress so far" not in text else 100

    graph = build_graph(
        "compaction",
        model=model,
        tools=[ToolLog().echo()],
        context_window=10_000,
        keep_turns=1,
        token_counter=count,
        summarizer=summarizer,
    )
    out = asyncio.run(graph.ainvoke({"question": "q"}))
    assert out["summary"] == "the summary" and out["status"] == "answered"
    assert "the summary" in model.prompts[3] and "echo: 2" not in model.prompts[3]


def test_sync_tools_run_on_the_tool_threads_not_the_loops_executor() -> None:
    import threading

    from langchain_core.tools import tool

    seen: list[str] = []

    @tool
    def where(text: str) -> str:
        """Records the thread it runs on."""
        seen.append(threading.current_thread().name)
        return "here"

    model = fake_model(action("where", "x"), answer("done"))
    graph = build_graph("transcript", model=model, tools=[where])
    asyncio.run(graph.ainvoke({"question": "q"}))
    assert seen == [
        "reactgraph-worker"
    ]  # a daemon tool thread: a hung tool cannot hold up loop shutdown
