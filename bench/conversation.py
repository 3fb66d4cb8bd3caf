"""A long conversation on one thread (``history_runs``): 1,000 questions asked one after
another on a SQLite thread, each answered at once. Reports, as the thread grows, the last
question's prompt (characters and tiktoken tokens), the time a question takes, and what the
thread's database grows by per question: none of them may grow with the number of questions
beyond the first ``history_runs``.

``python bench/conversation.py [QUESTIONS]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from common import table, verdict

from reactgraph import build_graph
from reactgraph.nodes.calling.tokens import encoding_for, message_text
from reactgraph.scripted import ScriptedChatModel
from reactgraph.storage import open_db

QUESTIONS = int(os.environ.get("BENCH_CONVERSATION_QUESTIONS", "1000"))
HISTORY_RUNS = 5
MARKS = (1, 5, 10, 100, 1000)


def answer(messages: list) -> str:
    question = message_text(messages[0]).rsplit("Question:", 1)[1].strip()
    return f"Final Answer: the answer to {question}, in a sentence of some length."


def bench_conversation(repeats: int = 1, questions: int = QUESTIONS) -> None:
    encoding = encoding_for("gpt-4o-mini")
    model = ScriptedChatModel(replies=[answer] * (questions + 1))
    rows = []
    sizes: dict[int, tuple[int, int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        db = os.path.join(folder, "runs.sqlite")
        with open_db(db) as (saver, _):
            graph = build_graph(
                "transcript",
                model=model,
                tools=[],
                checkpointer=saver,
                history_runs=HISTORY_RUNS,
            )
            config = {"configurable": {"thread_id": "chat"}}
            last_size = os.path.getsize(db)
            for number in range(1, questions + 1):
                started = time.perf_counter()
                graph.invoke({"question": f"Question number {number:04d}?"}, config)
                seconds = time.perf_counter() - started
                size = os.path.getsize(db)
                if number in MARKS:
                    prompt = "\n".join(message_text(m) for m in model.calls[-1]["messages"])
                    tokens = len(encoding.encode(prompt)) if encoding is not None else None
                    sizes[number] = (len(prompt), size - last_size)
                    rows.append(
                        (
                            number,
                            len(prompt),
                            tokens if tokens is not None else "-",
                            f"{seconds * 1000:.1f} ms",
                            f"{(size - last_size) / 1024:.1f} KiB",
                        )
                    )
                last_size = size
    header = ["question", "prompt chars", "prompt tokens", "time", "database growth"]
    print(f"### A conversation of {questions} questions (history_runs={HISTORY_RUNS})\n")
    table(header, rows)
    later = [sizes[n][0] for n in MARKS if n > HISTORY_RUNS and n in sizes]
    flat = len(set(later)) <= 1
    print(f"Prompt size flat after {HISTORY_RUNS} questions: {verdict(flat)}\n")


if __name__ == "__main__":
    bench_conversation(questions=int(sys.argv[1]) if len(sys.argv) > 1 else QUESTIONS)
