"""Runs that survive SIGKILL: killed in one process at several points, resumed in another, with
the same answer, no completed tool call repeated and the notes intact. SQLite and Postgres."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from reactgraph import build_graph
from reactgraph.storage.backends import database_backend
from reactgraph.storage.database import (
    ThreadBusy,
    aopen_db,
    open_db,
    thread_lock,
    thread_status,
)
from tests.fakes import ToolLog, action, answer, fake_model

ROOT = Path(__file__).resolve().parents[1]

RUN = textwrap.dedent(
    """
    import json, os, re, signal, sys
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import tool
    from reactgraph import build_graph
    from reactgraph.storage.database import open_db
    from reactgraph.scripted import ScriptedChatModel
    from reactgraph.nodes.loop import notes as notes_module

    db, thread, point, mode, work = sys.argv[1:6]
    marker = os.path.join(work, "killed")

    def log(path, line):
        with open(os.path.join(work, path), "a") as f:
            f.write(line + "\\n")

    def kill_once(where):
        if point == where and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)

    @tool
    def echo(text: str, config: RunnableConfig) -> str:
        \"\"\"Echoes its input.\"\"\"
        key = config["configurable"]["idempotency_key"]
        log("tools.log", f"start {text} {key}")
        kill_once("tool")
        log("tools.log", f"done {text} {key}")
        if text == "2":
            kill_once("after_tool")
        return f"echo {text}"

    variant = {"notes": "notes", "compaction": "compaction"}.get(point, "transcript")

    def reply(messages):
        # The next step follows from the last echo in view, so a compacted window or a new
        # process continues where the run was.
        text = "\\n".join(str(m.content) for m in messages)
        seen = [int(n) for n in re.findall(r"echo (\\d+)", text)]
        step = max(seen) + 1 if seen else 0
        if "Progress so far" in text:
            kill_once("compaction")
        if step == 2:
            kill_once("model")
        if step >= 4:
            return "Final Answer: done after 4"
        if step == 1 and variant == "notes" and "step 1" not in text:
            return "Action: update_notes[- [x] step 1]"
        return f"Action: echo[{step}]"

    def summarize(messages):
        log("summaries.log", "summary")
        return "the summary"

    real_write = notes_module.FileNotes.write

    def write(self, thread_id, text, turn):
        real_write(self, thread_id, text, turn)
        if text:
            kill_once("notes")

    notes_module.FileNotes.write = write
    extra = {}
    if variant == "notes":
        extra = {"notes_dir": os.path.join(work, "notes")}
    if variant == "compaction":
        extra = {"context_window": 1000, "keep_turns": 1,
                 "summarizer": ScriptedChatModel(replies=[summarize] * 5),
                 "token_counter": lambda m: 10 if len(m) <= 6 or "Progress so far" in
                 str(m[1].content) else 900}
    with open_db(db) as (saver, store):
        graph = build_graph(variant, model=ScriptedChatModel(replies=[reply] * 20),
                            tools=[echo], checkpointer=saver, **extra)
        config = {"configurable": {"thread_id": thread}}
        out = graph.invoke({"question": "q"} if mode == "start" else None, config)
    print(json.dumps({k: out.get(k) for k in ("answer", "status", "notes", "summary")}))
    """
)


def run(db: str, thread: str, point: str, mode: str, work: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUN, db, thread, point, mode, str(work)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def kill_and_resume(db: str, thread: str, point: str, work: Path) -> dict:
    first = run(db, thread, point, "start", work)
    assert first.returncode == -9, first.stderr  # killed by SIGKILL
    second = run(db, thread, point, "resume", work)
    assert second.returncode == 0, second.stderr
    return json.loads(second.stdout.strip().splitlines()[-1])


def completed_tool_calls(work: Path) -> list[str]:
    return [
        line for line in (work / "tools.log").read_text().splitlines() if line.startswith("done")
    ]


@pytest.mark.kills
def test_a_tool_call_cut_off_by_a_kill_runs_again_with_the_same_idempotency_key(
    tmp_path: Path,
) -> None:
    out = kill_and_resume(str(tmp_path / "runs.sqlite"), "t", "after_tool", tmp_path)
    assert out["answer"] == "done after 4"
    done = [line.split() for line in (tmp_path / "tools.log").read_text().splitlines()]
    again = [key for kind, text, key in done if kind == "done" and text == "2"]
    assert again == ["t/1/3", "t/1/3"]  # at least once, and recognisably the same call


@pytest.mark.kills
@pytest.mark.parametrize("point", ["tool", "model", "notes", "compaction"])
def test_a_run_killed_at_any_point_resumes_in_a_new_process(tmp_path: Path, point: str) -> None:
    out = kill_and_resume(str(tmp_path / "runs.sqlite"), "t", point, tmp_path)
    assert out["answer"] == "done after 4" and out["status"] == "answered"
    calls = completed_tool_calls(tmp_path)
    assert len(calls) == len(set(calls)), calls  # no completed tool call ran twice
    if point == "notes":
        assert out["notes"] == "- [x] step 1"
        assert (tmp_path / "notes" / "t.md").read_text() == "- [x] step 1"
    if point == "compaction":
        assert out["summary"] == "the summary"
        assert (tmp_path / "summaries.log").read_text().count("summary") == 1


@pytest.mark.kills
def test_finished_and_interrupted_threads_are_told_apart(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    run(db, "killed", "model", "start", tmp_path)
    (tmp_path / "killed").unlink()
    with open_db(db) as (saver, _):
        graph = build_graph(
            "transcript", model=fake_model(answer("x")), tools=[], checkpointer=saver
        )
        graph.invoke({"question": "q"}, {"configurable": {"thread_id": "done"}})
        assert thread_status(graph, "done") == "finished"
        assert thread_status(graph, "killed") == "interrupted"
        assert thread_status(graph, "never") == "unknown"


def test_the_async_path_resumes_with_async_sqlite(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    config = {"configurable": {"thread_id": "a"}}
    log = ToolLog()

    def broken(messages: list) -> str:
        raise ConnectionError("network down")

    async def main() -> dict:
        async with aopen_db(db) as (saver, _):
            model = fake_model(action("echo", "1"), broken)
            graph = build_graph(
                "transcript", model=model, tools=[log.echo()], checkpointer=saver, model_retries=0
            )
            with pytest.raises(Exception, match="network down"):
                await graph.ainvoke({"question": "q"}, config)
        async with aopen_db(db) as (saver, _):
            graph = build_graph(
                "transcript", model=fake_model(answer("ok")), tools=[log.echo()], checkpointer=saver
            )
            return await graph.ainvoke(None, config)

    out = asyncio.run(main())
    assert out["answer"] == "ok" and log.calls == [("echo", "1")]


def test_two_workers_never_hold_the_same_thread(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    with thread_lock(db, "t"):
        with pytest.raises(ThreadBusy), thread_lock(db, "t"):
            pass
        with thread_lock(db, "other"):
            pass
    with thread_lock(db, "t"):
        pass  # released by its holder


# --- PostgreSQL: the scale-out path ----------------------------------------------------------


def database_at(kind: str, folder: Path) -> str:
    """A database of the backend ``kind`` for a test: a new SQLite file in ``folder``, or the
    PostgreSQL test server."""
    return TEST_ADDRESSES[kind](folder)


# A test address for each registered storage backend, by its name (the ``db`` fixture's params;
# tests/test_backends.py checks that every backend has one).
TEST_ADDRESSES: dict[str, Callable[[Path], str]] = {
    "sqlite": lambda folder: str(folder / "runs.sqlite"),
    "postgres": lambda folder: postgres_url(),
}


def postgres_url() -> str:
    """The test server: REACTGRAPH_TEST_POSTGRES_URL, else this project's local one."""
    url = os.environ.get(
        "REACTGRAPH_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception as error:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI and unreachable at {url}: {error}")
        pytest.skip(f"no PostgreSQL at {url} (set REACTGRAPH_TEST_POSTGRES_URL): {error}")
    return url


@pytest.fixture
def postgres(request: pytest.FixtureRequest) -> str:
    url = postgres_url()
    assert database_backend(url).name == "postgres"
    return url


@pytest.mark.kills
def test_postgres_run_killed_in_one_process_is_resumed_by_another(
    postgres: str, tmp_path: Path
) -> None:
    thread = f"pg-{os.getpid()}-{tmp_path.name}"
    out = kill_and_resume(postgres, thread, "tool", tmp_path)
    assert out["answer"] == "done after 4"
    calls = completed_tool_calls(tmp_path)
    assert len(calls) == len(set(calls))


def test_postgres_notes_in_the_store_and_the_thread_lock(postgres: str) -> None:
    thread = f"pg-notes-{os.getpid()}"
    with open_db(postgres) as (saver, store):
        model = fake_model("Action: update_notes[kept in postgres]", answer("ok"))
        graph = build_graph("notes", model=model, tools=[], checkpointer=saver, store=store)
        out = graph.invoke({"question": "q"}, {"configurable": {"thread_id": thread}})
        assert out["notes"] == "kept in postgres"
        assert store.get(("reactgraph", "notes"), thread).value["text"] == "kept in postgres"
    with thread_lock(postgres, thread), pytest.raises(ThreadBusy), thread_lock(postgres, thread):
        pass
