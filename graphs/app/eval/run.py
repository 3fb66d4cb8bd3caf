"""Running an eval: every question through every variant named, in worker processes, each pair
on a thread of its own in the eval's database, its scored result appended to ``results.jsonl``.

A re-run skips the pairs with a result line and resumes those a kill left half done, so no pair
is run twice and none is lost. A HotpotQA question searches only its own paragraphs.

A pair's thread belongs to its question set (``source``), arm (its variant and action format, or
the prebuilt agent: ``arms``), id, question text, pages and config (the model, its server, the
settings that change answers, the corpus and the tools: ``Recipe.config``); its result line to
its arm, id, question text, gold answers, question set and config. So a question edited (or
another set's question with the same id) runs anew, a re-run under other settings or another
model runs anew (and says so), a result is never reused for another action format, and a gold
answer edited is scored again from the finished thread, without a model call.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from reactgraph.app.engines import Engine, Flight, run_jobs
from reactgraph.app.eval.arms import PREBUILT, arm
from reactgraph.app.eval.inputs import Item
from reactgraph.app.eval.score import score_answer
from reactgraph.app.pool import Job
from reactgraph.app.recipe import Recipe, open_runner
from reactgraph.app.results import Results, digest, keyed_by

RESULTS = "results.jsonl"
DATABASE = "runs.sqlite"


def pair_key(variant: str, item_id: str) -> str:
    """The results file's key of a (question, variant) pair."""
    return json.dumps([variant, item_id], ensure_ascii=False)


# A result line counts as done only for the input it scored, under the config it ran with.
SCORED = keyed_by("question", "gold", "questions", "config")
Configs = Mapping[str, Any]
"""Each arm's config (``config_of``), by its label."""


def config_of(recipe: Recipe, label: str) -> dict[str, Any]:
    """The config an arm's results are made under (``Recipe.config``): its variant in its action
    format, or for the prebuilt agent the recipe's own with the agent named."""
    chosen = arm(label)
    if chosen.prebuilt:
        return {**recipe.config(recipe.variant), "agent": PREBUILT}
    changes = {"action_format": chosen.action_format}
    if chosen.grammar is not None:
        changes["constrained_decoding"] = chosen.grammar
    return recipe.config(chosen.variant, **changes)


def thread_of(variant: str, item: Item, source: str = "", config: Any = None) -> str:
    """The thread a pair runs on: readable, and unique to everything the run depends on (the
    question set, the variant, the id, the question's text, its pages and the config)."""
    pages = None if item.pages is None else list(item.pages.items())
    run = json.dumps([source, variant, item.id, item.question, pages], ensure_ascii=True)
    if config is not None:
        run += digest(config)
    name = variant.replace(":", "-")  # transcript:tool_calls -> transcript-tool_calls
    return f"eval-{name}-{hashlib.sha256(run.encode()).hexdigest()[:16]}"


def pairs_to_run(
    items: Sequence[Item],
    variants: Sequence[str],
    done: set[str],
    source: str = "",
    configs: Configs | None = None,
) -> Iterator[tuple[Item, str]]:
    """Each pair not done yet (no line ``SCORED`` alike in ``done``), variants interleaved so
    a partial eval compares them. Lazy: ``done`` is read as each pair comes up."""
    for item in items:
        for variant in variants:
            line = scored(item, variant, {}, source, (configs or {}).get(variant))
            if SCORED(line) not in done:
                yield item, variant


def jobs_for(
    pairs: Iterable[tuple[Item, str]], source: str = "", configs: Configs | None = None
) -> Iterator[Job]:
    """A job per pair, made as it is taken: a question set of any size never has all its
    jobs (each with a copy of its question's pages) in memory at once. A pair names its arm
    (``reactgraph.app.eval.arms``); the job, the variant and action format it runs."""
    for index, (item, label) in enumerate(pairs):
        pages = {t: list(p) for t, p in item.pages.items()} if item.pages else None
        chosen = arm(label)
        extra = {"variant": chosen.variant, "item": item.id, "pages": pages}
        extra["action_format"] = chosen.action_format
        if chosen.grammar is not None:
            extra["constrained_decoding"] = chosen.grammar
        if item.task is not None:  # a benchmark's task: its runner reads it
            extra["task"] = item.task.as_dict()
        thread = thread_of(label, item, source, (configs or {}).get(label))
        yield Job(index, item.question, thread, extra, f"question {item.id} ({label})")


def scored(
    item: Item, variant: str, result: dict[str, Any], source: str = "", config: Any = None
) -> dict[str, Any]:
    """A result line: the run's outcome, its gold answers, its scores and its config."""
    score = score_answer(result.get("answer"), item.gold)
    # A model ladder's run says where it moved up, and each model's spend.
    ladder: dict[str, Any] = {k: result[k] for k in ("escalations", "by_model") if k in result}
    return {
        "key": pair_key(variant, item.id),
        "id": item.id,
        "variant": variant,
        "action_format": arm(variant).action_format,
        "questions": source,
        "config": config,
        "question": item.question,
        "answer": result.get("answer"),
        "structured_answer": result.get("structured_answer"),
        "gold": list(item.gold),
        "em": score.em,
        "f1": score.f1,
        "status": result.get("status"),
        "turns": result.get("turns", 0),
        "prompt_tokens": result.get("prompt_tokens", 0),
        "completion_tokens": result.get("completion_tokens", 0),
        "total_tokens": result.get(
            "total_tokens", result.get("prompt_tokens", 0) + result.get("completion_tokens", 0)
        ),
        "cost": result.get("cost"),
        "cache_read_tokens": result.get("cache_read_tokens", 0),
        "tool_calls": result.get("tool_calls") or {},
        "budget": result.get("budget"),
        "seconds": result.get("seconds", 0.0),
        "error": result.get("error"),
        "thread_id": result.get("thread_id"),
        **ladder,
    }


def run_eval(
    recipe: Recipe,
    items: Sequence[Item],
    variants: Sequence[str],
    folder: str | Path,
    *,
    workers: int | None = None,
    concurrency: int = 8,
    on_start: Callable[[int, int, int], None] | None = None,
    source: str = "",
    engine: Engine = "local",
    address: str | None = None,
    flight: Flight | None = None,
    runner: Callable[[Recipe], Any] | None = None,
    score: Callable[..., dict[str, Any]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Run the pairs not done yet; yield each scored result line as it is appended to
    ``folder/results.jsonl``. ``recipe.db`` defaults to ``folder/runs.sqlite``, so every pair's
    run can be read with ``reactgraph show THREAD --db ...``. ``on_start(todo, done, other)`` is
    told how many pairs will run, how many are done already, and how many of those to run have a
    result made under another config (the model, a setting, the tools: they run again).
    ``source`` names the question set (``reactgraph eval`` gives the file's absolute path, or
    ``bundled``): two sets never share a thread or a result line, even with the same ids and
    the same ``--db``. ``engine`` (and ``address``) say where the runs go
    (``reactgraph.app.engines``); ``flight`` counts those in flight. A benchmark gives its own
    ``runner`` (``open_runner`` by default: a recipe to a runner's context) and ``score``
    (``scored`` by default: a result line from a run's result)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if not recipe.db:
        recipe = dataclasses.replace(recipe, db=str((folder / DATABASE).resolve()))
    results = Results(str(folder / RESULTS), identity=SCORED)
    configs = {label: config_of(recipe, label) for label in variants}
    try:
        results.refresh(report=True)
        todo = other = 0
        for item, variant in pairs_to_run(items, variants, results.done, source, configs):
            todo += 1
            other += pair_key(variant, item.id) in results.finished
        if on_start is not None:
            on_start(todo, len(items) * len(variants) - todo, other)
        pending: dict[int, tuple[Item, str]] = {}  # the pairs in flight, by their job's index

        def pairs() -> Iterator[tuple[Item, str]]:
            chosen = pairs_to_run(items, variants, results.done, source, configs)
            for index, pair in enumerate(chosen):
                pending[index] = pair
                yield pair

        line_of = score or scored
        for result in run_jobs(
            functools.partial(runner or open_runner, recipe),
            jobs_for(pairs(), source, configs),
            workers=workers,
            concurrency=concurrency,
            engine=engine,
            address=address,
            db=recipe.db,
            flight=flight,
            total=todo,
        ):
            item, variant = pending.pop(result["index"])
            line = line_of(item, variant, result, source, configs[variant])
            if results.record(line):
                yield line
    finally:
        results.close()


def read_results(folder: str | Path) -> list[dict[str, Any]]:
    """Every result line of an eval folder (the report keeps the last of each pair)."""
    path = Path(folder) / RESULTS
    if not path.exists():
        return []
    lines = []
    for text in path.read_text("utf-8").splitlines():
        try:
            value = json.loads(text)
        except ValueError:
            continue  # a line torn by a kill: its pair runs again
        if isinstance(value, dict):
            lines.append(value)
    return lines
