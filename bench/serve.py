"""The tests' OpenAI-compatible server as its own process, for the concurrency benchmark:
every conversation takes ``turns - 1`` calculator actions, then answers."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes import FakeOpenAIServer


def main() -> None:
    latency, turns = float(sys.argv[1]), int(sys.argv[2])

    def responder(request: dict[str, Any]) -> str:
        done = sum(str(m["content"]).startswith("Observation:") for m in request["messages"])
        if done >= turns - 1:
            return "Thought: I now have enough information.\nFinal Answer: done"
        return f"Thought: step {done}.\nAction: calculator[{done}+1]"

    server = FakeOpenAIServer()
    server.responder = responder
    server.latency_s = latency
    print(server.url, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.pause()


if __name__ == "__main__":
    main()
