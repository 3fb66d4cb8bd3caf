"""``reactgraph batch``: questions from a JSONL file, results appended to another as each run
ends, so an interrupted batch re-run skips what is done and loses nothing already written.

Each question runs on a thread of the database named after the questions file, the variant, the
question's id and a digest of its text, under that thread's lock (``reactgraph.app.recipe``), in one
of ``workers`` processes. A re-run skips the questions with a result, resumes a thread a killed
worker left half done, and reports a finished one without running it again; a result counts
only for the id with the very text it answered (an edited question runs again). This process
alone writes the results file, under a lock: no line torn or written twice, even by two batches."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reactgraph.app import console as out
from reactgraph.app.engines import Engine, Flight, run_jobs
from reactgraph.app.jsonl import MAX_LINE_BYTES, BadLine
from reactgraph.app.pool import Job
from reactgraph.app.questions import line_id, question_lines, question_text
from reactgraph.app.recipe import Recipe, open_runner
from reactgraph.app.results import Results, digest, keyed_by
from reactgraph.nodes.vocabulary.endings import AWAITING

Outcome = Literal["done", "ran", "failed", "busy"]


@dataclass(frozen=True)
class Question:
    """A good line: ``id`` as given (any JSON string or number, or ``line-N`` for a line without
    one) and ``key``, its unambiguous text (``jsonl.id_text``), unique in the file."""

    number: int
    key: str
    id: Any
    text: str

    def thread(self, prefix: str) -> str:
        """Its thread: the batch's ``prefix``, a digest of its text, and its key."""
        return f"{prefix}{hashlib.sha256(self.text.encode()).hexdigest()[:8]}-{self.key}"

    def line(self, config: Any = None) -> dict[str, Any]:
        """What its result line says of it (before the run's outcome), with the ``config`` it
        runs under (``Recipe.config``)."""
        return {"id": self.id, "key": self.key, "question": self.text, "config": config}


# A result line answers the question of its key with exactly its text, under its config: an
# edited text, another model or a setting that changes answers is a new result.
ANSWERS = keyed_by("question", "config")


def _question(value: Any, number: int) -> Question:
    entry = {"question": value} if isinstance(value, str) else value
    text = question_text(entry)
    given = entry.get("id", f"line-{number}")
    return Question(number, line_id(entry, number), given, text)


def read_questions(
    path: str, max_line_bytes: int = MAX_LINE_BYTES
) -> tuple[list[Question], list[str]]:
    """The good questions and, for each bad line, ``path:N: why; skipped``. A line is a JSON
    object ``{"question": ..., "id"?: ...}`` or a JSON string. ValueError if unreadable."""
    questions: list[Question] = []
    problems: list[str] = []
    for item in each_question(path, max_line_bytes):
        if isinstance(item, Question):
            questions.append(item)
        else:
            problems.append(item)
    return questions, problems


def each_question(path: str, max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[Question | str]:
    """``read_questions`` one line at a time: each good question, or a bad line's problem."""
    for number, item in question_lines(path, _question, lambda q: q.key, max_line_bytes):
        yield f"{path}:{number}: {item.reason}; skipped" if isinstance(item, BadLine) else item


def thread_prefix(questions_path: str, variant: str, config: Any = None) -> str:
    """The threads of a questions file's batch with a variant (and config), on every re-run."""
    run = f"{Path(questions_path).resolve()}|{variant}"
    if config is not None:
        run += f"|{digest(config)}"
    return f"batch-{hashlib.sha256(run.encode()).hexdigest()[:10]}-"


def run_file(
    recipe: Recipe,
    questions_path: str,
    out_path: str,
    *,
    workers: int | None = None,
    concurrency: int = 8,
    engine: Engine = "local",
    address: str | None = None,
) -> int:
    """Run the file's questions not done yet: 0 when each has a result, 1 when a run failed,
    2 for an unusable file or a question another process is running. ``engine`` runs them
    (``reactgraph.app.engines``). The file is read twice, a line at a time, never held whole:
    once to check it, then as the questions are handed out."""
    config = recipe.config(recipe.variant)
    answers = _checked(questions_path, config)
    if answers is None:
        return 2
    try:
        results = Results(out_path, identity=ANSWERS)
    except OSError as error:
        out.fail(f"cannot write the results to {out_path}: {error.strerror or error}")
        return 2
    try:
        results.refresh(report=True)
        total = _note_done(answers, results, out_path)
        del answers
        todo = (
            q
            for q in each_question(questions_path)
            if isinstance(q, Question) and ANSWERS(q.line(config)) not in results.done
        )
        run = _Run(recipe, results, questions_path, config)
        outcomes = run.all(todo, total, workers, concurrency, engine, address)
    finally:
        results.close()
    run.report(total, out_path)
    if "busy" in outcomes:
        return 2
    return 1 if "failed" in outcomes else 0


def _checked(questions_path: str, config: Any) -> dict[Any, str] | None:
    """The file's first read (``_survey``), its bad lines warned of; None, said on stderr,
    when it cannot be read or has no good question."""
    try:
        answers, problems = _survey(questions_path, config)
    except ValueError as error:
        out.fail(str(error))
        return None
    if not answers:
        out.fail(f"no question to run in {questions_path}{_why_none(problems)}")
        return None
    for problem in problems:
        out.warn(problem)
    return answers


def _why_none(problems: list[str]) -> str:
    """Why a file gave no question: its first bad line (and how many more), or no lines."""
    if not problems:
        return " (it has no lines)"
    more = f" (and {len(problems) - 1} more bad lines)" if len(problems) > 1 else ""
    return f": {problems[0]}{more}"


def _note_done(answers: dict[Any, str], results: Results, out_path: str) -> int:
    """Say how many questions are done already (skipped) and how many were answered under
    another config (they run again); how many are left to run."""
    total = sum(1 for answer in answers if answer not in results.done)
    if total < len(answers):
        out.console.print(
            f"[dim]{len(answers) - total} question(s) already done in {out_path}; skipped[/dim]"
        )
    other = sum(
        1 for a, key in answers.items() if a not in results.done and key in results.finished
    )
    if other:
        out.console.print(
            f"{other} question(s) in {out_path} were answered under another config (the "
            "model, its server, a setting that changes answers, the corpus or the tools, or "
            "by a version that did not record it); they run again"
        )
    return total


def _survey(path: str, config: Any) -> tuple[dict[Any, str], list[str]]:
    """What each good question's result line is known by (with its key); bad lines' problems."""
    answers: dict[Any, str] = {}
    problems: list[str] = []
    for item in each_question(path):
        if isinstance(item, Question):
            answers[ANSWERS(item.line(config))] = item.key
        else:
            problems.append(item)
    return answers, problems


@dataclass
class _Run:
    """A batch under way: the questions in flight (and only those) by their job's index."""

    recipe: Recipe
    results: Results
    source: str
    config: Any
    """The ``Recipe.config`` its runs answer under."""
    errors: list[str] = field(default_factory=list)
    """The first line of each failed run's error, for the one line that says why."""
    waiting: list[str] = field(default_factory=list)
    """The threads of the runs that stopped for a person's approval."""

    def report(self, total: int, out_path: str) -> None:
        """Say what is left to do once the runs ended: the questions waiting for a person's
        approval (how to decide), and the failed runs (the first one's error)."""
        if self.waiting:
            out.console.print(
                f"{len(self.waiting)} question(s) wait for a person's approval (status "
                f"{AWAITING}; their thread_id is in {out_path}); decide on each with "
                f"`reactgraph resume THREAD --db {self.recipe.db}` (the first: "
                f"{self.waiting[0]}), then run the same command again to write their results"
            )
        errors = self.errors
        if errors:  # exit 1 says a run failed: this says which, and why
            more = f' (the first of {len(errors)}: see their "error" in {out_path})'
            out.fail(
                f"{len(errors)} of {total} question(s) failed{more if len(errors) > 1 else ''}: "
                f"{errors[0]}; run the same command again to retry them"
            )

    def all(
        self,
        todo: Iterator[Question],
        total: int,
        workers: int | None,
        concurrency: int,
        engine: Engine,
        address: str | None,
    ) -> list[Outcome]:
        outcomes: list[Outcome] = []
        pending: dict[int, Question] = {}
        prefix = thread_prefix(self.source, self.recipe.variant, self.config)

        def jobs() -> Iterator[Job]:
            for index, question in enumerate(todo):
                pending[index] = question
                thread = question.thread(prefix)
                yield Job(index, question.text, thread, None, f"question {question.key}")

        runner = functools.partial(open_runner, self.recipe)
        flight = Flight()
        with out.progress(flight) as bar:
            task = bar.add_task("questions", total=total, failed=0)
            for result in run_jobs(
                runner,
                jobs(),
                workers=workers,
                concurrency=concurrency,
                engine=engine,
                address=address,
                db=self.recipe.db,
                flight=flight,
                total=total,
            ):
                outcomes.append(self.one(pending.pop(result["index"]), result))
                failures = sum(o in ("failed", "busy") for o in outcomes)
                bar.update(task, advance=1, failed=failures)
        return outcomes

    def one(self, question: Question, result: dict[str, Any]) -> Outcome:
        error = result.get("error") or ""
        if error.startswith("ThreadBusy"):
            out.fail(f"{self.source}:{question.number}: {error.split(': ', 1)[-1]}; skipped")
            return "busy"
        line = {
            **question.line(self.config),
            **{k: v for k, v in result.items() if k not in ("index", "question")},
        }
        if result.get("status") == AWAITING:
            self.waiting.append(result["thread_id"])
        if not self.results.record(line):
            return "done"
        if error:
            self.errors.append(error.strip().splitlines()[0] if error.strip() else error)
        return "failed" if error else "ran"
