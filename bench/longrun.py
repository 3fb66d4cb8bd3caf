"""One long scripted run over 2,000-character pages, shared by the storage section and run
as its child process: ``python bench/longrun.py VARIANT DB THREAD`` prints ``turn SECONDS`` as
each turn ends, until the run ends or the parent kills it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from common import FINAL_ANSWER, last_step, page
from common import LONG_QUESTION as QUESTION

from reactgraph import REGISTRY, build_graph
from reactgraph.scripted import ScriptedChatModel
from reactgraph.storage.database import new_record, open_db

TURNS = int(os.environ.get("BENCH_LONG_TURNS", "1000"))  # where the SIGKILL lands
CAP = TURNS + 10  # the run's turn cap (raised)


def reply(notes: bool, messages: list[Any]) -> str:
    """Reads page after page; a notes variant records its progress every 25 turns."""
    step = last_step(messages) + 1
    if step >= CAP - 1:
        return FINAL_ANSWER
    if notes and step % 25 == 0:
        return f"Thought: record progress.\nAction: update_notes[- read pages 0..{step}]"
    return f"Thought: read the next page.\nAction: page[{step}]"


def open_graph(variant: str, saver: Any, folder: str) -> Any:
    notes = bool(REGISTRY[variant].setting("window_turns"))
    script = [lambda messages: reply(notes, messages)] * (CAP + 5)
    model = ScriptedChatModel(replies=script, report_usage=True)
    extra = {"notes_dir": f"{folder}/notes"} if notes else {}
    return build_graph(
        variant, model=model, tools=[page], checkpointer=saver, max_turns=CAP, **extra
    )


def child(variant: str, db: str, thread: str) -> None:
    """One long run, printing ``turn seconds`` as each turn ends (the parent kills it)."""
    folder = str(Path(db).parent)
    with open_db(db) as (saver, store):
        settings = {"max_turns": CAP}
        if REGISTRY[variant].setting("notes_dir"):
            settings["notes_dir"] = f"{folder}/notes"
        new_record(thread, QUESTION, variant, "scripted", None, None, settings).save(store)
        graph = open_graph(variant, saver, folder)
        config = {"configurable": {"thread_id": thread}}
        last = time.perf_counter()
        for update in graph.stream({"question": QUESTION}, config, stream_mode="updates"):
            if any("turns" in (body or {}) for body in update.values()):
                now = time.perf_counter()
                print(f"turn {now - last:.6f}", flush=True)
                last = now


def raw_chars(turns: list[dict[str, Any]]) -> int:
    """The transcript as text: every reply and every Observation."""
    return sum(len(t["reply"]) + len(t["observation"] or "") for t in turns)


def wal_size(db: str) -> int:
    wal = Path(f"{db}-wal")
    return wal.stat().st_size if wal.exists() else 0


if __name__ == "__main__":
    child(*sys.argv[1:4])
