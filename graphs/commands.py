"""What each ``reactgraph`` command does; ``reactgraph.cli`` parses the arguments."""

from __future__ import annotations

import argparse
import os
import uuid
from typing import Any

from langchain_core.language_models import BaseChatModel

from reactgraph import build_graph
from reactgraph import console as out
from reactgraph.models import chat_model
from reactgraph.nodes.providers import ModelCallError
from reactgraph.persistence import (
    DURABILITY,
    RunRecord,
    new_record,
    open_db,
    thread_lock,
    thread_status,
)
from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES, ScriptedChatModel
from reactgraph.tools import DEFAULT_CORPUS, calculator, search_tools
from reactgraph.variants import variant


class UsageError(Exception):
    """Bad input from the person at the terminal: one line, exit code 2."""


def make_model(name: str, base_url: str | None, timeout: float) -> BaseChatModel:
    """ChatOpenAI from the options and the standard environment variables."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    key = os.environ.get("OPENAI_API_KEY") or None
    if not key and not base_url:
        raise UsageError(
            "no model to call: set OPENAI_API_KEY, or pass --base-url (or set OPENAI_BASE_URL) "
            "for an OpenAI-compatible server; `reactgraph demo` runs offline"
        )
    return chat_model(name, base_url=base_url, api_key=key, timeout=timeout)


def build_for(
    record: RunRecord,
    model: BaseChatModel,
    saver: Any = None,
    store: Any = None,
    tools: bool = True,
) -> Any:
    """The graph a recorded run was started with (``tools=False`` for reading state only)."""
    settings = dict(record.settings)
    if settings.pop("notes_in_db", False):
        settings["store"] = store
    corpus = record.corpus or str(DEFAULT_CORPUS)
    try:
        toolset = [*search_tools(corpus), calculator] if tools else []
    except ValueError as error:
        raise UsageError(str(error)) from None
    return build_graph(record.variant, model=model, tools=toolset, checkpointer=saver, **settings)


def stream_run(graph: Any, payload: dict[str, Any] | None, record: RunRecord, db: str) -> int:
    """Run (or resume) a thread, printing each turn live; Ctrl-C leaves it resumable."""
    config = {"configurable": {"thread_id": record.thread_id}}
    resume = f"reactgraph resume {record.thread_id} --db {db}"
    try:
        updates = graph.stream(payload, config, stream_mode="updates", durability=DURABILITY)
        for turn in out.turns_in(updates):
            out.print_turn(turn)
    except KeyboardInterrupt:
        out.errors.print(f"\nInterrupted. The run is saved; resume it with:\n  {resume}")
        return 130
    except ModelCallError as error:
        out.fail(f"{error}. The run is saved; resume it with: {resume}")
        return 1
    values = graph.get_state(config).values
    out.print_result(values)
    return 0 if values.get("status") == "answered" else 1


def cmd_ask(args: argparse.Namespace) -> int:
    if args.corpus is not None and not os.path.isdir(args.corpus):
        raise UsageError(f"corpus folder not found: {args.corpus}")
    model = make_model(args.model, args.base_url, args.timeout)
    settings: dict[str, Any] = {"tool_timeout": args.tool_timeout}
    if args.max_turns is not None:
        settings["max_turns"] = args.max_turns
    spec = variant(args.variant)
    if spec.setting("notes_dir") is not None:
        settings.update(notes_in_db=args.notes_in_db, notes_dir=args.notes_dir)
    thread = args.thread or uuid.uuid4().hex[:12]
    record = new_record(
        thread,
        args.question,
        args.variant,
        args.model,
        args.base_url or os.environ.get("OPENAI_BASE_URL"),
        args.corpus,
        settings,
    )
    with open_db(args.db) as (saver, store):
        if RunRecord.load(store, thread) is not None:
            raise UsageError(
                f"thread {thread} already exists in {args.db}; "
                f"`reactgraph resume {thread}` or pick another --thread"
            )
        graph = build_for(record, model, saver, store)
        with thread_lock(args.db, thread):
            record.save(store)
            out.console.print(f"[dim]thread {thread} ({args.variant}, {args.model})[/dim]")
            return stream_run(graph, {"question": args.question}, record, args.db)


def load_record(store: Any, thread: str, db: str) -> RunRecord:
    record = RunRecord.load(store, thread)
    if record is None:
        raise UsageError(f"unknown thread {thread!r} in {db} (`reactgraph threads` lists them)")
    return record


def cmd_resume(args: argparse.Namespace) -> int:
    with open_db(args.db) as (saver, store):
        record = load_record(store, args.thread, args.db)
        model = make_model(record.model, record.base_url, args.timeout)
        graph = build_for(record, model, saver, store)
        if thread_status(graph, record.thread_id) == "finished":
            out.console.print(f"Thread {record.thread_id} has already finished.")
            out.print_result(graph.get_state({"configurable": {"thread_id": args.thread}}).values)
            return 0
        with thread_lock(args.db, record.thread_id):
            out.console.print(f"[dim]resuming thread {record.thread_id}[/dim]")
            return stream_run(graph, None, record, args.db)


def cmd_show(args: argparse.Namespace) -> int:
    with open_db(args.db) as (saver, store):
        record = load_record(store, args.thread, args.db)
        graph = build_for(record, ScriptedChatModel(), saver, store, tools=False)
        values = graph.get_state({"configurable": {"thread_id": record.thread_id}}).values
        out.print_run(record, thread_status(graph, record.thread_id), values)
    return 0


def cmd_threads(args: argparse.Namespace) -> int:
    rows = []
    with open_db(args.db) as (saver, store):
        for record in RunRecord.all(store):
            graph = build_for(record, ScriptedChatModel(), saver, store, tools=False)
            values = graph.get_state({"configurable": {"thread_id": record.thread_id}}).values
            status = thread_status(graph, record.thread_id)
            shown = values.get("status") if status == "finished" else status
            rows.append((record, shown or status, len(values.get("turns") or [])))
    out.print_threads(rows)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The offline demo: a scripted model drives the real graph, search and calculator."""
    out.console.print(
        "[bold]reactgraph demo[/bold]: the model is [bold yellow]SCRIPTED[/bold "
        "yellow] (no LLM is called); the graph, the local search over tools/corpus "
        "and the calculator are real."
    )
    out.console.print(f"\nQuestion: {DEMO_QUESTION}")
    model = ScriptedChatModel(replies=DEMO_REPLIES)
    graph = build_graph("transcript", model=model, tools=[*search_tools(), calculator])
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
    from reactgraph.batchfile import run_file

    model = make_model(args.model, args.base_url, args.timeout)
    record = new_record(
        "batch",
        "",
        args.variant,
        args.model,
        args.base_url,
        args.corpus,
        {"tool_timeout": args.tool_timeout}
        | ({"max_turns": args.max_turns} if args.max_turns else {}),
    )
    graph = build_for(record, model)
    return run_file(graph, args.questions, args.out, args.concurrency)


def cmd_graph(args: argparse.Namespace) -> int:
    """Print a variant's Mermaid drawing, or write it as a PNG (pygraphviz, no network)."""
    # A drawing needs no model: a fixed window spares the lookup (and its warning).
    window = {"context_window": 128_000} if variant(args.variant).setting("context_window") else {}
    graph = build_graph(args.variant, model=ScriptedChatModel(), tools=[], **window)
    drawing = graph.get_graph()
    if args.png is None:
        out.console.print(drawing.draw_mermaid(), markup=False)
        return 0
    try:
        drawing.draw_png(args.png)
    except ImportError:
        raise UsageError("writing a PNG needs pygraphviz: pip install 'reactgraph[draw]'") from None
    out.console.print(f"wrote {args.png}")
    return 0
