"""``reactgraph batch``: questions from a JSONL file, results appended to another as each run
ends, so an interrupted batch re-run skips what is done and loses nothing already written."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from reactgraph import console as out
from reactgraph.batch import run_many


def read_questions(path: str) -> list[tuple[str, str]]:
    """``(key, question)`` per good line; each bad line is reported with its number."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
    questions, seen = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as error:
            out.fail(f"{path}:{number}: not JSON ({error.msg}); skipped")
            continue
        if isinstance(item, str):
            item = {"question": item}
        question = item.get("question") if isinstance(item, dict) else None
        if not isinstance(question, str) or not question.strip():
            out.fail(f'{path}:{number}: needs a non-empty "question" string; skipped')
            continue
        key = str(item.get("id", f"line-{number}"))
        if key in seen:
            out.fail(f"{path}:{number}: duplicate id {key!r}; skipped")
            continue
        seen.add(key)
        questions.append((key, question))
    return questions


def done_keys(path: str) -> set[str]:
    """Keys of the questions a previous run of the batch finished (errors are tried again)."""
    if not os.path.exists(path):
        return set()
    done = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue  # a line torn by a crash: its question runs again
        if isinstance(item, dict) and item.get("status") and not item.get("error"):
            done.add(str(item.get("id")))
    return done


def run_file(graph: Any, questions_path: str, out_path: str, concurrency: int) -> int:
    """Run the file's questions not done yet; 0 when every question has a result."""
    try:
        questions = read_questions(questions_path)
    except ValueError as error:
        out.fail(str(error))
        return 2
    finished = done_keys(out_path)
    todo = [(key, question) for key, question in questions if key not in finished]
    if len(todo) < len(questions):
        out.console.print(
            f"[dim]{len(questions) - len(todo)} question(s) already done in "
            f"{out_path}; skipped[/dim]"
        )
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    failures = asyncio.run(_run(graph, todo, out_path, concurrency))
    return 1 if failures else 0


async def _run(graph: Any, todo: list[tuple[str, str]], out_path: str, concurrency: int) -> int:
    failures = 0
    with out.progress() as bar, open(out_path, "a", encoding="utf-8") as results:
        task = bar.add_task("questions", total=len(todo))
        async for result in run_many(graph, [q for _, q in todo], concurrency=concurrency):
            key = todo[result["index"]][0]
            line = {"id": key, **{k: v for k, v in result.items() if k != "index"}}
            results.write(json.dumps(line, ensure_ascii=False) + "\n")
            results.flush()
            os.fsync(results.fileno())
            failures += result["error"] is not None
            bar.advance(task)
    return failures
