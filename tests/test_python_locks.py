"""Two resumes of one thread at once through the Python API (issue 57): a graph on a saver of
``open_db``/``aopen_db`` holds the thread's lock while it runs or edits it, as the command
line's ``ask`` and ``resume`` do, so the second caller, in another process or this one, through
``invoke``, ``ainvoke``, ``update_state`` or the command line, gets ``ThreadBusy`` and the
approved tool runs once. Real processes, on every storage backend."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import StructuredTool
from langgraph.types import Command

from reactgraph import build_graph
from reactgraph.storage import aopen_db, open_db
from reactgraph.storage.locks import ThreadBusy
from tests.fakes import action, fake_model
from tests.inprocess import run_main
from tests.test_cli import one_line_error

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CONFIG = {"configurable": {"thread_id": "t1"}}
APPROVE = {"decisions": [{"type": "approve"}]}

# A process that resumes thread t1 with an approval; its echo tool records the call, says it
# has started, and holds until the test lets it go.
RESUMER = """
import asyncio, pathlib, sys, time
from langchain_core.tools import StructuredTool
from langgraph.types import Command
from reactgraph import build_graph
from reactgraph.storage import aopen_db, open_db
from reactgraph.storage.locks import ThreadBusy
from tests.fakes import answer, fake_model

db, mode, folder = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])

def echo(text: str) -> str:
    with open(folder / "calls", "a") as calls:
        calls.write(text + "\\n")
    (folder / "entered").touch()
    while not (folder / "release").exists():
        time.sleep(0.05)
    return "echoed"

tool = StructuredTool.from_function(echo, name="echo", description="echo the input")
config = {"configurable": {"thread_id": "t1"}}
decision = Command(resume={"decisions": [{"type": "approve"}]})

def graph(saver):
    model = fake_model(answer("done"))
    return build_graph(
        "transcript", model=model, tools=[tool], checkpointer=saver, approve=["echo"],
        tool_timeout=600,  # the tool holds until the test lets it go
    )

async def resumed():
    async with aopen_db(db) as (saver, _):
        return await graph(saver).ainvoke(decision, config)

try:
    if mode == "invoke":
        with open_db(db) as (saver, _):
            out = graph(saver).invoke(decision, config)
    else:
        out = asyncio.run(resumed())
except ThreadBusy as error:
    print("busy:", error)
    sys.exit(3)
print("answer:", out["answer"])
"""


def resumer(db: str, mode: str, folder: Path) -> list[str]:
    return [sys.executable, "-c", RESUMER, db, mode, str(folder)]


def unused(text: str) -> str:
    raise AssertionError("only the resumers run the tool")


def waiting_thread(db: str) -> None:
    """Thread t1 of ``db``, stopped before ``echo[hi]`` for a person's decision."""
    tool = StructuredTool.from_function(unused, name="echo", description="echo the input")
    with open_db(db) as (saver, _):
        graph = build_graph(
            "transcript",
            model=fake_model(action("echo", "hi")),
            tools=[tool],
            checkpointer=saver,
            approve=["echo"],
            tool_timeout=600,  # the run keeps its settings: the resumer's tool holds
        )
        out = graph.invoke({"question": "q"}, CONFIG)
        assert out["__interrupt__"]


def wait_for(path: Path, process: subprocess.Popen[str], seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the first resumer ended: {process.communicate()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)


@pytest.mark.parametrize(("first", "second"), [("invoke", "ainvoke"), ("ainvoke", "invoke")])
def test_a_second_resume_at_once_is_busy_and_the_tool_runs_once(
    db: str, tmp_path: Path, first: str, second: str
) -> None:
    waiting_thread(db)
    holder = subprocess.Popen(
        resumer(db, first, tmp_path), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_for(tmp_path / "entered", holder)
        other = subprocess.run(
            resumer(db, second, tmp_path), cwd=ROOT, capture_output=True, text=True, timeout=300
        )
        assert other.returncode == 3, (other.stdout, other.stderr)
        assert other.stdout.strip() == "busy: thread t1 is running in another process"
        # This process too, through a state edit and both runs, and the command line's resume.
        tool = StructuredTool.from_function(unused, name="echo", description="echo the input")
        with open_db(db) as (saver, _):
            graph = build_graph(
                "transcript", model=fake_model(), tools=[tool], checkpointer=saver, approve="echo"
            )
            with pytest.raises(ThreadBusy):
                graph.update_state(CONFIG, {"question": "x"})
            with pytest.raises(ThreadBusy):
                graph.invoke(Command(resume=APPROVE), CONFIG)

        async def aresume() -> Any:
            async with aopen_db(db) as (saver, _):
                built = build_graph(
                    "transcript", model=fake_model(), tools=[tool], checkpointer=saver,
                    approve="echo",
                )  # fmt: skip
                return await built.ainvoke(Command(resume=APPROVE), CONFIG)

        with pytest.raises(ThreadBusy):
            asyncio.run(aresume())
        one_line_error(
            run_main("resume", "t1", "--db", db, "--base-url", "http://127.0.0.1:9/v1"),
            "thread t1 is running in another process",
        )
    finally:
        (tmp_path / "release").touch()
        out, err = holder.communicate(timeout=300)
    assert holder.returncode == 0, err
    assert out.strip() == "answer: done"
    assert (tmp_path / "calls").read_text() == "hi\n"  # the approved Action ran once
