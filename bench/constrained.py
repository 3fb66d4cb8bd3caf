"""Grammar-constrained decoding on a real local model: SmolLM2-135M-Instruct on llama-cpp-python's
server, every variant in the text format, ``constrained_decoding`` off against gbnf, on the
bundled questions. Per variant and setting: replies the parser could not read, corrective
Observations, how the runs ended, exact match, and tokens and seconds per question. Nothing is
asserted (a 135M model cannot answer these: this shows what the grammar changes).

    make bench-real-model        # or: python bench/constrained.py [--questions N] [--max-turns N]

The figures, with the date and machine, are in docs/constrained-decoding.md.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from smallmodel import CAP, arguments, measured_on, per_question, small_model

from reactgraph import build_graph
from reactgraph.app.eval.score import score_answer
from reactgraph.tools import calculator, search_tools
from reactgraph.variants import REGISTRY

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
        "tokens": tokens / n,
        **per_question(statuses, em, n, started),
    }


def main() -> None:
    args, questions = arguments(__doc__, "--variants", ",".join(REGISTRY))
    rows = []
    with small_model() as model:
        for variant in args.variants.split(","):
            for mode in MODES:
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
    print(
        f"{measured_on(questions)}text format, max_turns={args.max_turns}, "
        f"max_completion_tokens={CAP}\n"
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
