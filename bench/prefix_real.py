"""The notes variant's window on a real server's prefix cache: SmolLM2-135M-Instruct on
llama-cpp-python's server (which keeps the KV cache of the longest common prefix with its
previous prompt and evaluates only the rest), with ``window_step`` 1, 4 and 8.

Section ``replay``: the prompts of a 40-turn notes run (the recording model of ``prefix.py``:
one search a turn, Observations of about 400 characters, text format) sent to the server in
order, each for a 1-token reply: the wall time, the prompt tokens the server reported, and
those it evaluated (its log's "prefix-match hit, remaining N prompt tokens to eval"; a call
without that line evaluated its whole prompt). The same 40 prompts for every step: only the
window differs.

Section ``tokens``: the same prompts, 40 turns, through the server's own chat template and
tokenizer (the GGUF's, loaded vocabulary only): each prompt's tokens and those after its
longest common prefix with the previous prompt's, which is what the server evaluates. Exact,
and quick on a machine too busy to run every step at the server in reasonable time.

Section ``live``: the notes variant run by the model itself on the bundled search tools, up to
40 turns (``max_turns``; its replies under the grammar, ``constrained_decoding="gbnf"``, and
the stuck check off, so that it goes on), each step on the same question: wall time, turns,
status, answer, prompt tokens (the server's usage) and those evaluated.

    make .venv/.real-model && .venv/bin/python bench/prefix_real.py [tokens|replay|live]
        [--turns 40] [--steps 1,4,8] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from prefix import replies, search, shared_prefix  # noqa: E402

from reactgraph import build_graph  # noqa: E402
from reactgraph.models import chat_model  # noqa: E402
from reactgraph.scripted import ScriptedChatModel  # noqa: E402
from reactgraph.tools import calculator, search_tools  # noqa: E402
from tests.llama_server import ALIAS, LlamaServer  # noqa: E402

STEPS = (1, 4, 8)
TURNS = 40
HIT = re.compile(rb"prefix-match hit, remaining (\d+) prompt tokens to eval")
QUESTION = "How many years after the Eiffel Tower was completed did the Golden Gate Bridge open?"


def recorded_prompts(window_step: int, turns: int = TURNS) -> list[Any]:
    """The prompts of a recorded notes run of ``turns`` turns (text format)."""
    model = ScriptedChatModel(replies=replies(turns, "text"))
    graph = build_graph(
        "notes",
        model=model,
        tools=[search],
        max_turns=turns + 1,
        window_step=window_step,
        notes_dir=tempfile.mkdtemp(prefix="reactgraph-bench-prefix-"),
    )
    graph.invoke({"question": "What does the archive say about each topic?"})
    return [call["messages"] for call in model.calls]


class LogReader:
    """What the server's log gained since the last read: its prefix-match lines."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, path.stat().st_size

    def remaining(self) -> list[int]:
        data = self.path.read_bytes()
        new, self.offset = data[self.offset :], len(data)
        return [int(n) for n in HIT.findall(new)]


def evaluated(prompt_tokens: int, remaining: list[int]) -> int:
    """Prompt tokens a call evaluated: what its prefix-match line says, else its whole prompt."""
    return remaining[-1] if remaining else prompt_tokens


ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def tokens(window_step: int, turns: int) -> dict[str, Any]:
    """The recorded run's prompts as the server's template and tokenizer make them: the tokens
    sent, and those after each prompt's longest common prefix with the previous one."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from reactgraph.nodes.calling.tokens import message_text
    from tests.llama_server import model_path

    llm = Llama(model_path=str(model_path()), vocab_only=True, verbose=False)
    template = Jinja2ChatFormatter(
        llm.metadata["tokenizer.chat_template"], eos_token="<|im_end|>", bos_token="<|im_start|>"
    )
    sent = anew = 0
    before: list[int] = []
    prompts = recorded_prompts(window_step, turns)
    for messages in prompts:
        chat = [{"role": ROLES[m.type], "content": message_text(m)} for m in messages]
        text = template(messages=chat).prompt
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        common = shared_prefix(ids, before)
        sent += len(ids)
        anew += max(1, len(ids) - common)
        before = ids
    return {
        "section": "tokens",
        "window_step": window_step,
        "calls": len(prompts),
        "prompt_tokens": sent,
        "evaluated": anew,
        "share": round(anew / sent, 3),
    }


def replay(server: LlamaServer, window_step: int, turns: int) -> dict[str, Any]:
    model = chat_model(ALIAS, base_url=server.url, timeout=3600, temperature=0.0, stream=False)
    prompts = recorded_prompts(window_step, turns)
    log = LogReader(server.log)
    prompt = anew = 0
    started = time.perf_counter()
    for messages in prompts:
        reply = model.invoke(messages, max_completion_tokens=1, extra_body={"max_tokens": 1})
        tokens = int((reply.usage_metadata or {}).get("input_tokens") or 0)
        prompt += tokens
        anew += evaluated(tokens, log.remaining())
    return {
        "section": "replay",
        "window_step": window_step,
        "calls": len(prompts),
        "seconds": round(time.perf_counter() - started, 1),
        "prompt_tokens": prompt,
        "evaluated": anew,
    }


def live(server: LlamaServer, window_step: int, turns: int) -> dict[str, Any]:
    model = chat_model(ALIAS, base_url=server.url, timeout=3600, temperature=0.0, stream=False)
    graph = build_graph(
        "notes",
        model=model,
        tools=[*search_tools(), calculator],
        max_turns=turns,
        window_step=window_step,
        max_completion_tokens=32,
        # The grammar keeps the 135M model's replies in the format and the stuck check is off,
        # so the run goes its 40 turns and the window moves.
        constrained_decoding="gbnf",
        stuck_repeats=turns + 1,
        notes_dir=tempfile.mkdtemp(prefix="reactgraph-bench-prefix-"),
    )
    log = LogReader(server.log)
    started = time.perf_counter()
    out = graph.invoke({"question": QUESTION})
    seconds = time.perf_counter() - started
    hits = log.remaining()
    prompts = [t["prompt_tokens"] for t in out["turns"]]
    # Each call's line, where it has one: calls without a hit evaluated their whole prompt.
    anew = sum(prompts) - sum(p for p in prompts[: len(hits)]) + sum(hits[: len(prompts)])
    return {
        "section": "live",
        "window_step": window_step,
        "turns": len(out["turns"]),
        "status": out["status"],
        "answer": (out.get("answer") or "")[:60],
        "seconds": round(seconds, 1),
        "prompt_tokens": out["usage"]["prompt_tokens"],
        "evaluated": anew,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sections", nargs="*", default=["tokens", "replay", "live"])
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--steps", default=",".join(map(str, STEPS)))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    steps = [int(step) for step in args.steps.split(",")]
    for window_step in steps if "tokens" in args.sections else ():
        row = tokens(window_step, args.turns)
        print(json.dumps(row) if args.json else row, flush=True)
    served = [section for section in args.sections if section != "tokens"]
    if not served:
        return 0
    log = Path(tempfile.mkdtemp(prefix="reactgraph-bench-llama-")) / "server.log"
    server = LlamaServer(log, threads=2).start()
    try:
        for section in served:
            for window_step in steps:
                row = (replay if section == "replay" else live)(server, window_step, args.turns)
                print(json.dumps(row) if args.json else row, flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
