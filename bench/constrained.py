"""Grammar-constrained decoding on a real local model: SmolLM2-135M-Instruct on llama-cpp-python's
server, every variant in the text format, ``constrained_decoding`` off against gbnf, on the
bundled questions. Per variant and setting: replies the parser could not read, corrective
Observations, how the runs ended, exact match, and tokens and seconds per question. Nothing is
asserted (a 135M model cannot answer these: this shows what the grammar changes).

    make bench-real-model        # or: python bench/constrained.py [--questions N] [--max-turns N]

The figures, with the date and machine, are in docs/constrained-decoding.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reactgraph import build_graph  # noqa: E402
from reactgraph.app.eval.score import score_answer  # noqa: E402
from reactgraph.models import chat_model  # noqa: E402
from reactgraph.tools import calculator, search_tools  # noqa: E402
from reactgraph.variants import REGISTRY  # noqa: E402
from tests.llama_server import ALIAS, LlamaServer  # noqa: E402

QUESTIONS = ROOT / "graphs/app/eval/bundled.jsonl"
CAP = 64
MODES = ("off", "gbnf")


def measure(graph: Any, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """One graph over the questions: its row of figures."""
    unreadable = corrective = tokens = 0
    em = 0.0
    statuses: Counter[str] = Counter()
    started = time.perf_counter()
    for line in questions:
        result = graph.invoke({"question": line["question"]})
        statuses[result["status"]] += 1
        em += score_answer(result.get("answer"), line["answer"]).em
        for turn in result["turns"]:
            tokens += turn["prompt_tokens"] + turn["completion_tokens"]
            if turn["kind"] == "invalid":
                corrective += 1  # each invalid turn is answered by a corrective Observation
                unreadable += not turn.get("cut")  # not cut at the cap: unreadable as written
    n = len(questions)
    return {
        "unreadable": unreadable,
        "corrective": corrective,
        "statuses": ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
        "em": em / n,
        "tokens": tokens / n,
        "seconds": (time.perf_counter() - started) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=38, help="the first N bundled ones")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--variants", default=",".join(REGISTRY))
    args = parser.parse_args()
    lines = QUESTIONS.read_text().splitlines()[: args.questions]
    questions = [json.loads(line) for line in lines]
    log = Path(tempfile.mkdtemp(prefix="bench-llama-")) / "server.log"
    server = LlamaServer(log, threads=1, interrupt=False).start()
    rows = []
    try:
        for variant in args.variants.split(","):
            for mode in MODES:
                # Not streamed: llama-cpp-python's server reports usage only then.
                model = chat_model(
                    ALIAS, base_url=server.url, timeout=600, temperature=0, stream=False
                )
                settings: dict[str, Any] = {
                    "max_turns": args.max_turns,
                    "max_completion_tokens": CAP,
                }
                if REGISTRY[variant].setting("context_window"):
                    settings["context_window"] = 2048
                graph = build_graph(
                    variant,
                    model=model,
                    tools=[*search_tools(), calculator],
                    constrained_decoding=mode,
                    **settings,
                )
                row = measure(graph, questions)
                rows.append((variant, mode, row))
                print(variant, mode, row, file=sys.stderr, flush=True)
    finally:
        server.stop()
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(
        f"{when}; {platform.node()} ({platform.machine()}, {os.cpu_count()} cores, shared); "
        f"SmolLM2-135M-Instruct Q4_1 on llama-cpp-python 0.3.36's server, 1 thread, "
        f"temperature 0; the first {len(questions)} bundled questions, text format, "
        f"max_turns={args.max_turns}, max_completion_tokens={CAP}\n"
    )
    print(
        "| variant | constrained_decoding | unreadable replies | corrective Observations | "
        "statuses | EM | tokens/question | s/question |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for variant, mode, r in rows:
        print(
            f"| {variant} | {mode} | {r['unreadable']} | {r['corrective']} | {r['statuses']} | "
            f"{r['em']:.2f} | {r['tokens']:.0f} | {r['seconds']:.1f} |"
        )


if __name__ == "__main__":
    main()
