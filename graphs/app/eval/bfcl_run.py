"""Running a BFCL task: its functions as the run's tools, its user turns as the questions of one
thread, its calls recorded and scored by the leaderboard's rules.

A single-turn task is one run. A multi-turn task is one run per user turn, each a follow-up on
the task's thread (every earlier run of it in its prompt: ``history_runs`` is the task's turns
unless the eval sets it; the prebuilt agent's messages go on), against the task's API
instances made for it from its initial configuration; a ``miss_func`` task's held-out
functions join the tools at their turn.

A task whose run raised is an error line (scored 0, its kind ``error``), run again by the next
eval in that folder, as any eval's errors are. A worker killed mid-task leaves a thread whose
tools' state died with it, so its task starts over (the thread's checkpoints deleted first) and
is scored once, when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from reactgraph import build_graph
from reactgraph.app import logprefix
from reactgraph.app.eval.arms import PREBUILT
from reactgraph.app.eval.bfcl_ast import Verdict, ast_check
from reactgraph.app.eval.bfcl_data import Task
from reactgraph.app.eval.bfcl_state import api_instances, methods_of, multi_turn_check
from reactgraph.app.eval.bfcl_tools import Recorder, task_tools
from reactgraph.app.eval.inputs import Item
from reactgraph.app.eval.prebuilt import Contender
from reactgraph.app.eval.run import pair_key
from reactgraph.app.pool import Job, Runner
from reactgraph.app.recipe import Recipe, arm_settings, model_of, taken_by
from reactgraph.batch import result_of
from reactgraph.nodes.vocabulary.run_settings import HISTORY_RUNS_MAX
from reactgraph.storage.database import aopen_db
from reactgraph.storage.locks import GuardedSaver, Lease, ThreadBusy, athread_lock
from reactgraph.variants import variant as spec_of

# A failure's kind, from the leaderboard's error type (the report counts them).
KINDS = {
    "simple_function_checker:wrong_func_name": "wrong_function",
    "parallel_function_checker_no_order:cannot_find_match": "wrong_call",
    "simple_function_checker:wrong_count": "wrong_count",
    "multiple_function_checker:wrong_count": "wrong_count",
    "parallel_function_checker_no_order:wrong_count": "wrong_count",
    "irrelevance_error:decoder_success": "called_irrelevant",
    "multi_turn:empty_turn_model_response": "no_call",
    "multi_turn:instance_state_mismatch": "wrong_state",
    "multi_turn:execution_response_mismatch": "wrong_results",
    "multi_turn:force_terminated": "unfinished",
}
FAILURE_KINDS = (
    "no_call",
    "unreadable",
    "wrong_function",
    "wrong_argument",
    "wrong_count",
    "wrong_call",
    "called_irrelevant",
    "wrong_state",
    "wrong_results",
    "unfinished",
    "error",
)


def verdict_of(task: Task, calls: list[list[dict[str, Any]]]) -> Verdict:
    """The leaderboard's verdict on a task's recorded calls (per turn)."""
    if task.multi_turn:
        return multi_turn_check(task, calls)
    made = [{c["name"]: c["arguments"]} for c in (calls[0] if calls else [])]
    return ast_check(task.category, task.functions, made, task.answer)


def failure_kind(verdict: Verdict, calls: list[list[dict[str, Any]]], invalid: int) -> str | None:
    """What went wrong, in the report's words: None for a pass. A run that made no call where
    one was due is ``unreadable`` when a reply of it could not be read (an invalid turn)."""
    if verdict.valid:
        return None
    none = not any(calls)
    if none and verdict.error_type != "irrelevance_error:decoder_success":
        return "unreadable" if invalid else "no_call"
    kind = KINDS.get(verdict.error_type)
    return kind or "wrong_argument"


def bfcl_scored(
    item: Item, variant: str, result: dict[str, Any], source: str = "", config: Any = None
) -> dict[str, Any]:
    """A BFCL result line: the run's outcome, its calls, the verdict and its kind."""
    task: Task = item.task
    calls = result.get("calls") or []
    error = result.get("error")
    if error and "calls" not in result:  # it never ran (its thread was busy)
        verdict = Verdict(False, "error", str(error))
    else:
        verdict = verdict_of(task, calls)  # what it did, though it may have raised after
    kind = failure_kind(verdict, calls, int(result.get("invalid_turns", 0)))
    if error and kind is not None:
        kind = "error"
    return {
        "key": pair_key(variant, item.id),
        "id": item.id,
        "bench": "bfcl",
        "category": task.category,
        "variant": variant,
        "questions": source,
        "config": config,
        "question": item.question,
        "gold": list(item.gold),
        "calls": calls,
        "score": float(verdict.valid),
        "failure": kind,
        "error_type": verdict.error_type or None,
        "why": verdict.error or None,
        "answer": result.get("answer"),
        "status": result.get("status"),
        "turns": result.get("turns", 0),
        "invalid_turns": result.get("invalid_turns", 0),
        "prompt_tokens": result.get("prompt_tokens", 0),
        "completion_tokens": result.get("completion_tokens", 0),
        "total_tokens": result.get("prompt_tokens", 0) + result.get("completion_tokens", 0),
        "seconds": result.get("seconds", 0.0),
        "error": error,
        "thread_id": result.get("thread_id"),
    }


@dataclasses.dataclass
class _Spent:
    """What a task's runs added up to."""

    prompt: int = 0
    completion: int = 0
    turns: int = 0
    invalid: int = 0

    def add(self, values: Mapping[str, Any], prebuilt: bool) -> None:
        counted = result_of(0, "", "", dict(values), 0.0, None)
        if prebuilt:  # its messages, and so its turns, are the whole thread's so far
            self.prompt, self.completion, self.turns = 0, 0, 0
        self.prompt += counted["prompt_tokens"]
        self.completion += counted["completion_tokens"]
        self.turns += counted["turns"]
        self.invalid += sum(1 for t in values.get("turns") or [] if t.get("kind") == "invalid")


@contextlib.asynccontextmanager
async def open_bfcl_runner(recipe: Recipe) -> AsyncIterator[Runner]:
    """A runner for this process: one model client and one database connection; each task's
    graph is built for it, with its own tools."""
    model = model_of(recipe)
    async with aopen_db(recipe.db) as (saver, store):
        leases: dict[str, Lease] = {}
        guarded = GuardedSaver(saver, leases)
        cap = spec_of(recipe.variant).built(taken_by(recipe.variant, recipe.settings)).max_turns

        def graph_for(extra: Mapping[str, Any], tools: list[Any], turns: int) -> Any:
            variant = extra.get("variant", recipe.variant)
            if variant == PREBUILT:
                return Contender(model, tools, guarded, cap)
            settings = arm_settings(variant, recipe.settings, dict(extra))
            # Every earlier turn of the task in the prompt, unless the run's setting says else.
            settings.setdefault("history_runs", min(HISTORY_RUNS_MAX, max(1, turns - 1)))
            return build_graph(variant, model=model, tools=tools, checkpointer=guarded, **settings)

        async def task_run(job: Job, recorder: Recorder) -> dict[str, Any]:
            extra = job.extra or {}
            task = Task.of(extra["task"])
            config = {"configurable": {"thread_id": job.thread_id}}
            await saver.adelete_thread(job.thread_id)  # what a killed worker left starts over
            variant = extra.get("variant", recipe.variant)
            if variant != PREBUILT:  # its record, for `reactgraph show THREAD`
                settings = {**recipe.settings, **arm_settings(variant, {}, dict(extra))}
                own = dataclasses.replace(recipe, variant=variant, settings=settings)
                await asyncio.to_thread(own.record(job.thread_id, task.turns[0]).save, store)
            methods = methods_of(api_instances(task)) if task.multi_turn else None
            docs = list(task.functions)
            spent = _Spent()
            values: Mapping[str, Any] = {}
            for index, question in enumerate(task.turns):
                if index:
                    recorder.next_turn()
                docs += task.added.get(index, ())
                graph = graph_for(extra, task_tools(docs, recorder, methods), len(task.turns))
                values = await graph.ainvoke({"question": question}, config)
                spent.add(values, extra.get("variant") == PREBUILT)
            return {
                "answer": values.get("answer"),
                "status": values.get("status"),
                "calls": recorder.turns,
                "invalid_turns": spent.invalid,
                "turns": spent.turns,
                "prompt_tokens": spent.prompt,
                "completion_tokens": spent.completion,
            }

        logprefix.install()

        async def run(job: Job) -> dict[str, Any]:
            with logprefix.running(job.name):
                started = time.perf_counter()
                recorder = Recorder()
                try:
                    async with athread_lock(recipe.db, job.thread_id, saver) as lease:
                        leases[job.thread_id] = lease
                        try:
                            outcome = await task_run(job, recorder)
                        finally:
                            leases.pop(job.thread_id, None)
                except ThreadBusy as busy:
                    return {"index": job.index, "thread_id": job.thread_id, "error": str(busy)}
                except Exception as error:
                    seconds = round(time.perf_counter() - started, 3)
                    failed = f"{type(error).__name__}: {error}"
                    # The calls it made before it raised are scored all the same.
                    return {
                        "index": job.index,
                        "thread_id": job.thread_id,
                        "error": failed,
                        "seconds": seconds,
                        "calls": recorder.turns,
                    }
                seconds = round(time.perf_counter() - started, 3)
                return {
                    "index": job.index,
                    "thread_id": job.thread_id,
                    "seconds": seconds,
                    **outcome,
                }

        yield run
