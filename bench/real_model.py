"""The real model on the real server: SmolLM2-135M-Instruct on llama-cpp-python's server, every
variant on the first bundled questions. Per-call latency, tokens per turn, and how the runs
ended; nothing here is asserted (a 135M model cannot answer them: this shows cost and
robustness, not accuracy).

    make bench-real-model            # or: python bench/real_model.py [--questions N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reactgraph import build_graph  # noqa: E402
from reactgraph.models import chat_model  # noqa: E402
from reactgraph.tools import calculator, search_tools  # noqa: E402
from reactgraph.variants import REGISTRY  # noqa: E402
from tests.llama_server import ALIAS, LlamaServer  # noqa: E402

QUESTIONS = ROOT / "graphs/app/eval/bundled.jsonl"
CAP = 64
MAX_TURNS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=3)
    args = parser.parse_args()
    lines = QUESTIONS.read_text().splitlines()[: args.questions]
    questions = [json.loads(line)["question"] for line in lines]
    log = Path(tempfile.mkdtemp(prefix="bench-llama-")) / "server.log"
    server = LlamaServer(log, threads=1).start()
    rows = []
    try:
        # chat_model's choice: this server sends no usage on a stream, so it is called plain.
        model = chat_model(ALIAS, base_url=server.url, timeout=600, temperature=0)
        for variant in REGISTRY:
            settings = {"max_turns": MAX_TURNS, "max_completion_tokens": CAP}
            if REGISTRY[variant].setting("context_window"):
                settings["context_window"] = 2048
            graph = build_graph(
                variant, model=model, tools=[*search_tools(), calculator], **settings
            )
            latencies, completions, prompts, statuses, cut = [], [], [], Counter(), 0
            started = time.perf_counter()
            for question in questions:
                result = graph.invoke({"question": question})
                statuses[result["status"]] += 1
                for turn in result["turns"]:
                    latencies.append(turn["model_latency_s"])
                    completions.append(turn["completion_tokens"])
                    prompts.append(turn["prompt_tokens"])
                    cut += bool(turn.get("cut"))
            rows.append(
                (
                    variant,
                    len(latencies),
                    statistics.median(latencies),
                    max(latencies),
                    statistics.mean(prompts),
                    statistics.mean(completions),
                    cut,
                    ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
                    time.perf_counter() - started,
                )
            )
    finally:
        server.stop()
    print(
        f"SmolLM2-135M-Instruct Q4_1, llama-cpp-python 0.3.36 server, 1 thread; "
        f"{len(questions)} bundled questions, max_turns={MAX_TURNS}, "
        f"max_completion_tokens={CAP}\n"
    )
    print(
        "| variant | calls | median s/call | max s/call | prompt tok/turn | completion "
        "tok/turn | cut at cap | statuses | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for v, n, med, top, p, c, k, s, wall in rows:
        print(f"| {v} | {n} | {med:.2f} | {top:.2f} | {p:.0f} | {c:.1f} | {k} | {s} | {wall:.0f} |")


if __name__ == "__main__":
    main()
