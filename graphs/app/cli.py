"""The ``reactgraph`` command line: ask, resume, show, threads, batch, eval, prune, graph, demo.

The parser imports no LangGraph or LangChain: ``--version`` and every ``--help`` answer at once,
and each command's module is imported only when that command runs (``handler`` names it)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from reactgraph.app import interrupts, leftovers
from reactgraph.app.engines import ENGINES
from reactgraph.app.eval.parser import add_eval_parser
from reactgraph.app.flags import UsageError, add_setting_flags
from reactgraph.models import DEFAULT_TIMEOUT_S
from reactgraph.storage.address import DEFAULT_DB
from reactgraph.variants import VARIANTS

DEFAULT_MODEL = "gpt-4o-mini"
RUNNING = "reactgraph.app.run_commands"
VIEWING = "reactgraph.app.viewing"


DESCRIPTION = """\
Answer questions with the ReAct loop (Thought, Action, Observation) as LangGraph graphs:
ask one, batch many, evaluate the variants side by side, and list, show, resume or prune
the runs kept in a database. COMMAND --help shows a command's options and their defaults."""

# What each command's exit status means: the epilog of its --help (the docs' command-line page
# has the same table; tests/test_first_hour.py checks both).
ONE_RUN = {
    0: "answered",
    1: "ended without an answer (turn_limit, stuck, stopped_early, context_exhausted), "
    "waiting for a person's approval, or a model fault: its retries spent, or a call its server "
    "refused, 4xx (the run is saved: resume it)",
}
MANY_RUNS = {
    0: "every run finished without an error, whatever its status",
    1: "some runs ended in an error (the same command run again retries them)",
}
READING = {0: "done"}
STOPPED = {
    2: "bad input (an argument, a file, an unknown thread), a database fault, or a thread "
    "another process is running",
    130: "interrupted (Ctrl-C): what finished is saved, and the command says how to go on",
}
EXIT_CODES: dict[str, dict[int, str]] = {
    "": {
        0: "answered (ask, resume, demo); every run finished without an error (batch, eval); "
        "done (the others)",
        1: f"{ONE_RUN[1]} (ask, resume, demo); some runs ended in an error (batch, eval)",
        **STOPPED,
    },
    "ask": {**ONE_RUN, **STOPPED},
    "resume": {0: "answered, or the thread had already finished", 1: ONE_RUN[1], **STOPPED},
    "demo": {**ONE_RUN, **STOPPED},
    "batch": {**MANY_RUNS, **STOPPED},
    "eval": {**MANY_RUNS, **STOPPED},
    "show": {**READING, **STOPPED},
    "threads": {**READING, **STOPPED},
    "prune": {**READING, **STOPPED},
    "graph": {**READING, **STOPPED},
}


def exit_codes(command: str) -> str:
    """The epilog of a command's --help: what its exit status means."""
    codes = EXIT_CODES[command]
    return "exit status:\n" + "\n".join(
        textwrap.fill(text, width=79, initial_indent=f"  {code:<4}", subsequent_indent=" " * 6)
        for code, text in codes.items()
    )


def exit_codes_table() -> str:
    """The docs' table of exit statuses (Markdown): one row per status, one column per group of
    commands that share their meanings."""
    groups = {"ask, resume, demo": "ask", "batch, eval": "batch", "the others": "threads"}
    codes = sorted({code for command in groups.values() for code in EXIT_CODES[command]})
    rows = ["| status | " + " | ".join(groups) + " |", "| --- |" + " --- |" * len(groups)]
    for code in codes:
        cells = [EXIT_CODES[command].get(code, "-") for command in groups.values()]
        rows.append(f"| {code} | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


class Defaults(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each option's default, except for options that have none."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, False) or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors and defaults in --help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", Defaults)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        from reactgraph.app import console as out

        out.fail(message)
        sys.exit(2)


def package_version() -> str:
    """The installed version (``pip install -e`` counts): ``reactgraph.__version__``."""
    import reactgraph

    return reactgraph.__version__


class Version(argparse.Action):
    """``--version``: looks the version up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.update(nargs=0, default=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        sys.stdout.write(f"reactgraph {package_version()}\n")
        parser.exit()


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
    parser = Parser(prog="reactgraph", description=DESCRIPTION, epilog=exit_codes(""))
    parser.add_argument("--version", action=Version, help="show the version and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step (INFO)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    db = Parser(add_help=False)
    db.add_argument("--db", default=DEFAULT_DB, help="SQLite file or postgresql:// URL")
    one = Parser(add_help=False)
    one.add_argument("--variant", choices=VARIANTS, default="transcript", help="the loop to run")
    run = Parser(add_help=False)
    run.add_argument(
        "--model",
        default=os.environ.get("REACTGRAPH_MODEL") or DEFAULT_MODEL,
        help="model name (REACTGRAPH_MODEL sets the default)",
    )
    run.add_argument("--base-url", help="an OpenAI-compatible server (else OPENAI_BASE_URL)")
    run.add_argument("--corpus", help="folder of .md/.txt pages for search (default: bundled)")
    run.add_argument(
        "--mcp",
        metavar="SERVERS_JSON",
        help="also give the agent the tools of these MCP servers (langchain-mcp-adapters' "
        'connection config: {"name": {"transport": "stdio", "command": ...}})',
    )
    run.add_argument(
        "--tools",
        action="append",
        metavar="MODULE:NAME",
        help="also give the agent your own tools: a BaseTool, a list of them, or a function "
        "returning them, as package.module:name or path/to/file.py:name (repeatable)",
    )
    run.add_argument(
        "--no-default-tools",
        action="store_true",
        help="leave out the bundled search and calculator (with --mcp or --tools)",
    )
    add_setting_flags(run)
    timeout = Parser(add_help=False)
    timeout.add_argument(
        "--timeout",
        type=positive_float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds a model call may take, the whole reply (a deadline, retried like a 5xx)",
    )
    many = Parser(add_help=False)
    many.add_argument(
        "--concurrency", type=positive_int, default=8, help="runs at once, in all workers"
    )
    many.add_argument(
        "--workers",
        type=positive_int,
        help="worker processes (default: the cores, capped by the questions)",
    )
    many.add_argument(
        "--engine",
        choices=ENGINES,
        default="local",
        help="where the runs go: worker processes on this machine, or a Ray cluster's actors "
        "(pip install 'reactgraph[ray]'; --workers then counts actors)",
    )
    many.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="the Ray cluster for --engine ray (default: RAY_ADDRESS, else a local Ray started "
        "for this run and stopped after it)",
    )
    traced = Parser(add_help=False)
    traced.add_argument(
        "--otel",
        action="store_true",
        help="send the runs' traces with OTLP (OTEL_EXPORTER_OTLP_ENDPOINT or "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else http://localhost:4318; setting either "
        "variable is enough; pip install 'reactgraph[otel]')",
    )
    ask = commands.add_parser(
        "ask", parents=[one, run, db, timeout, traced], help="answer a question"
    )
    ask.add_argument("question", help="the question")
    ask.add_argument("--thread", help="thread id (default: a new one)")
    ask.add_argument(
        "--notes-in-db", action="store_true", help="notes variants: keep notes in --db"
    )
    ask.set_defaults(handler=f"{RUNNING}:cmd_ask")
    resume = commands.add_parser(
        "resume", parents=[db, timeout, traced], help="continue a stopped run"
    )
    resume.add_argument("thread", help="the thread to continue")
    resume.add_argument("--model", help="go on with this model (default: the run's own)")
    resume.add_argument("--base-url", help="at this server (default: the run's own)")
    resume.set_defaults(handler=f"{RUNNING}:cmd_resume")
    show = commands.add_parser("show", parents=[db], help="print a run")
    show.add_argument("thread", help="the thread to print")
    show.set_defaults(handler=f"{VIEWING}:cmd_show")
    threads = commands.add_parser("threads", parents=[db], help="list the runs in the database")
    threads.set_defaults(handler=f"{VIEWING}:cmd_threads")
    batch = commands.add_parser(
        "batch", parents=[one, run, many, db, timeout, traced], help="answer a JSONL of questions"
    )
    batch.add_argument("questions", help='JSONL file: {"question": "...", "id": ...} per line')
    batch.add_argument("--out", required=True, help="JSONL results, appended as runs finish")
    keep = "keep only the final state of each finished run (no history or time travel)"
    batch.add_argument("--prune", action="store_true", help=keep)
    batch.set_defaults(handler=f"{RUNNING}:cmd_batch")
    prune = commands.add_parser(
        "prune", parents=[db], help="keep only the final state of finished runs"
    )
    prune.add_argument("threads", nargs="*", help="the threads to prune")
    prune.add_argument("--finished", action="store_true", help="every finished thread")
    prune.set_defaults(handler="reactgraph.app.prune:cmd_prune")
    add_eval_parser(commands, [run, many, timeout, traced])
    graph = commands.add_parser("graph", help="draw a variant (Mermaid text, or --png FILE)")
    graph.add_argument("variant", choices=VARIANTS, help="the variant to draw")
    graph.add_argument("--png", help="write a PNG here instead (offline, via pygraphviz)")
    graph.set_defaults(handler=f"{VIEWING}:cmd_graph")
    demo = commands.add_parser("demo", help="offline demo with a scripted model")
    demo.set_defaults(handler=f"{RUNNING}:cmd_demo")
    for name, sub in commands.choices.items():
        sub.epilog = exit_codes(name)
    return parser


def command(handler: str | Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    """A sub-command's function: ``"module:function"`` imported now (a function as it is)."""
    if callable(handler):
        return handler
    module, name = handler.split(":")
    return getattr(importlib.import_module(module), name)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script (and ``python -m``): the command, under the Ctrl-C
    guard (``interrupts``) from this first line on. Without ``argv`` (the program's own command
    line) the guard also ends the process with the command's exit code, so a Ctrl-C at any
    moment is the hint and exit 130; with ``argv`` (from Python) the code is returned."""
    try:
        interrupts.hold()  # a Ctrl-C from here on waits for the guard, never a traceback
    except KeyboardInterrupt:  # one came on the way in: the guard's too
        interrupts.hold(pending=True)
    return interrupts.run(lambda: run_command(argv), ending=argv is None)


def run_command(argv: Sequence[str] | None) -> int:
    """Parse the arguments and run the command they name."""
    args = make_parser().parse_args(argv)
    from reactgraph.app.hints import check_text, interrupted_hint

    leftovers.spare_uname()

    # Said before anything loads (LangChain takes seconds on a loaded machine): a Ctrl-C at
    # start-up stops at once, and the hint holds from the first line of every command but ask.
    hint = interrupted_hint(args)
    if hint is not None:
        interrupts.stoppable(hint)
    from reactgraph.app import console as out
    from reactgraph.app.engines import EngineError
    from reactgraph.app.results import ResultsUnwritable
    from reactgraph.storage.errors import DatabaseError, ThreadBusy

    out.configure_logging(args.verbose)
    exporting = False
    try:
        check_text(args)
        if hasattr(args, "otel"):  # the commands that run the agent
            from reactgraph.app import telemetry

            try:
                exporting = telemetry.start(args.otel)
            except telemetry.TracingUnavailable as error:
                raise UsageError(str(error)) from None
        return command(args.handler)(args)
    except (UsageError, DatabaseError, ThreadBusy, EngineError, ResultsUnwritable) as error:
        out.fail(str(error))
        return 2
    finally:
        if exporting:
            from reactgraph.app import telemetry

            telemetry.stop()


if __name__ == "__main__":
    sys.exit(main())
