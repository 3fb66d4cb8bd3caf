"""A run killed right after each of its stored writes, at every K a 3-turn run makes, on SQLite
and PostgreSQL, sync (as ``ask`` runs), sync through an application's middleware (a tool retry
and a model-call wrapper) and async (as a batch worker runs): the thread is never
taken for finished, resuming it ends with the answer and turns of an unkilled run, and a
completed tool call runs again only with the same idempotency key.

One subprocess per case imports everything once, then forks a child per K (the child is the
process that dies, by ``os._exit`` right after its K-th ``put_writes``), and another child to
read and resume the thread with fresh connections."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reactgraph.app.cli import main
from reactgraph.storage.database import new_record, open_db

# Real processes killed: `make test-kills` runs them, `make test` does not.
pytestmark = pytest.mark.kills

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import asyncio, contextlib, io, json, os, re, sys
    from langchain.agents.middleware import AgentMiddleware, ToolRetryMiddleware
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import tool
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from reactgraph import build_graph
    from reactgraph.app import recipe as worker
    from reactgraph.app.cli import main
    from reactgraph.graph import DURABILITY
    from reactgraph.storage.database import new_record, open_db
    from reactgraph.app.pool import Job
    from reactgraph.scripted import ScriptedChatModel
    from reactgraph.storage.snapshots import read_thread

    db, mode, work, prefix = sys.argv[1:5]
    sync = mode != "async"

    class Passthrough(AgentMiddleware):
        def wrap_model_call(self, request, handler):
            return handler(request)

    middleware = [ToolRetryMiddleware(initial_delay=0), Passthrough()]
    middleware = middleware if mode == "middleware" else []
    kill_at = [0]
    calls = [0]

    def counted(real):
        def put_writes(self, *args, **kwargs):
            out = real(self, *args, **kwargs)
            calls[0] += 1
            if calls[0] == kill_at[0]:
                os._exit(9)
            return out

        async def aput_writes(self, *args, **kwargs):
            out = await real(self, *args, **kwargs)
            calls[0] += 1
            if calls[0] == kill_at[0]:
                os._exit(9)
            return out

        return aput_writes if asyncio.iscoroutinefunction(real) else put_writes

    for saver_class in (SqliteSaver, PostgresSaver, AsyncSqliteSaver, AsyncPostgresSaver):
        if sync or saver_class.__name__.startswith("Async"):
            name = "put_writes" if sync else "aput_writes"
            setattr(saver_class, name, counted(getattr(saver_class, name)))

    @tool
    def echo(text: str, config: RunnableConfig) -> str:
        \"\"\"Echoes its input.\"\"\"
        key = config["configurable"]["idempotency_key"]
        with open(os.path.join(work, "tools.log"), "a") as log:
            log.write(f"{key.split('/')[0]} {text} {key}\\n")
        return f"echo {text}"

    def reply(messages):
        text = "\\n".join(str(m.content) for m in messages)
        seen = [int(n) for n in re.findall(r"echo (\\d+)", text)]
        step = max(seen) + 1 if seen else 0
        return "Final Answer: done after 2" if step >= 2 else f"Action: echo[{step}]"

    def model():
        return ScriptedChatModel(replies=[reply] * 10)

    worker.toolset = lambda *args: [echo]
    recipe = worker.Recipe("transcript", "scripted", None, 10.0, None, {}, db,
                           model_factory=model)

    def as_batch(thread):
        async def go():
            async with worker.open_runner(recipe) as run:
                return await run(Job(0, "q", thread))
        result = asyncio.run(go())
        assert result["error"] is None, result["error"]
        return {"answer": result["answer"], "turns": result["turns"]}

    def as_ask(thread, resume):
        # What `ask` and `resume` do: the record, the status, a stream with sync durability.
        config = {"configurable": {"thread_id": thread}}
        with open_db(db) as (saver, store):
            graph = build_graph("transcript", model=model(), tools=[echo], checkpointer=saver,
                                middleware=middleware)
            payload = {"question": "q"}
            if resume:
                status, _ = read_thread(graph, thread)
                assert status != "finished", status
                payload = None if status == "interrupted" else payload
            else:
                new_record(thread, "q", "transcript", "scripted", None, None, {}).save(store)
            for _ in graph.stream(payload, config, stream_mode="updates",
                                  durability=DURABILITY):
                pass
            values = graph.get_state(config).values
        return {"answer": values["answer"], "turns": len(values["turns"])}

    def listed(thread):
        with contextlib.redirect_stdout(io.StringIO()) as shown:
            assert main(["threads", "--db", db]) == 0
        row = [line for line in shown.getvalue().splitlines() if thread in line]
        assert row, shown.getvalue()
        return row[0].split()[2]

    def in_child(body):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                out = body()
                with open(os.path.join(work, "child.json"), "w") as f:
                    json.dump(out, f)
            except BaseException as error:
                import traceback
                traceback.print_exc()
                code = 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        out = None
        if os.path.exists(os.path.join(work, "child.json")):
            with open(os.path.join(work, "child.json")) as f:
                out = json.load(f)
            os.unlink(os.path.join(work, "child.json"))
        return os.waitstatus_to_exitcode(status), out

    def run(thread, resume=False):
        return as_ask(thread, resume) if sync else as_batch(thread)

    code, plain = in_child(lambda: {**run(prefix + "plain"), "writes": calls[0]})
    assert code == 0, code
    print(json.dumps({"plain": plain}), flush=True)
    for k in range(1, plain["writes"] + 1):
        thread = f"{prefix}k{k:02d}"
        kill_at[0] = k
        killed, _ = in_child(lambda: run(thread))
        kill_at[0] = 0
        def check():
            return {"listed": listed(thread) if sync else None,
                    **run(thread, resume=True)}
        code, out = in_child(check)
        print(json.dumps({"k": k, "killed": killed, "code": code, **(out or {})}), flush=True)
    """
)


@pytest.mark.parametrize("mode", ["sync", "middleware", "async"])
def test_a_kill_after_any_stored_write_resumes_to_the_same_end(
    db: str, mode: str, tmp_path: Path
) -> None:
    prefix = f"kill{time.time_ns()}-"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, db, mode, str(tmp_path), prefix],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "400"},  # `threads` prints whole thread names
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    plain = lines[0]["plain"]
    assert plain["turns"] == 3 and plain["writes"] >= 6, plain
    cases = lines[1:]
    assert [c["k"] for c in cases] == list(range(1, plain["writes"] + 1))
    for case in cases:
        assert case["killed"] == 9, case  # it died right after its K-th stored write
        assert case["code"] == 0, (case, done.stderr[-3000:])
        if mode != "async":
            assert case["listed"] == "interrupted", case  # `threads` never says finished
        assert (case["answer"], case["turns"]) == ("done after 2", 3), case
    # A completed tool call runs again only as the same call (the same idempotency key).
    keys: dict[tuple[str, str], set[str]] = {}
    for line in (tmp_path / "tools.log").read_text().splitlines():
        thread, text, key = line.split()
        keys.setdefault((thread, text), set()).add(key)
    assert all(len(seen) == 1 for seen in keys.values()), keys


def test_a_run_killed_before_its_first_checkpoint_is_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LangGraph saves the first checkpoint in the background while the first step runs, so a
    kill right after the first ``put_writes`` can leave the run's record and no checkpoint (the
    matrix's K=1 meets it now and then). ``threads`` and ``show`` call that interrupted."""
    db = str(tmp_path / "runs.sqlite")
    with open_db(db) as (_, store):
        new_record("early", "q", "transcript", "m", None, None, {}).save(store)
    capsys.readouterr()
    assert main(["threads", "--db", db]) == 0
    row = [line for line in capsys.readouterr().out.splitlines() if "early" in line]
    assert row and row[0].split()[2] == "interrupted", row
    assert main(["show", "early", "--db", db]) == 0
    assert "interrupted" in capsys.readouterr().out
