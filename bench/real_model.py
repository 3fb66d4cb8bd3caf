"""The real model on the real server: SmolLM2-135M-Instruct on llama-cpp-python's server, every
variant on the first bundled questions. Per-call latency, tokens per turn, and how the runs
ended; nothing here is asserted (a 135M model cannot answer them: this shows cost and
robustness, not accuracy).

Section ``text``: every variant in the text action format, on the model's own chat template.
Section ``tools``: the same server with ``--chat_format chatml-function-calling``, the
transcript variant in both action formats and the notes variant with native tool calls, side
by side with the anchor, LangGraph's prebuilt agent, on the same server, model and tools.

    make bench-real-model            # or: python bench/real_model.py [--questions N] [SECTION]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reactgraph import build_graph  # noqa: E402
from reactgraph.app.eval.prebuilt import Contender  # noqa: E402
from reactgraph.models import chat_model  # noqa: E402
from reactgraph.tools import calculator, search_tools  # noqa: E402
from reactgraph.variants import REGISTRY  # noqa: E402
from tests.llama_server import ALIAS, LlamaServer  # noqa: E402

QUESTIONS = ROOT / "graphs/app/eval/bundled.jsonl"
CAP = 64
MAX_TURNS = 4


def measure(name: str, run: Any, questions: list[str]) -> tuple[Any, ...]:
    """One contender over the questions: its row of figures."""
    latencies, completions, prompts, statuses, cut, calls = [], [], [], Counter(), 0, 0
    started = time.perf_counter()
    for question in questions:
        asked = time.perf_counter()
        result = run(question)
        # The prebuilt agent times no call of its own: its run's wall over its calls.
        each = (time.perf_counter() - asked) / max(1, len(result["turns"]))
        statuses[result["status"]] += 1
        for turn in result["turns"]:
            latencies.append(turn.get("model_latency_s", each))
            completions.append(turn["completion_tokens"])
            prompts.append(turn["prompt_tokens"])
            cut += bool(turn.get("cut"))
            calls += len(turn.get("tool_calls") or [])
    return (
        name,
        len(prompts),
        statistics.median(latencies),
        max(latencies),
        statistics.mean(prompts),
        statistics.mean(completions),
        cut,
        calls,
        ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
        time.perf_counter() - started,
    )


def graph_run(model: Any, variant: str, **settings: Any) -> Any:
    settings = {"max_turns": MAX_TURNS, "max_completion_tokens": CAP, **settings}
    if REGISTRY[variant].setting("context_window"):
        settings["context_window"] = 2048
    graph = build_graph(variant, model=model, tools=[*search_tools(), calculator], **settings)
    return lambda question: graph.invoke({"question": question})


def prebuilt_run(model: Any) -> Any:
    contender = Contender(model, [*search_tools(), calculator], None, MAX_TURNS)
    return lambda question: asyncio.run(contender.ainvoke({"question": question}, {}))


def section(chat_format: str | None, questions: list[str]) -> list[tuple[Any, ...]]:
    log = Path(tempfile.mkdtemp(prefix="bench-llama-")) / "server.log"
    server = LlamaServer(log, threads=1, interrupt=False, chat_format=chat_format).start()
    try:
        # Not streamed: llama-cpp-python's server reports usage only then (and its
        # chatml-function-calling cannot stream the tool calls it chooses).
        model = chat_model(ALIAS, base_url=server.url, timeout=600, temperature=0, stream=False)
        if chat_format is None:
            runs = {v: graph_run(model, v) for v in REGISTRY}
        else:
            runs = {
                "transcript, text": graph_run(model, "transcript"),
                "transcript, tool_calls": graph_run(
                    model, "transcript", action_format="tool_calls"
                ),
                "notes, tool_calls": graph_run(model, "notes", action_format="tool_calls"),
                "LangGraph prebuilt agent": prebuilt_run(model),
            }
        return [measure(name, run, questions) for name, run in runs.items()]
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("sections", nargs="*", default=["text", "tools"], help="text, tools")
    args = parser.parse_args()
    lines = QUESTIONS.read_text().splitlines()[: args.questions]
    questions = [json.loads(line)["question"] for line in lines]
    for name in args.sections:
        chat_format = "chatml-function-calling" if name == "tools" else None
        rows = section(chat_format, questions)
        print(
            f"SmolLM2-135M-Instruct Q4_1, llama-cpp-python 0.3.36 server "
            f"(chat format: {chat_format or 'the model s own'}), 1 thread; {len(questions)} "
            f"bundled questions, max_turns={MAX_TURNS}, max_completion_tokens={CAP}\n"
        )
        print(
            "| contender | calls | median s/call | max s/call | prompt tok/call | completion "
            "tok/call | cut at cap | tool calls | statuses | wall s |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for v, n, med, top, p, c, k, t, s, wall in rows:
            print(
                f"| {v} | {n} | {med:.2f} | {top:.2f} | {p:.0f} | {c:.1f} | {k} | {t} | {s} "
                f"| {wall:.0f} |"
            )
        print()


if __name__ == "__main__":
    main()
