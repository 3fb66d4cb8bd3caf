"""What a run stores on SQLite: the question (and what else a run fixes at its start) once per
run, not once per checkpoint (issue 20, item 9)."""

from __future__ import annotations

import asyncio
import os
import random
import string
from pathlib import Path
from typing import Any

import pytest

from reactgraph import build_graph
from reactgraph.storage import aopen_db, open_db
from tests.fakes import ToolLog, action, answer, fake_model

FIXED = ("question", "settings", "thread_id", "run")


def _question(chars: int, seed: int) -> str:
    """Text zlib cannot shrink much: its size on disk is about its length."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + " ") for _ in range(chars))


def _model(turns: int) -> Any:
    return fake_model(*[action("echo", str(i)) for i in range(turns - 1)], answer("done"))


def _stored(saver: Any, thread: str) -> tuple[dict[str, int], int]:
    """How many checkpoints of ``thread`` hold each fixed field, and how many there are."""
    counts = dict.fromkeys(FIXED, 0)
    total = 0
    for checkpoint in saver.list({"configurable": {"thread_id": thread}}):
        total += 1
        for name in FIXED:
            counts[name] += name in checkpoint.checkpoint["channel_values"]
    return counts, total


def _file_bytes(db: str) -> int:
    wal = Path(f"{db}-wal")
    return os.path.getsize(db) + (wal.stat().st_size if wal.exists() else 0)


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_question_is_stored_once_per_run_not_per_checkpoint(mode: str, tmp_path: Path) -> None:
    db, turns = str(tmp_path / "runs.sqlite"), 11
    questions = [_question(100_000, seed) for seed in (1, 2)]
    config = {"configurable": {"thread_id": "t"}}

    def build(saver: Any) -> Any:
        tools = [ToolLog().echo()]
        model = _model(turns)
        return build_graph("transcript", model=model, tools=tools, checkpointer=saver, max_turns=20)

    if mode == "invoke":
        with open_db(db) as (saver, _):
            out = build(saver).invoke({"question": questions[0]}, config)
    else:

        async def main() -> Any:
            async with aopen_db(db) as (saver, _):
                return await build(saver).ainvoke({"question": questions[0]}, config)

        out = asyncio.run(main())
    assert out["question"] == questions[0] and len(out["turns"]) == turns
    with open_db(db) as (saver, _):
        counts, checkpoints = _stored(saver, "t")
        assert checkpoints > 3 * turns
        assert counts == dict.fromkeys(FIXED, 1)
        graph = build(saver)
        for snapshot in graph.get_state_history(config):
            if snapshot.metadata and snapshot.metadata.get("step", -1) >= 0:
                assert snapshot.values["question"] == questions[0]
        # The README's goal: the file at most 10x the question's text (it was 29x).
        assert _file_bytes(db) <= 10 * len(questions[0])
        # A second run on the thread stores its own question once more, and reads it back.
        second = graph.invoke({"question": questions[1]}, config)
        assert second["question"] == questions[1] and second["run"] == 2
        counts, _ = _stored(saver, "t")
        assert counts == dict.fromkeys(FIXED, 2)
        assert graph.get_state(config).values["question"] == questions[1]
    assert _file_bytes(db) <= 10 * sum(map(len, questions))


def test_a_question_from_a_chat_message_is_stored_once_too(tmp_path: Path) -> None:
    db, question = str(tmp_path / "runs.sqlite"), _question(50_000, 3)
    config = {"configurable": {"thread_id": "chat"}}
    with open_db(db) as (saver, _):
        graph = build_graph("transcript", model=_model(5), tools=[ToolLog().echo()],
                            checkpointer=saver)  # fmt: skip
        out = graph.invoke({"messages": [("user", question)]}, config)
        assert out["question"] == question
        counts, _ = _stored(saver, "chat")
        assert counts["question"] == 1
