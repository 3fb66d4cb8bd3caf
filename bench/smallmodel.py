"""What the benches on a real small local model share (constrained.py, ladder.py):
SmolLM2-135M-Instruct on llama-cpp-python's server, the bundled questions, the command line,
the figures every row has and the line that says where a table was measured."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reactgraph.models import chat_model  # noqa: E402
from tests.llama_server import ALIAS, LlamaServer  # noqa: E402

QUESTIONS = ROOT / "graphs/app/eval/bundled.jsonl"
CAP = 64
"""The completion-token cap of every call."""


def arguments(doc: str, option: str, default: str) -> tuple[argparse.Namespace, list[Any]]:
    """The command line (``--questions``, ``--max-turns`` and the bench's own ``option``) and
    the first ``--questions`` bundled questions."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--questions", type=int, default=38, help="the first N bundled ones")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument(option, default=default)
    args = parser.parse_args()
    lines = QUESTIONS.read_text().splitlines()[: args.questions]
    return args, [json.loads(line) for line in lines]


@contextlib.contextmanager
def small_model() -> Iterator[Any]:
    """The model on a llama-cpp-python server of one thread, for the block's length."""
    log = Path(tempfile.mkdtemp(prefix="bench-llama-")) / "server.log"
    server = LlamaServer(log, threads=1, interrupt=False).start()
    try:
        # Not streamed: llama-cpp-python's server reports usage only then.
        yield chat_model(ALIAS, base_url=server.url, timeout=600, temperature=0, stream=False)
    finally:
        server.stop()


def per_question(statuses: Counter[str], em: float, n: int, started: float) -> dict[str, Any]:
    """How the ``n`` runs ended, their mean exact match and wall seconds since ``started``."""
    return {
        "statuses": ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
        "em": em / n,
        "seconds": (time.perf_counter() - started) / n,
    }


def measured_on(questions: list[Any]) -> str:
    """The table's date, machine, model and questions (the bench adds its settings)."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{when}; {platform.node()} ({platform.machine()}, {os.cpu_count()} cores, shared); "
        f"SmolLM2-135M-Instruct Q4_1 on llama-cpp-python 0.3.36's server, 1 thread, "
        f"temperature 0; the first {len(questions)} bundled questions, "
    )
