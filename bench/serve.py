"""The tests' OpenAI-compatible server as its own process, for the benchmark.

``python bench/serve.py LATENCY_S TURNS [ACTION]``: every conversation takes ``TURNS - 1``
actions, then answers. A ReAct prompt gets ``ACTION`` (default ``calculator[{n}+1]``, ``{n}``
the step) as text; a tool-calling request (the prebuilt agent's) gets a calculator tool call.
Prints its base URL, then serves until SIGTERM.
"""

from __future__ import annotations

import collections
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes import Answer, Call, FakeOpenAIServer

FINAL = "Thought: I now have enough information.\nFinal Answer: done"


def main() -> None:
    latency, turns = float(sys.argv[1]), int(sys.argv[2])
    action = sys.argv[3] if len(sys.argv) > 3 else "calculator[{n}+1]"

    def responder(request: dict[str, Any]) -> Answer:
        messages = request["messages"]
        if request.get("tools"):
            done = sum(m["role"] == "tool" for m in messages)
            if done >= turns - 1:
                return "done"
            return Call("calculator", {"expression": f"{done}+1"}, id=f"call-{done}")
        done = sum(str(m.get("content") or "").startswith("Observation:") for m in messages)
        if done >= turns - 1:
            return FINAL
        return f"Thought: step {done}.\nAction: {action.format(n=done)}"

    server = FakeOpenAIServer()
    server.responder = responder
    server.latency_s = latency
    # A long benchmark sends gigabytes of prompts: keep none of them.
    server.requests = collections.deque(maxlen=1)  # type: ignore[assignment]
    server.usages = collections.deque(maxlen=1)  # type: ignore[assignment]
    print(server.url, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.pause()


if __name__ == "__main__":
    main()
