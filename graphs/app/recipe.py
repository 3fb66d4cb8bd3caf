"""What a batch worker runs: each question on its own thread of the database, under the thread's
lock, resumed if a killed worker left it half done, and its run recorded for ``show``.

A ``Recipe`` says how to build the graph; it is plain data, so it crosses into worker processes,
where each worker builds its own model client, tools and database connections once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from reactgraph import build_graph
from reactgraph.app import logprefix
from reactgraph.app.eval.arms import PREBUILT
from reactgraph.app.eval.prebuilt import Contender
from reactgraph.app.flags import RunOptions
from reactgraph.app.pool import Job, Runner
from reactgraph.batch import result_of
from reactgraph.models import DEFAULT_TIMEOUT_S, chat_model
from reactgraph.nodes.loop.middleware.rungs import Rung, parse_address
from reactgraph.nodes.vocabulary.standing import AWAITING
from reactgraph.storage.database import RunRecord, aopen_db, new_record
from reactgraph.storage.locks import GuardedSaver, Lease, ThreadBusy, athread_lock
from reactgraph.storage.pruning import prune_thread
from reactgraph.storage.snapshots import aread_thread
from reactgraph.storage.summaries import asave_summary
from reactgraph.tools import default_tools
from reactgraph.tools.loading import load_tools
from reactgraph.variants import variant as spec_of


@dataclass(frozen=True)
class Recipe:
    """Everything a worker needs to build the graph of a batch, as plain data."""

    variant: str
    model: str
    base_url: str | None
    timeout: float
    corpus: str | None
    settings: dict[str, Any]
    db: str
    prune: bool = False
    options: RunOptions = dataclasses.field(default_factory=RunOptions)
    """The command line's own options (notes store, MCP servers, bundled tools)."""
    concurrency: int = 8
    model_factory: Callable[[], Any] | None = None
    """Builds the chat model instead of ``chat_model(model, ...)``: a scripted model in tests,
    any LangChain chat model from Python. Picklable (a module-level function) for workers."""

    def config(self, variant: str, **changes: Any) -> dict[str, Any]:
        """What a run's answer depends on besides its question: the model and its server, the
        variant's settings that change answers (given, changed by ``changes``, or defaulted),
        the corpus and the tools. Part of a result's identity: a result made under another
        config is not reused."""
        spec = spec_of(variant)
        built = spec.built({**taken_by(variant, self.settings), **changes}).as_dict()
        settings = {
            s.name: built[s.name] for s in spec.settings if s.knob.build and s.knob.changes_answers
        }
        options = self.options
        return {
            "model": self.model,
            "base_url": self.base_url,
            "settings": settings,
            "corpus": self.corpus,
            "tools": {
                "bundled": options.default_tools,
                "mcp": options.mcp,
                "own": list(options.tools),
            },
        }

    def record(self, thread: str, question: str) -> RunRecord:
        """The run record of one question's thread (what ``show`` and ``resume`` read)."""
        return new_record(
            thread,
            question,
            self.variant,
            self.model,
            self.base_url,
            self.corpus,
            taken_by(self.variant, self.settings),
            self.options.as_dict(),
        )


def taken_by(variant: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Those of ``settings`` that ``variant`` takes (an eval's apply to the variants that take
    them)."""
    spec = spec_of(variant)
    return {k: v for k, v in settings.items() if spec.setting(k) is not None}


def with_ladder(
    settings: dict[str, Any], model: Any, base_url: str | None, concurrency: int = 8
) -> dict[str, Any]:
    """``settings`` with the command line's ladder (``--escalate-to MODEL[@BASE_URL]``) made
    into chat models with the same provider settings as ``--model``: its server (unless the
    rung names one), its key, its timeout."""
    texts = settings.get("escalate_to")
    if not texts:
        return settings
    timeout = getattr(model, "request_timeout", None)
    rungs = []
    for text in texts:
        name, url = parse_address(text)
        rung = chat_model(
            name,
            base_url=url or base_url or os.environ.get("OPENAI_BASE_URL") or None,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            timeout=timeout if isinstance(timeout, int | float) else DEFAULT_TIMEOUT_S,
            concurrency=concurrency,
        )
        rungs.append(Rung(rung, name=text))
    return {**settings, "escalate_to": rungs}


def tool_timeout(variant: str, settings: dict[str, Any]) -> float:
    """The tool timeout a graph of ``variant`` built with ``settings`` has (its spec's default
    unless given)."""
    return spec_of(variant).built(taken_by(variant, settings)).tool_timeout


def toolset(corpus: str | None, options: RunOptions, timeout: float) -> list[Any]:
    """The bundled search (over ``corpus``) and calculator unless left out, the person's own
    (``options.tools``), and the tools of the MCP servers in ``options.mcp``, each call
    bounded by ``timeout`` (the tool timeout)."""
    tools: list[Any] = []
    if options.default_tools:
        tools += default_tools(corpus)
    for address in options.tools:
        tools += load_tools(address)
    if options.mcp:
        from reactgraph.tools.mcp import load_mcp_tools, normalize_servers

        # Several servers often share tool names (add, search): then every name says its server.
        prefix = len(normalize_servers(options.mcp)) > 1
        tools += load_mcp_tools(options.mcp, call_timeout=timeout, prefix=prefix)
    return tools


def model_of(recipe: Recipe) -> Any:
    """The recipe's chat model: its factory's, or a client of its model and server."""
    if recipe.model_factory is not None:
        return recipe.model_factory()
    return chat_model(
        recipe.model,
        base_url=recipe.base_url,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        timeout=recipe.timeout,
        concurrency=recipe.concurrency,
    )


def arm_settings(variant: str, settings: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The settings a job's graph is built with: those its variant takes, with the action format
    and the grammar its eval arm names."""
    chosen = taken_by(variant, settings)
    for name in ("action_format", "constrained_decoding"):
        if extra.get(name) is not None:
            chosen[name] = extra[name]
    return chosen


@contextlib.asynccontextmanager
async def open_runner(recipe: Recipe) -> AsyncIterator[Runner]:
    """A runner for this process: one model client, one database connection, and a graph per
    variant (a job's ``extra`` may name another variant, and bring its own search pages)."""
    model = model_of(recipe)
    timeout = tool_timeout(recipe.variant, recipe.settings)
    tools = await asyncio.to_thread(toolset, recipe.corpus, recipe.options, timeout)
    async with aopen_db(recipe.db) as (saver, store):
        leases: dict[str, Lease] = {}
        guarded = GuardedSaver(saver, leases)
        graphs: dict[tuple[str, tuple[str | None, str | None]], Any] = {}

        def graph_for(job: Job) -> Any:
            extra = job.extra or {}
            variant = extra.get("variant", recipe.variant)
            # An eval's arm says its format (and its grammar).
            chosen = (extra.get("action_format"), extra.get("constrained_decoding"))
            pages = extra.get("pages")
            if (variant, chosen) in graphs and pages is None:
                return graphs[variant, chosen]
            # A question with its own pages (HotpotQA) searches those, and only those.
            own = tools if pages is None else default_tools(pages=pages)
            if variant == PREBUILT:
                cap = spec_of(recipe.variant).built(taken_by(recipe.variant, recipe.settings))
                graph: Any = Contender(model, own, guarded, cap.max_turns)
            else:
                settings = arm_settings(variant, recipe.settings, extra)
                notes = store if recipe.options.notes_in_db else None
                settings = with_ladder(settings, model, recipe.base_url, recipe.concurrency)
                graph = build_graph(
                    variant, model=model, tools=own, checkpointer=guarded, store=notes, **settings
                )
            if pages is None:
                graphs[variant, chosen] = graph
            return graph

        logprefix.install()

        async def run(job: Job) -> dict[str, Any]:
            with logprefix.running(job.name):
                return await _run_named(job)

        async def _run_named(job: Job) -> dict[str, Any]:
            config = {"configurable": {"thread_id": job.thread_id}}
            started = time.perf_counter()
            try:
                graph = graph_for(job)
                # On PostgreSQL the run's writes go over the lock's own connection.
                async with athread_lock(recipe.db, job.thread_id, saver) as lease:
                    leases[job.thread_id] = lease
                    try:
                        values = await _run_held(recipe, graph, store, job, config)
                    finally:
                        leases.pop(job.thread_id, None)
            except ThreadBusy as busy:
                return dict(result_of(job.index, job.question, job.thread_id, None, 0.0, busy))
            except Exception as error:
                elapsed = time.perf_counter() - started
                return dict(result_of(job.index, job.question, job.thread_id, None, elapsed, error))
            elapsed = time.perf_counter() - started
            return dict(result_of(job.index, job.question, job.thread_id, values, elapsed, None))

        yield run


async def _run_held(
    recipe: Recipe, graph: Any, store: Any, job: Job, config: dict[str, Any]
) -> dict[str, Any]:
    """Run (or resume, or just read) one question's thread while holding its lock. A batch
    never waits on a person: a run that stops for an approval comes back as it stands
    (``awaiting_approval``), and one still waiting is only read."""
    status, values = await aread_thread(graph, job.thread_id)
    if status == AWAITING:
        values = {**values, "__interrupt__": True}
    elif status == "interrupted":
        values = await graph.ainvoke(None, config)  # a killed worker left it half done
    elif status == "unknown":
        extra = job.extra or {}
        variant = extra.get("variant", recipe.variant)
        if variant != PREBUILT:  # the prebuilt agent's thread is not a reactgraph run to show
            settings = {**recipe.settings}
            for name in ("action_format", "constrained_decoding"):
                if extra.get(name) is not None:
                    settings[name] = extra[name]
            own = dataclasses.replace(recipe, variant=variant, settings=settings)
            record = own.record(job.thread_id, job.question)
            await asyncio.to_thread(record.save, store)
        values = await graph.ainvoke({"question": job.question}, config)
    if recipe.prune and not values.get("__interrupt__"):  # a waiting run keeps its step
        await asyncio.to_thread(prune_thread, graph, recipe.db, job.thread_id)
    if (job.extra or {}).get("variant", recipe.variant) != PREBUILT:
        await asave_summary(graph, store, job.thread_id, recipe.db)  # for `threads`, `show`
    return values
