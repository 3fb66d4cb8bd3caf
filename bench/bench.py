"""reactgraph's benchmark: every goal of the issues, side by side with the anchors, in one run.

Run with ``make bench`` (or ``python bench/bench.py [SECTION ...]``). Every figure is measured in
this run on this machine; nothing here is a test. Sections:

- ``overhead``: framework time per turn against LangGraph's prebuilt agent and the classic
  AgentExecutor (instant model and tool);
- ``prompt-tokens`` and ``compaction``: what each variant sends the model as a run grows, and
  the cost of the compaction variants' token check;
- ``storage``: 1,000-turn runs on SQLite and PostgreSQL, a SIGKILL and resume, ``show``;
- ``history``: reading a thread (show, the whole history, a time travel) as it grows, and a
  large question on disk;
- ``conversation``: 1,000 questions on one thread (``history_runs``): the prompt, the time and
  the database growth per question stay flat;
- ``concurrency``: 100 runs at once over HTTP, in one process and in worker processes;
- ``batch``: ``reactgraph batch --workers 2`` on 1,000 questions of 40 turns, and pruning;
- ``startup``: each command's start-up against ``python -c pass`` and
  ``python -c "import langgraph.graph"``;
- ``engines``: the same batch through the process pool and through Ray on one node.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from collections.abc import Callable

# Each section's module and function, imported only when the section runs (a section may
# need what another tree lacks: ``before_after.py`` runs one section against an older tree).
SECTIONS: dict[str, tuple[str, str]] = {
    "overhead": ("overhead", "bench_overhead"),
    "prompt-tokens": ("tokens", "bench_prompt_tokens"),
    "compaction": ("tokens", "bench_compaction"),
    "storage": ("storage", "bench_storage"),
    "history": ("history", "bench"),
    "conversation": ("conversation", "bench_conversation"),
    "concurrency": ("concurrency", "bench_concurrency"),
    "batch": ("batch", "bench_batch"),
    "startup": ("startup", "bench_startup"),
    "killbatch": ("killbatch", "bench_killbatch"),
    "listing": ("listing", "bench_listing"),
    "engines": ("engines", "bench_engines"),
}


def section(name: str) -> Callable[[int], None]:
    """A section's function, its module imported now."""
    module, function = SECTIONS[name]
    found: Callable[[int], None] = getattr(importlib.import_module(module), function)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"any of: {', '.join(SECTIONS)} (default all)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the timed sections")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    for name in args.sections or SECTIONS:
        section(name)(args.repeats)


if __name__ == "__main__":
    main()
