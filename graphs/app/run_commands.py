"""The commands that run the graph: ``ask``, ``resume``, ``batch`` and the offline ``demo``
(``prune`` is in ``reactgraph.app.prune``)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import uuid
from typing import Any

from langchain_core.language_models import ModelProfile

from reactgraph import build_graph
from reactgraph.app import console as out
from reactgraph.app import interrupts
from reactgraph.app.engines import check_engine
from reactgraph.app.hints import saved_hint
from reactgraph.app.live import start, stream_run
from reactgraph.app.options import UsageError, build_for, held, make_model, run_settings
from reactgraph.app.recipe import Recipe
from reactgraph.app.viewing import load_record, python_record
from reactgraph.nodes.loop.compaction import FALLBACK_WINDOW
from reactgraph.nodes.vocabulary.standing import AWAITING
from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES, ScriptedChatModel
from reactgraph.storage.backends import database_backend
from reactgraph.storage.database import RunRecord, new_record, open_db
from reactgraph.storage.locks import lease_saver
from reactgraph.storage.snapshots import read_thread
from reactgraph.storage.summaries import save_summary
from reactgraph.tools import default_tools

# The profile of the stand-in model that checks a batch's or an eval's graphs before any run.
STAND_IN_PROFILE = ModelProfile(max_input_tokens=FALLBACK_WINDOW)


def cmd_ask(args: argparse.Namespace) -> int:
    if not args.question.strip():
        raise UsageError('the question is empty: reactgraph ask "your question"')
    if args.corpus is not None and not os.path.isdir(args.corpus):
        raise UsageError(f"corpus folder not found: {args.corpus}")
    settings, options = run_settings(args)
    model = make_model(args.model, args.base_url, args.timeout)
    thread = args.thread or uuid.uuid4().hex[:12]
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
    record = new_record(
        thread,
        args.question,
        args.variant,
        args.model,
        base_url,
        args.corpus,
        settings,
        options.as_dict(),
    )
    with open_db(args.db) as (saver, store), held(args.db, thread) as lease:
        # Checked under the lock: a second `ask` on this thread can no longer pass the check
        # while the first is still starting, then overwrite its record.
        earlier = RunRecord.exists(store, thread)  # a damaged record is a thread there too
        if earlier:
            follow_up(store, thread, args)
        graph = build_for(record, model, lease_saver(saver, lease), store)
        if earlier and read_thread(graph, thread)[0] != "finished":
            raise UsageError(
                f"thread {thread} has a run that has not finished; "
                f"`reactgraph resume {thread}` finishes it, then ask again"
            )
        updates = start(graph, {"question": args.question}, thread)
        record.save(store)
        # From here a stop leaves a thread that `resume` finishes (before, Ctrl-C waits).
        interrupts.stoppable(saved_hint(thread, args.db))
        out.console.print(f"[dim]thread {thread} ({args.variant}, {args.model})[/dim]")
        code = stream_run(graph, updates, record, args.db, lease)
        save_summary(graph, store, thread, args.db)  # what `threads` and `show` read
        return code


def follow_up(store: Any, thread: str, args: argparse.Namespace) -> None:
    """Check that a new question may go on the thread's conversation: the thread's record is
    readable and of the variant asked for (the run then sees the earlier runs, ``history_runs``;
    a run not yet finished is checked once the graph can read the thread)."""
    previous = load_record(store, thread, args.db)
    if previous.variant != args.variant:
        raise UsageError(
            f"thread {thread} runs the {previous.variant} variant; ask on it with "
            f"--variant {previous.variant}, or pick another --thread"
        )


def cmd_resume(args: argparse.Namespace) -> int:
    if not database_backend(args.db).exists(args.db):
        raise UsageError(f"no database at {args.db}")  # nothing to resume; create nothing
    with open_db(args.db) as (saver, store), held(args.db, args.thread) as lease:
        if RunRecord.load(store, args.thread) is None and python_record(saver, args.thread):
            # Its tools and settings are the Python program's: only that program can go on.
            raise UsageError(
                f"thread {args.thread!r} was run from Python, so its tools are unknown here: "
                "resume it from Python with graph.invoke(None, config) on that thread"
            )
        record = load_record(store, args.thread, args.db)
        name, url = args.model or record.model, args.base_url or record.base_url
        model = make_model(name, url, args.timeout)
        graph = build_for(record, model, lease_saver(saver, lease), store)
        status, values = read_thread(graph, record.thread_id)
        if status == "finished":
            out.console.print(f"Thread {record.thread_id} has already finished.")
            out.print_result(values)
            save_summary(graph, store, record.thread_id, args.db)  # a thread run before them
            return 0
        if (name, url) != (record.model, record.base_url):
            record = record.moved_to(name, url)
            record.save(store)
        # A run killed before its first checkpoint has nothing to resume: start it again; one
        # waiting for approval asks again.
        payload = {"question": record.question} if status == "unknown" else None
        updates = None if status == AWAITING else start(graph, payload, record.thread_id)
        out.console.print(f"[dim]resuming thread {record.thread_id} ({name})[/dim]")
        code = stream_run(graph, updates, record, args.db, lease)
        save_summary(graph, store, record.thread_id, args.db)
        return code


def cmd_demo(args: argparse.Namespace) -> int:
    """The offline demo: a scripted model drives the real graph, search and calculator."""
    out.console.print(
        "[bold]reactgraph demo[/bold]: the model is [bold yellow]SCRIPTED[/bold "
        "yellow] (no LLM is called); the graph, the local search over tools/corpus "
        "and the calculator are real."
    )
    out.console.print(f"\nQuestion: {DEMO_QUESTION}")
    model = ScriptedChatModel(replies=DEMO_REPLIES)
    graph = build_graph("transcript", model=model, tools=default_tools())
    values: dict[str, Any] = {}
    for mode, chunk in graph.stream({"question": DEMO_QUESTION}, stream_mode=["updates", "values"]):
        if mode == "values":
            values = chunk
        else:
            for turn in out.turns_in([chunk]):
                out.print_turn(turn)
    out.print_result(values)
    return 0 if values.get("status") == "answered" else 1


def cmd_batch(args: argparse.Namespace) -> int:
    from reactgraph.app.batchfile import run_file

    engine = engine_from(args)
    recipe = recipe_from(args)
    return run_file(
        recipe,
        args.questions,
        args.out,
        workers=args.workers,
        concurrency=args.concurrency,
        **engine,
    )


def engine_from(args: argparse.Namespace) -> dict[str, Any]:
    """``--engine`` and ``--ray-address`` as ``run_jobs`` takes them, checked."""
    try:
        check_engine(args.engine, args.ray_address)
    except ValueError:
        raise UsageError("--ray-address is for --engine ray") from None
    except ImportError:
        raise UsageError("--engine ray needs Ray: pip install 'reactgraph[ray]'") from None
    return {"engine": args.engine, "address": args.ray_address}


def recipe_from(args: argparse.Namespace, variants: list[str] | None = None) -> Recipe:
    """How each worker of a batch (or an eval, of ``variants``) builds its graph, checked here
    first so a bad option is one line before any worker starts."""
    if args.corpus is not None and not os.path.isdir(args.corpus):
        raise UsageError(f"corpus folder not found: {args.corpus}")
    settings, options = run_settings(args, variants)
    make_model(args.model, args.base_url, args.timeout)  # a key or a server, or say what to set
    db = database_backend(args.db).address(args.db)
    with open_db(db):
        pass  # a database that cannot be used is one line now, not one per worker
    recipe = Recipe(
        variant=args.variant,
        model=args.model,
        base_url=args.base_url or os.environ.get("OPENAI_BASE_URL") or None,
        timeout=args.timeout,
        corpus=os.path.abspath(args.corpus) if args.corpus else None,
        settings=settings,
        db=db,
        prune=args.prune,
        options=options,
        concurrency=args.concurrency,
    )
    if not options.mcp:  # a server's tools are listed by each worker, not twice
        for name in variants or [args.variant]:
            # What only a built graph can tell (--approve naming a tool there is not, a tool
            # named as a variant's own action): one line now, not a failed run per question.
            # The stand-in states a context window, so nothing looks its own up (or warns that
            # it cannot): the real model's is looked up, once, where the runs are made.
            record = dataclasses.replace(recipe, variant=name).record("check", "check")
            build_for(record, ScriptedChatModel(replies=[], profile=STAND_IN_PROFILE))
    return recipe
