"""SQLite checkpoints are stored compressed, through LangGraph's own serializer hook, and rows
written before (plain msgpack) still read."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from reactgraph import build_graph
from reactgraph.storage.compression import PLAIN, ZLIB, Zlib, serializer
from reactgraph.storage.database import aopen_db, open_db
from tests.fakes import action, answer, fake_model

# Real prose, which compresses as text does.
CORPUS = Path(__file__).resolve().parents[1] / "tools" / "corpus"
PROSE = " ".join(path.read_text() for path in sorted(CORPUS.glob("*.md")))


def test_the_codec_compresses_what_it_can_and_leaves_the_rest() -> None:
    codec = Zlib()
    name, packed = codec.encrypt(b"abc" * 1000)
    assert name == ZLIB and len(packed) < 100 and codec.decrypt(name, packed) == b"abc" * 1000
    assert codec.encrypt(b"tiny") == (PLAIN, b"tiny")
    with pytest.raises(ValueError, match="unknown codec"):
        codec.decrypt("rot13", b"x")


def test_rows_written_before_compression_still_read() -> None:
    value = {"turns": [{"turn": 1, "text": "Thought: ..." * 50}]}
    assert serializer().loads_typed(JsonPlusSerializer().dumps_typed(value)) == value
    kind, data = serializer().dumps_typed(value)
    assert kind == "msgpack+zlib" and serializer().loads_typed((kind, data)) == value


@tool
def page(text: str) -> str:
    """A page of prose."""
    start = int(text) * 97
    return PROSE[start : start + 2000]


def _graph(saver: Any, turns: int) -> Any:
    model = fake_model(*(action("page", str(i)) for i in range(turns)), answer("done"))
    return build_graph("transcript", model=model, tools=[page], checkpointer=saver, max_turns=30)


def _stored(db: Path) -> tuple[set[str], int, int]:
    with sqlite3.connect(db) as connection:
        kinds = {kind for (kind,) in connection.execute("SELECT type FROM checkpoints")}
        kinds |= {kind for (kind,) in connection.execute("SELECT type FROM writes")}
        (largest,) = connection.execute(
            "SELECT max(length(checkpoint)) FROM checkpoints"
        ).fetchone()
        (text,) = connection.execute(
            "SELECT sum(length(value)) FROM writes WHERE channel = 'turns'"
        ).fetchone()
    return kinds, largest, text


def test_a_run_through_open_db_is_stored_compressed_and_reads_back(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    config = {"configurable": {"thread_id": "t"}}
    with open_db(str(db)) as (saver, _):
        out = _graph(saver, 20).invoke({"question": "Read the pages."}, config)
    with open_db(str(db), read_only=True) as (saver, _):
        again = _graph(saver, 0).get_state(config).values
    assert out["status"] == "answered" and again["turns"] == out["turns"]
    kinds, largest, text = _stored(db)
    assert "msgpack+zlib" in kinds and "msgpack" not in kinds
    # A checkpoint is mostly version strings (about 2.7 KB as msgpack); text about a third off.
    raw = sum(len(t["reply"]) + len(t["observation"] or "") for t in out["turns"])
    assert largest < 1500 and text < 0.8 * raw


def test_the_async_saver_writes_the_same_way(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    config = {"configurable": {"thread_id": "t"}}

    async def go() -> dict:
        async with aopen_db(str(db)) as (saver, _):
            return await _graph(saver, 5).ainvoke({"question": "Read the pages."}, config)

    out = asyncio.run(go())
    with open_db(str(db), read_only=True) as (saver, _):
        assert _graph(saver, 0).get_state(config).values["turns"] == out["turns"]
    assert "msgpack+zlib" in _stored(db)[0]
