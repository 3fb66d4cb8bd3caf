"""The ``reactgraph`` command line: ask, resume, show, threads, batch, demo."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from reactgraph import VARIANTS
from reactgraph import console as out
from reactgraph.commands import (
    UsageError,
    cmd_ask,
    cmd_batch,
    cmd_demo,
    cmd_graph,
    cmd_resume,
    cmd_show,
    cmd_threads,
)
from reactgraph.models import DEFAULT_TIMEOUT_S
from reactgraph.persistence import DEFAULT_DB, DatabaseError, ThreadBusy

DEFAULT_MODEL = "gpt-4o-mini"


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors."""

    def error(self, message: str) -> NoReturn:
        out.fail(message)
        sys.exit(2)


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {value}")
    return value


def make_parser() -> Parser:
    """The argument parser, one sub-command each."""
    parser = Parser(prog="reactgraph", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step (INFO)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    db = Parser(add_help=False)
    db.add_argument("--db", default=DEFAULT_DB, help="SQLite file or postgresql:// URL")
    run = Parser(add_help=False)
    run.add_argument("--variant", choices=VARIANTS, default="transcript")
    run.add_argument("--model", default=os.environ.get("REACTGRAPH_MODEL") or DEFAULT_MODEL)
    run.add_argument("--base-url", help="an OpenAI-compatible server (else OPENAI_BASE_URL)")
    run.add_argument("--corpus", help="folder of .md/.txt pages for search (default: bundled)")
    run.add_argument("--max-turns", type=positive_int)
    run.add_argument("--tool-timeout", type=positive_float, default=10.0)
    timeout = Parser(add_help=False)
    timeout.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        help="model request timeout in seconds",
    )
    ask = commands.add_parser("ask", parents=[run, db, timeout], help="answer a question")
    ask.add_argument("question")
    ask.add_argument("--thread", help="thread id (default: a new one)")
    ask.add_argument("--notes-dir", default="runs/notes", help="notes variant: notes folder")
    ask.add_argument("--notes-in-db", action="store_true", help="notes variant: keep notes in --db")
    ask.set_defaults(handler=cmd_ask)
    resume = commands.add_parser("resume", parents=[db, timeout], help="continue a stopped run")
    resume.add_argument("thread")
    resume.set_defaults(handler=cmd_resume)
    show = commands.add_parser("show", parents=[db], help="print a run")
    show.add_argument("thread")
    show.set_defaults(handler=cmd_show)
    threads = commands.add_parser("threads", parents=[db], help="list the runs in the database")
    threads.set_defaults(handler=cmd_threads)
    batch = commands.add_parser("batch", parents=[run, timeout], help="answer a JSONL of questions")
    batch.add_argument("questions", help='JSONL file: {"question": "...", "id": "..."} per line')
    batch.add_argument("--out", required=True, help="JSONL results, appended as runs finish")
    batch.add_argument("--concurrency", type=positive_int, default=8)
    batch.set_defaults(handler=cmd_batch)
    graph = commands.add_parser("graph", help="draw a variant (Mermaid text, or --png FILE)")
    graph.add_argument("variant", choices=VARIANTS)
    graph.add_argument("--png", help="write a PNG here instead (offline, via pygraphviz)")
    graph.set_defaults(handler=cmd_graph)
    demo = commands.add_parser("demo", help="offline demo with a scripted model")
    demo.set_defaults(handler=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    args = make_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.handler(args)
    except (UsageError, DatabaseError, ThreadBusy) as error:
        out.fail(str(error))
        return 2


if __name__ == "__main__":
    sys.exit(main())
