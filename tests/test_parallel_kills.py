"""A run killed (SIGKILL) while the slower of two parallel calls runs, then resumed in another
process: the call that had finished is not run again; only the one in flight runs again. In a
subprocess each, sync and async, both action formats."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Real processes killed: `make test-kills` runs them, `make test` does not.
pytestmark = pytest.mark.kills

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys, time
    sys.path.insert(0, os.getcwd())
    from langchain_core.tools import tool
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from reactgraph import build_graph
    from tests.fakes import FakeChatModel, calls

    db, mode, action_format, work, phase = sys.argv[1:6]
    kept = os.path.join(work, "kept")

    def log(line):
        with open(os.path.join(work, "tools.log"), "a") as out:
            out.write(line + "\\n")

    def watched(real):
        # The finished call's record stored: the slow call may now be killed.
        def noted(writes):
            if any(isinstance(v, dict) and "outcome" in v for _, v in writes):
                open(kept, "w").close()

        def put_writes(self, config, writes, *args, **kwargs):
            out = real(self, config, writes, *args, **kwargs)
            noted(writes)
            return out

        async def aput_writes(self, config, writes, *args, **kwargs):
            out = await real(self, config, writes, *args, **kwargs)
            noted(writes)
            return out

        return aput_writes if asyncio.iscoroutinefunction(real) else put_writes

    SqliteSaver.put_writes = watched(SqliteSaver.put_writes)
    AsyncSqliteSaver.aput_writes = watched(AsyncSqliteSaver.aput_writes)

    @tool
    def fast(text: str) -> str:
        \"\"\"Answers at once.\"\"\"
        log(f"fast {text}")
        return f"fast {text}"

    @tool
    def slow(text: str) -> str:
        \"\"\"Answers late: killed the first time, once the other call is kept.\"\"\"
        log(f"slow {text}")
        if phase == "first":
            deadline = time.monotonic() + 120
            while not os.path.exists(kept) and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)
        return f"slow {text}"

    if action_format == "text":
        first = "Thought: both.\\nAction: fast[a]\\nAction: slow[b]"
    else:
        first = calls(("fast", {"text": "a"}), ("slow", {"text": "b"}))
    replies = [first, "Final Answer: done"] if phase == "first" else ["Final Answer: done"]
    model = FakeChatModel(replies=replies)
    config = {"configurable": {"thread_id": "kill"}}
    value = {"question": "q"} if phase == "first" else None

    def graph(saver):
        return build_graph(
            "transcript",
            model=model,
            tools=[fast, slow],
            action_format=action_format,
            parallel_tool_calls=True,
            checkpointer=saver,
        )

    if mode == "sync":
        with SqliteSaver.from_conn_string(db) as saver:
            out = graph(saver).invoke(value, config)
    else:
        async def main():
            async with AsyncSqliteSaver.from_conn_string(db) as saver:
                return await graph(saver).ainvoke(value, config)
        out = asyncio.run(main())
    print(out["status"], out["answer"])
    print([a["observation"] for a in out["turns"][0]["actions"]])
    """
)


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_kill_mid_turn_runs_only_the_call_in_flight_again(
    tmp_path: Path, mode: str, action_format: str
) -> None:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    db = str(tmp_path / "runs.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, str(script), db, mode, action_format, str(tmp_path)]
    first = subprocess.run([*args, "first"], cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert first.returncode == -9, first.stderr.decode()[-2000:]
    log = (tmp_path / "tools.log").read_text().splitlines()
    assert sorted(log) == ["fast a", "slow b"]
    again = subprocess.run([*args, "again"], cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr.decode()[-2000:]
    assert again.stdout.decode().splitlines()[0] == "answered done"
    assert "['fast a', 'slow b']" in again.stdout.decode()
    # The finished call did not run again; the one in flight at the kill did.
    assert sorted((tmp_path / "tools.log").read_text().splitlines()) == [
        "fast a",
        "slow b",
        "slow b",
    ]
