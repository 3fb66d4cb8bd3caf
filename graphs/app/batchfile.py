"""``reactgraph batch``: questions from a JSONL file, results appended to another as each run
ends, so an interrupted batch re-run skips what is done and loses nothing already written.

Each question runs on a thread of the database named after the questions file, the variant and
the question's id, under that thread's lock (``reactgraph.app.runner``), in one of ``workers``
processes. A re-run skips the questions with a result, resumes a thread a killed worker left half
done, and reports a finished one without running it again. One process, this one, writes the
results file, holding a lock on it while it reads and appends: no line is torn or written twice,
even by two batches on one file."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from reactgraph.app import console as out
from reactgraph.app.jsonl import (
    MAX_LINE_BYTES,
    BadLine,
    Skip,
    line_id,
    read_jsonl_lines,
)
from reactgraph.app.pool import Job, run_parallel
from reactgraph.app.results import Results
from reactgraph.app.runner import Recipe, open_runner
from reactgraph.nodes.storable import unstorable

Outcome = Literal["done", "ran", "failed", "busy"]


@dataclass(frozen=True)
class Question:
    """A good line: ``id`` as given (any JSON string or number, or ``line-N`` for a line without
    one) and ``key``, its unambiguous text (``jsonl.id_text``), unique in the file."""

    number: int
    key: str
    id: Any
    text: str


def _question(value: Any, number: int) -> Question:
    if isinstance(value, BadLine):
        raise Skip(value.reason)
    entry = {"question": value} if isinstance(value, str) else value
    text = entry.get("question") if isinstance(entry, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise Skip('needs a non-empty "question" string')
    problem = unstorable(text)
    if problem is not None:
        raise Skip(f"the question cannot be stored: it holds a {problem}")
    given = entry.get("id", f"line-{number}")
    return Question(number, line_id(entry, number), given, text)


def read_questions(
    path: str, max_line_bytes: int = MAX_LINE_BYTES
) -> tuple[list[Question], list[str]]:
    """The good questions and, for each bad line, ``path:N: why; skipped``. A line is a JSON
    object ``{"question": ..., "id"?: ...}`` or a JSON string. ValueError if unreadable."""
    questions: list[Question] = []
    problems: list[str] = []
    seen: set[str] = set()
    for number, value in read_jsonl_lines(path, max_line_bytes):
        try:
            question = _question(value, number)
            if question.key in seen:
                raise Skip(f"duplicate id {question.key}")
        except Skip as skip:
            problems.append(f"{path}:{number}: {skip}; skipped")
            continue
        seen.add(question.key)
        questions.append(question)
    return questions, problems


def thread_prefix(questions_path: str, variant: str) -> str:
    """The threads of a questions file's batch with a variant: the same on every re-run."""
    digest = hashlib.sha256(f"{Path(questions_path).resolve()}|{variant}".encode()).hexdigest()
    return f"batch-{digest[:10]}-"


def run_file(
    recipe: Recipe,
    questions_path: str,
    out_path: str,
    *,
    workers: int | None = None,
    concurrency: int = 8,
) -> int:
    """Run the file's questions not done yet: 0 when each has a result, 1 when a run failed,
    2 for an unusable file or a question another process is running."""
    try:
        questions, problems = read_questions(questions_path)
    except ValueError as error:
        out.fail(str(error))
        return 2
    if not questions:
        more = f" (and {len(problems) - 1} more bad lines)" if len(problems) > 1 else ""
        why = f": {problems[0]}{more}" if problems else " (it has no lines)"
        out.fail(f"no question to run in {questions_path}{why}")
        return 2
    for problem in problems:
        out.warn(problem)
    try:
        results = Results(out_path)
    except OSError as error:
        out.fail(f"cannot write the results to {out_path}: {error.strerror or error}")
        return 2
    try:
        results.refresh(report=True)
        todo = [q for q in questions if q.key not in results.done]
        if len(todo) < len(questions):
            out.console.print(
                f"[dim]{len(questions) - len(todo)} question(s) already done in "
                f"{out_path}; skipped[/dim]"
            )
        prefix = thread_prefix(questions_path, recipe.variant)
        jobs = [Job(i, q.text, prefix + q.key) for i, q in enumerate(todo)]
        errors: list[str] = []
        outcomes = _run(recipe, jobs, todo, results, questions_path, workers, concurrency, errors)
    finally:
        results.close()
    if errors:  # exit 1 says a run failed: this says which, and why
        more = f' (the first of {len(errors)}: see their "error" in {out_path})'
        out.fail(
            f"{len(errors)} of {len(jobs)} question(s) failed{more if len(errors) > 1 else ''}: "
            f"{errors[0]}; run the same command again to retry them"
        )
    if "busy" in outcomes:
        return 2
    return 1 if "failed" in outcomes else 0


def _run(
    recipe: Recipe,
    jobs: list[Job],
    todo: list[Question],
    results: Results,
    source: str,
    workers: int | None,
    concurrency: int,
    errors: list[str],
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    runner = functools.partial(open_runner, recipe)
    with out.progress() as bar:
        task = bar.add_task("questions", total=len(jobs))
        for result in run_parallel(runner, jobs, workers=workers, concurrency=concurrency):
            question = todo[result["index"]]
            error = result.get("error") or ""
            if error.startswith("ThreadBusy"):
                out.fail(f"{source}:{question.number}: {error.split(': ', 1)[-1]}; skipped")
                outcomes.append("busy")
            elif not results.record(
                {
                    "id": question.id,
                    "key": question.key,
                    "question": question.text,
                    **{k: v for k, v in result.items() if k not in ("index", "question")},
                }
            ):
                outcomes.append("done")
            else:
                outcomes.append("failed" if error else "ran")
                if error:
                    errors.append(error.strip().splitlines()[0] if error.strip() else error)
            bar.advance(task)
    return outcomes
