"""What the server's own parallelism does to throughput: SmolLM2-135M-Instruct on
llama-cpp-python's server, the same runs (transcript, ``max_turns=2``, 64-token cap, the first
bundled questions) at 1 and 8 at once, against one server with 1 or 2 threads, and two servers
of 1 thread with the runs split between them. llama-cpp-python's server has no setting for
parallel requests (no ``--n_parallel``: requests wait on one lock); its knobs are ``--n_threads``
and running more servers. A row also runs every call streamed (``stream=True``) to show what
the streams this server cuts short cost. Beside the wall time, the servers' own CPU time: on a
machine shared with other work the wall time is mostly the share of the CPU a row got, and the
CPU time is what the work cost. Nothing is asserted.

    python bench/llama_throughput.py [--runs 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reactgraph import build_graph  # noqa: E402
from reactgraph.models import chat_model  # noqa: E402
from reactgraph.tools import calculator, search_tools  # noqa: E402
from tests.llama_server import ALIAS, LlamaServer  # noqa: E402

QUESTIONS = ROOT / "graphs/app/eval/bundled.jsonl"
CAP = 64
# (label, threads per server, servers, runs at once, every call streamed)
ROWS = [
    ("1 server, 1 thread", 1, 1, 1, None),
    ("1 server, 1 thread", 1, 1, 8, None),
    ("1 server, 2 threads", 2, 1, 8, None),
    ("2 servers, 1 thread each", 1, 2, 8, None),
    ("1 server, 1 thread, every call streamed", 1, 1, 8, True),
]


def graph(server: LlamaServer, stream: bool | None) -> Any:
    model = chat_model(ALIAS, base_url=server.url, timeout=600, temperature=0, stream=stream)
    return build_graph(
        "transcript",
        model=model,
        tools=[*search_tools(), calculator],
        max_turns=2,
        max_completion_tokens=CAP,
        model_retries=3,
    )


async def measure(graphs: list[Any], questions: list[str], at_once: int) -> dict[str, Any]:
    limit = asyncio.Semaphore(at_once)

    async def one(n: int, question: str) -> dict[str, Any]:
        async with limit:
            return await graphs[n % len(graphs)].ainvoke({"question": question})

    started = time.perf_counter()
    results = await asyncio.gather(
        *(one(n, q) for n, q in enumerate(questions)), return_exceptions=True
    )
    wall = time.perf_counter() - started
    turns = [t for r in results if isinstance(r, dict) for t in r["turns"]]
    endings = Counter(r["status"] if isinstance(r, dict) else type(r).__name__ for r in results)
    return {
        "wall": wall,
        "calls": len(turns),
        "completion": sum(t["completion_tokens"] for t in turns),
        "sources": Counter(t["token_source"] for t in turns),
        "endings": endings,
    }


def cpu_seconds(server: LlamaServer) -> float:
    """The server process's CPU time so far (user and system, from /proc)."""
    assert server.process is not None
    fields = Path(f"/proc/{server.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def row(threads: int, servers: int, at_once: int, stream: bool | None, runs: int) -> dict:
    lines = QUESTIONS.read_text().splitlines()
    questions = [json.loads(lines[n % len(lines)])["question"] for n in range(runs)]
    folder = Path(tempfile.mkdtemp(prefix="bench-llama-"))
    started = [
        LlamaServer(folder / f"server{n}.log", threads=threads).start() for n in range(servers)
    ]
    try:
        graphs = [graph(server, stream) for server in started]
        load, cpu = os.getloadavg()[0], sum(cpu_seconds(s) for s in started)
        measured = asyncio.run(measure(graphs, questions, at_once))
        measured["cpu"] = sum(cpu_seconds(s) for s in started) - cpu
        measured["load"] = (load, os.getloadavg()[0])
        return measured
    finally:
        for server in started:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    print(
        f"SmolLM2-135M-Instruct Q4_1, llama-cpp-python 0.3.36 server (defaults otherwise), "
        f"{args.runs} transcript runs, max_turns=2, max_completion_tokens={CAP}\n"
    )
    print(
        "| server | runs at once | wall s | calls | calls/s | completion tok/s | server CPU s | "
        "CPU s/call | counts | endings | load average |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, threads, servers, at_once, stream in ROWS:
        m = row(threads, servers, at_once, stream, args.runs)
        sources = ", ".join(f"{k} {v}" for k, v in sorted(m["sources"].items()))
        endings = ", ".join(f"{k} {v}" for k, v in sorted(m["endings"].items()))
        print(
            f"| {label} | {at_once} | {m['wall']:.0f} | {m['calls']} | "
            f"{m['calls'] / m['wall']:.2f} | {m['completion'] / m['wall']:.1f} | "
            f"{m['cpu']:.0f} | {m['cpu'] / max(m['calls'], 1):.2f} | {sources} | "
            f"{endings} | {m['load'][0]:.1f}-{m['load'][1]:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
