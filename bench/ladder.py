"""The model ladder on a real local model: SmolLM2-135M-Instruct on llama-cpp-python's server,
the bundled questions, the text format. The first rung alone (no grammar), then the ladder of
the same server without a grammar and with one (``Rung(model, constrained_decoding="gbnf")``).
Per setting: how the runs ended, how many moved up and why, the calls on each rung, exact
match, and wall time per question. Nothing is asserted (a 135M model cannot answer these: this
shows what the ladder changes).

    make bench-real-model        # or: python bench/ladder.py [--questions N] [--max-turns N]

The figures, with the date and machine, are in bench/README.md ("The model ladder").
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from smallmodel import CAP, arguments, measured_on, per_question, small_model

from reactgraph import Rung, build_graph
from reactgraph.app.eval.score import score_answer
from reactgraph.tools import calculator, search_tools


def measure(graph: Any, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """One graph over the questions: its row of figures."""
    statuses: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    em = 0.0
    started = time.perf_counter()
    for line in questions:
        result = graph.invoke({"question": line["question"]})
        statuses[result["status"]] += 1
        em += score_answer(result.get("answer"), line["answer"]).em
        for move in result.get("escalations") or []:
            reasons[move["reason"]] += 1
        split = result["usage"].get("by_model")
        if split is None:  # no ladder: every turn is one call of the first rung
            calls["first rung"] += len(result["turns"])
        else:
            for name, entry in split.items():
                calls[name] += entry["calls"]
    return {
        "moved": ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "-",
        "calls": ", ".join(f"{k}: {v}" for k, v in calls.items()),
        **per_question(statuses, em, len(questions), started),
    }


def main() -> None:
    args, questions = arguments(__doc__, "--variant", "transcript")
    rows = []
    with small_model() as model:
        for label in ("first rung alone", "ladder: + the same with gbnf"):
            ladder = [Rung(model, constrained_decoding="gbnf")] if "ladder" in label else None
            graph = build_graph(
                args.variant,
                model=model,
                tools=[*search_tools(), calculator],
                max_turns=args.max_turns,
                max_completion_tokens=CAP,
                escalate_to=ladder,
            )
            row = measure(graph, questions)
            rows.append((label, row))
            print(label, row, file=sys.stderr, flush=True)
    print(
        f"{measured_on(questions)}{args.variant}, text format, max_turns={args.max_turns}, "
        f"max_completion_tokens={CAP}, escalate_after=2\n"
    )
    print("| setting | statuses | moved up (why) | calls per rung | EM | s/question |")
    print("|---|---|---|---|---|---|")
    for label, r in rows:
        print(
            f"| {label} | {r['statuses']} | {r['moved']} | {r['calls']} | {r['em']:.2f} | "
            f"{r['seconds']:.1f} |"
        )


if __name__ == "__main__":
    main()
