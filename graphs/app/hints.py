"""What the command line says when a command stops or gets text it cannot use: the resume hint,
what Ctrl-C says for each command, and the check that text arguments are UTF-8. Imports only the
standard library and the flags, so the Ctrl-C guard can use it before LangChain loads."""

from __future__ import annotations

import argparse
import shlex

from reactgraph.app.flags import UsageError
from reactgraph.storage.backends import database_backend


def resume_hint(thread: str, db: str) -> str:
    """The command that continues the thread, from any folder."""
    where = database_backend(db).address(db)
    return f"reactgraph resume {shlex.quote(thread)} --db {shlex.quote(where)}"


def saved_hint(thread: str, db: str) -> str:
    """What a stopped run says: it is kept, and how to go on with it."""
    return f"The run is saved; resume it with:\n  {resume_hint(thread, db)}"


def interrupted_hint(args: argparse.Namespace) -> str | None:
    """What Ctrl-C says, once the command is parsed (``reactgraph.app.interrupts``); None for
    ``ask``, which says it once its thread is recorded."""
    if args.command == "ask":
        return None
    if args.command == "resume":
        return saved_hint(args.thread, args.db)
    if args.command == "batch":
        return (
            f"Finished questions are kept in {args.out}; "
            "run the same command again to finish the rest."
        )
    if args.command == "eval":
        return "Finished pairs are kept; run the same command again to finish the rest."
    if args.command == "prune":
        return "Threads pruned so far stay pruned; run the same command again for the rest."
    return "Nothing was changed."


TEXT_ARGUMENTS = ("question", "thread", "threads", "model", "base_url", "variants")
"""The arguments that are text (stored, sent, printed), not paths: they must be UTF-8."""


def check_text(args: argparse.Namespace) -> None:
    """A text argument holding a byte that is not UTF-8 (Python keeps it as a lone surrogate,
    which nothing can store or print) is the person's mistake: one line."""
    for name in TEXT_ARGUMENTS:
        value = getattr(args, name, None)
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str):
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                byte = ord(text[error.start]) & 0xFF
                option = name.replace("_", "-")
                raise UsageError(
                    f"the {option} is not UTF-8 text: byte 0x{byte:02x} at position "
                    f"{error.start}; pass it in UTF-8"
                ) from None
