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
import logging
from collections.abc import Callable

from batch import bench_batch
from concurrency import bench_concurrency
from conversation import bench_conversation
from engines import bench_engines
from history import bench as bench_history
from killbatch import bench_killbatch
from listing import bench_listing
from overhead import bench_overhead
from startup import bench_startup
from storage import bench_storage
from tokens import bench_compaction, bench_prompt_tokens

SECTIONS: dict[str, Callable[[int], None]] = {
    "overhead": bench_overhead,
    "prompt-tokens": bench_prompt_tokens,
    "compaction": bench_compaction,
    "storage": bench_storage,
    "history": bench_history,
    "conversation": bench_conversation,
    "concurrency": bench_concurrency,
    "batch": bench_batch,
    "startup": bench_startup,
    "killbatch": bench_killbatch,
    "listing": bench_listing,
    "engines": bench_engines,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("sections", nargs="*", help=f"any of: {', '.join(SECTIONS)} (default all)")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the timed sections")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    for section in args.sections or SECTIONS:
        SECTIONS[section](args.repeats)


if __name__ == "__main__":
    main()
