"""Calls in flight at a SIGKILL are counted (``reactgraph.nodes.loop.middleware.sending``): a
run killed while its server holds a model call, resumed in another process, counts every call
its server saw, each once, at least its prompt's tokens. Through the Python API (``invoke`` and
``ainvoke``, killed twice in one step), ``reactgraph ask`` then ``resume``, and ``reactgraph
batch`` run again.

The server reports no usage, so every count is the token counter's and a lost call's prompt is
exactly its step's: the figures are compared with an unkilled run's."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from reactgraph.scripted import DEMO_QUESTION
from tests.fakes import FakeOpenAIServer, Fault, seed_responder
from tests.inprocess import run_main
from tests.test_cli import popen
from tests.test_pool import running, workers_of

pytestmark = pytest.mark.kills

ROOT = Path(__file__).resolve().parents[1]
MODEL = "gpt-4"  # tiktoken's cl100k_base, in every process alike
WAIT_S = 120  # a bound against a hang, never a timing

CHILD = r"""
import asyncio, json, sys
from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.storage.database import aopen_db, open_db
from reactgraph.tools import default_tools

db, url, mode, question = sys.argv[1:5]
config = {"configurable": {"thread_id": "t"}}
payload = {"question": question} if question else None

def graph(saver):
    model = chat_model("gpt-4", base_url=url, api_key="x")
    return build_graph("transcript", model=model, tools=default_tools(), checkpointer=saver)

if mode == "sync":
    with open_db(db) as (saver, _):
        out = graph(saver).invoke(payload, config)
else:
    async def main():
        async with aopen_db(db) as (saver, _):
            return await graph(saver).ainvoke(payload, config)
    out = asyncio.run(main())
print(json.dumps({k: out[k] for k in ("status", "answer", "usage", "turns")}))
"""


class Holding:
    """Answers as the seed does (48 in four calls), but holds the requests whose numbers are in
    ``held`` (1-based, over every request it gets) until the test is done with them (then a
    503: their client was killed)."""

    def __init__(self, *held: int) -> None:
        self.held, self.count = set(held), 0
        self.arrived = {n: threading.Event() for n in held}
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Any:
        with self._lock:
            self.count += 1
            number = self.count
        if number in self.held:
            self.arrived[number].set()
            self.done.wait(WAIT_S)
            return Fault(503, "the test is over")
        return seed_responder(body)

    def wait(self, number: int) -> None:
        assert self.arrived[number].wait(WAIT_S), f"request {number} never came"


def server(responder: Any) -> FakeOpenAIServer:
    made = FakeOpenAIServer()
    made.responder = responder
    made.report_usage = False
    return made


def records(db: Path) -> int:
    """The model calls recorded in the database (``model_call_sent``'s stored results)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        return connection.execute(
            "SELECT count(*) FROM writes WHERE channel = '__return__'"
        ).fetchone()[0]


def stored(db: Path, count: int) -> None:
    """Until ``count`` calls are recorded: the kill then comes after the record of the call in
    flight (a kill before it lands, in the call's first milliseconds, may still miss it)."""
    deadline = time.monotonic() + WAIT_S
    while records(db) < count:
        assert time.monotonic() < deadline, f"{records(db)} calls recorded, not {count}"
        time.sleep(0.02)


def child(db: Path, url: str, mode: str, question: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), url, mode, question],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def killed(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.communicate(timeout=WAIT_S)
    assert process.returncode == -9


def state_of(db: Path, thread: str) -> dict[str, Any]:
    from reactgraph import build_graph
    from reactgraph.scripted import ScriptedChatModel
    from reactgraph.storage.database import open_db
    from reactgraph.tools import default_tools

    with open_db(str(db)) as (saver, _):
        graph = build_graph(
            "transcript", model=ScriptedChatModel(), tools=default_tools(), checkpointer=saver
        )
        return dict(graph.get_state({"configurable": {"thread_id": thread}}).values)


def unkilled(tmp_path: Path, mode: str) -> dict[str, Any]:
    """The same run, never killed: its figures."""
    plain = server(seed_responder)
    try:
        done = child(tmp_path / "plain.sqlite", plain.url, mode, DEMO_QUESTION)
        out, err = done.communicate(timeout=WAIT_S)
        assert done.returncode == 0, err[-3000:]
        assert len(plain.requests) == 4
        return json.loads(out.strip().splitlines()[-1])
    finally:
        plain.close()


def assert_every_call_counted(out: dict[str, Any], plain: dict[str, Any], requests: int) -> None:
    """Each call the server saw counted once: the lost ones at their step's prompt."""
    assert (out["status"], out["answer"]) == ("answered", "48")
    lost = [t.get("lost_calls") or 0 for t in out["turns"]]
    assert sum(1 + n for n in lost) == requests
    for turn, before, n in zip(out["turns"], plain["turns"], lost, strict=True):
        assert turn["prompt_tokens"] == (1 + n) * before["prompt_tokens"]
    extra = sum(n * t["prompt_tokens"] for n, t in zip(lost, plain["turns"], strict=True))
    assert out["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + extra > 0
    assert out["usage"]["completion_tokens"] == plain["usage"]["completion_tokens"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_calls_in_flight_at_two_kills_are_counted_once_each(tmp_path: Path, mode: str) -> None:
    plain = unkilled(tmp_path, mode)
    holding = Holding(2, 3)  # the second call, and its sending again after the first kill
    model = server(holding)
    db = tmp_path / "runs.sqlite"
    try:
        first = child(db, model.url, mode, DEMO_QUESTION)
        holding.wait(2)
        stored(db, 2)
        killed(first)
        second = child(db, model.url, mode, "")
        holding.wait(3)
        stored(db, 3)  # the first kill's record, found again, and the second sending's
        killed(second)
        last = child(db, model.url, mode, "")
        out, err = last.communicate(timeout=WAIT_S)
        assert last.returncode == 0, err[-3000:]
    finally:
        holding.done.set()
        model.close()
    result = json.loads(out.strip().splitlines()[-1])
    assert [t.get("lost_calls") for t in result["turns"]] == [None, 2, None, None]
    assert_every_call_counted(result, plain, len(model.requests))
    assert len(model.requests) == 6


def test_ask_killed_in_a_model_call_then_resumed_counts_it(tmp_path: Path) -> None:
    plain = unkilled(tmp_path, "sync")
    holding = Holding(3)
    model = server(holding)
    db = tmp_path / "runs.sqlite"
    try:
        asked = popen(
            "ask", DEMO_QUESTION, "--model", MODEL, "--base-url", model.url, "--db", str(db),
            "--thread", "t",
        )  # fmt: skip
        holding.wait(3)
        stored(db, 3)
        killed(asked)
        resumed = run_main("resume", "t", "--db", str(db))
        assert resumed.returncode == 0 and "Answer: 48" in resumed.stdout, resumed.stderr
    finally:
        holding.done.set()
        model.close()
    out = state_of(db, "t")
    assert [t.get("lost_calls") for t in out["turns"]] == [None, None, 1, None]
    assert_every_call_counted(out, plain, len(model.requests))


def test_a_killed_batch_run_again_counts_the_calls_in_flight(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "a", "question": DEMO_QUESTION}) + "\n", "utf-8")

    def batch(url: str, db: Path, out: Path) -> list[str]:
        return [
            "batch", str(questions), "--out", str(out), "--db", str(db), "--model", MODEL,
            "--base-url", url, "--workers", "1",
        ]  # fmt: skip

    plain_server = server(seed_responder)
    try:
        done = run_main(*batch(plain_server.url, tmp_path / "plain.sqlite", tmp_path / "p.jsonl"))
        assert done.returncode == 0, done.stderr
    finally:
        plain_server.close()
    (line,) = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
    plain = state_of(tmp_path / "plain.sqlite", line["thread_id"])
    holding = Holding(2)
    model = server(holding)
    db, out = tmp_path / "runs.sqlite", tmp_path / "r.jsonl"
    try:
        first = popen(*batch(model.url, db, out))
        holding.wait(2)
        stored(db, 2)
        workers = workers_of(first.pid)
        killed(first)
        deadline = time.monotonic() + WAIT_S  # its worker ends with it (a bound, not a timing)
        while any(map(running, workers)):
            assert time.monotonic() < deadline, workers
            time.sleep(0.05)
        again = run_main(*batch(model.url, db, out))
        assert again.returncode == 0, again.stderr
    finally:
        holding.done.set()
        model.close()
    (result,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert result["status"] == "answered" and len(model.requests) == 5
    assert result["prompt_tokens"] == line["prompt_tokens"] + plain["turns"][1]["prompt_tokens"]
    assert_every_call_counted(state_of(db, result["thread_id"]), plain, len(model.requests))
