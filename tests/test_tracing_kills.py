"""One trace through a SIGKILL and a resume in another process: the run's trace context is in
its checkpoint (``reactgraph.nodes.loop.middleware.tracing``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kills

SCRIPT = r"""
import json, os, signal, sys
from langchain_core.tools import tool
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

class ToFile(SpanExporter):
    def export(self, spans):
        with open(sys.argv[3], "a") as out:
            for s in spans:
                out.write(json.dumps({
                    "name": s.name,
                    "trace": f"{s.context.trace_id:032x}",
                    "span": f"{s.context.span_id:016x}",
                    "parent": f"{s.parent.span_id:016x}" if s.parent else None,
                    "attributes": dict(s.attributes or {}),
                }) + "\n")
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ToFile()))
trace.set_tracer_provider(provider)

from reactgraph import build_graph
from reactgraph.storage.database import open_db
from tests.fakes import three_turn_model

@tool
def echo(text: str) -> str:
    "Echo the input."
    if text == "2" and sys.argv[2] == "ask":
        os.kill(os.getpid(), signal.SIGKILL)
    return f"echo: {text}"

config = {"configurable": {"thread_id": "killed"}}
with open_db(sys.argv[1]) as (saver, store):
    graph = build_graph("transcript", model=three_turn_model(), tools=[echo], checkpointer=saver)
    if sys.argv[2] == "ask":
        graph.invoke({"question": "count"}, config)
    else:
        out = graph.invoke(None, config)
        print(json.dumps({"status": out["status"], "trace": out["trace"]}))
"""


def in_a_process(db: Path, step: str, spans: Path) -> subprocess.CompletedProcess[str]:
    """``SCRIPT``'s ``step`` (ask, resume) on ``db`` in a process of its own, its spans
    exported to ``spans``."""
    root = Path(__file__).resolve().parent.parent
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(db), step, str(spans)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def spans_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_killed_and_resumed_in_another_process_is_one_trace(tmp_path: Path) -> None:
    db, first, second = tmp_path / "runs.db", tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    killed = in_a_process(db, "ask", first)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    before = spans_of(first)
    # The first turn's spans and the second's model call were exported before the kill; the
    # run span and the second turn's died with the process.
    names = [s["name"] for s in before]
    assert names == ["chat scripted", "execute_tool echo", "reactgraph.turn 1", "chat scripted"]
    (trace_id,) = {s["trace"] for s in before}

    resumed = in_a_process(db, "resume", second)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    out = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert out["status"] == "answered"
    after = spans_of(second)
    assert {s["trace"] for s in after} == {trace_id}
    assert out["trace"]["traceparent"].split("-")[1] == trace_id
    (segment,) = [s for s in after if s["name"] == "invoke_agent transcript"]
    # The segment hangs under the killed process's run span, whose id the checkpoint kept.
    assert segment["parent"] == out["trace"]["traceparent"].split("-")[2]
    assert before[2]["parent"] == segment["parent"]  # turn 1 hung under the run span
    assert segment["attributes"]["reactgraph.resumed"] is True
    assert segment["attributes"]["reactgraph.status"] == "answered"
    assert segment["attributes"]["reactgraph.turns"] == 3
    turns = [s["name"] for s in after if s["name"].startswith("reactgraph.turn")]
    assert turns == ["reactgraph.turn 2", "reactgraph.turn 3"]
