"""What the model is sent: prompt tokens per call of every variant in the registry on the same
scripted run, and the cost of the compaction variants' token check as a run grows."""

from __future__ import annotations

import functools
import statistics
import tempfile
import time
from typing import Any

from common import LONG_QUESTION as QUESTION
from common import page, table, verdict

from reactgraph import REGISTRY, VARIANTS, build_graph
from reactgraph.scripted import ScriptedChatModel

SUMMARY = (
    "## Goal\nSummarise every page.\n## Facts found\n"
    + "\n".join(f"- page {i}: lorem ipsum (page[{i}])" for i in range(12))
    + "\n## Decisions made\nNone\n## Dead ends and errors\nNone\n## Next step\nRead on."
)
COMPACTION_WINDOW = 16_000


def long_run(variant: str, turns: int) -> dict[str, Any]:
    """A scripted run of ``turns`` turns over 2,000-character pages; the notes variants rewrite
    their notes every 8 turns, the compaction variants get a 16,000-token window."""
    spec = REGISTRY[variant]
    replies = []
    for i in range(turns):
        if spec.setting("window_turns") and i % 8 == 0:
            notes = "\n".join(f"- [x] page {j}: fact {j} (source: page[{j}])" for j in range(i))
            replies.append(f"Thought: record progress.\nAction: update_notes[{notes[:3900]}]")
        else:
            replies.append(f"Thought: read the next page.\nAction: page[{i}]")
    model = ScriptedChatModel(replies=[*replies, "Final Answer: done"])
    extra: dict[str, Any] = {}
    if spec.setting("context_window"):
        summarizer = ScriptedChatModel(replies=[SUMMARY] * turns)
        extra = {"context_window": COMPACTION_WINDOW, "summarizer": summarizer}
    if spec.setting("notes_dir"):
        extra["notes_dir"] = tempfile.mkdtemp(prefix="reactgraph-bench-notes-")
    graph = build_graph(
        variant, model=model, tools=[page], max_turns=turns, max_observation_chars=2000, **extra
    )
    return graph.invoke({"question": QUESTION})


def prompt_tokens(out: dict[str, Any]) -> list[int]:
    return [turn["prompt_tokens"] for turn in out["turns"]]


def prompt_table(runs: dict[str, list[int]], marks: list[int]) -> None:
    header = ["variant", *(f"call {m}" for m in marks), "largest"]
    rows = [[v, *(p[m - 1] for m in marks), max(p)] for v, p in runs.items()]
    table(header, rows)


def bench_prompt_tokens(repeats: int) -> None:
    print("## Prompt tokens per call, 60-turn scripted run, 2,000-character observations\n")
    print(
        f"Notes variants rewrite their notes every 8 turns; compaction variants have a "
        f"{COMPACTION_WINDOW:,}-token window (threshold {int(COMPACTION_WINDOW * 0.75):,}).\n"
    )
    outs = {variant: long_run(variant, 60) for variant in VARIANTS}
    runs = {variant: prompt_tokens(out) for variant, out in outs.items()}
    prompt_table(runs, [1, 8, 10, 20, 30, 40, 50, 60])
    transcript = max(runs["transcript"][:40])
    ratio = max(runs["notes"][:40]) / transcript
    print(
        f"- over 40 calls, notes largest / transcript largest = {ratio:.2f} "
        f"(goal <= 0.25: {verdict(ratio <= 0.25)})"
    )
    for variant, out in outs.items():
        if out.get("compactions"):
            marks = [(r["turn"], r["tokens_before"], r["tokens_after"]) for r in out["compactions"]]
            under = all(t < COMPACTION_WINDOW * 0.75 for t in runs[variant])
            print(
                f"- {variant}: compactions (turn, tokens before, after) {marks}; every prompt "
                f"under the threshold: {'yes' if under else 'NO'}"
            )
    print()


def bench_compaction(repeats: int) -> None:
    import tiktoken

    from reactgraph.nodes.loop import compaction

    print("## Compaction: the token check before each call as the run grows\n")
    timings: list[float] = []
    real = compaction._plan

    @functools.wraps(real)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        result = real(*args, **kwargs)
        timings.append(time.perf_counter() - started)
        return result

    encoding = tiktoken.get_encoding("cl100k_base")
    samples: dict[int, list[float]] = {5: [], 60: []}
    naive: dict[int, list[float]] = {5: [], 60: []}
    compaction._plan = timed  # the check itself, inside the node
    try:
        for _ in range(repeats):
            timings.clear()
            replies = [f"Thought: next.\nAction: page[{i}]" for i in range(60)]
            model = ScriptedChatModel(replies=[*replies, "done"])
            graph = build_graph(
                "compaction", model=model, tools=[page], max_turns=60, context_window=10_000_000
            )
            graph.invoke({"question": QUESTION})
            for call in (5, 60):
                samples[call].append(timings[call - 1])
                text = "\n".join(str(m.content) for m in model.calls[call - 1]["messages"])
                started = time.perf_counter()
                encoding.encode(text, disallowed_special=())
                naive[call].append(time.perf_counter() - started)
    finally:
        compaction._plan = real
    check = {call: statistics.median(values) * 1e3 for call, values in samples.items()}
    recount = {call: statistics.median(values) * 1e3 for call, values in naive.items()}
    rows = [(call, f"{check[call]:.3f}", f"{recount[call]:.3f}") for call in (5, 60)]
    table(("check before call", "cached check (ms)", "re-counting the whole prompt (ms)"), rows)
    growth = check[60] / check[5]
    print(
        f"- call 60 / call 5: cached {growth:.2f}x (goal <= 2x: {verdict(growth <= 2)}), "
        f"re-counting {recount[60] / recount[5]:.2f}x\n"
    )
