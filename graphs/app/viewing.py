"""The commands that only read: ``show``, ``threads`` and ``graph``. They open the database
read-only, so they never create it (or its folder) and never need to write to it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reactgraph import build_graph
from reactgraph.app import console as out
from reactgraph.app.options import UsageError, load_record, reader
from reactgraph.nodes.compaction import FALLBACK_WINDOW
from reactgraph.scripted import ScriptedChatModel
from reactgraph.storage.database import NoDatabase, RunRecord, open_db, thread_status
from reactgraph.variants import variant


def cmd_show(args: argparse.Namespace) -> int:
    with open_db(args.db, read_only=True) as (saver, store):
        record = load_record(store, args.thread, args.db)
        graph = reader(record.variant, saver)
        values = graph.get_state({"configurable": {"thread_id": record.thread_id}}).values
        out.print_run(record, thread_status(graph, record.thread_id), values)
    return 0


def cmd_threads(args: argparse.Namespace) -> int:
    rows = []
    try:
        with open_db(args.db, read_only=True) as (saver, store):
            graphs: dict[str, Any] = {}
            for record in RunRecord.all(store):
                graph = graphs.get(record.variant) or reader(record.variant, saver)
                graphs[record.variant] = graph
                config = {"configurable": {"thread_id": record.thread_id}}
                values = graph.get_state(config).values
                status = thread_status(graph, record.thread_id)
                shown = values.get("status") if status == "finished" else status
                rows.append((record, shown or status, len(values.get("turns") or [])))
    except NoDatabase as missing:
        # Nothing has run against this path yet: an empty listing, not an error.
        out.console.print(f"[dim]no threads: {missing}[/dim]")
        return 0
    out.print_threads(rows)
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    """Print a variant's Mermaid drawing, or write it as a PNG (pygraphviz, no network)."""
    # A drawing needs no model: a fixed window spares the lookup (and its warning).
    spec = variant(args.variant)
    window = {"context_window": FALLBACK_WINDOW} if spec.setting("context_window") else {}
    graph = build_graph(args.variant, model=ScriptedChatModel(), tools=[], **window)
    drawing = graph.get_graph()
    if args.png is None:
        out.console.print(drawing.draw_mermaid(), markup=False)
        return 0
    folder = Path(args.png).parent
    if not folder.is_dir():
        # Checked first: graphviz would print its own warnings before failing.
        raise UsageError(f"cannot write {args.png}: no folder {folder}")
    try:
        drawing.draw_png(args.png)
    except ImportError:
        raise UsageError("writing a PNG needs pygraphviz: pip install 'reactgraph[draw]'") from None
    except OSError as error:
        raise UsageError(f"cannot write {args.png}: {error.strerror or error}") from None
    out.console.print(f"wrote {args.png}")
    return 0
