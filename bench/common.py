"""What every benchmark section shares: the contenders' tools and scripts, the local server,
and the way a figure and its goal are printed."""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import PrivateAttr

BENCH = Path(__file__).resolve().parent
PYTHON = sys.executable
SCRIPT = Path(PYTHON).with_name("reactgraph")
QUESTION = "What do the echoes say?"
LONG_QUESTION = "Summarise every page."  # the runs over 2,000-character pages
PAGE_CHARS = 2000
FINAL_ANSWER = "Thought: I now have enough information.\nFinal Answer: done"


@tool
def echo(text: str) -> str:
    """Returns its input."""
    return f"echo {text}"


# Real prose (the bundled search corpus), so stored sizes are those of text that compresses as
# text does, not of a repeated phrase.
PROSE = " ".join(
    " ".join(path.read_text().split())
    for path in sorted((BENCH.parent / "tools/corpus").glob("*.md"))
)


@tool
def page(text: str) -> str:
    """Returns a 2,000-character page of prose."""
    start = (sum(map(ord, text)) * 7919) % (len(PROSE) - PAGE_CHARS)
    return f"page {text}: {PROSE[start : start + PAGE_CHARS]}"[:PAGE_CHARS]


def react_replies(turns: int, tool_name: str = "echo") -> list[str]:
    """The same script for every ReAct contender: ``turns`` actions, then a final answer."""
    replies = [f"Thought: step {i}.\nAction: {tool_name}[{i}]" for i in range(turns)]
    return [*replies, FINAL_ANSWER]


_LAST_STEP = re.compile(r"(\d+)\]")


def last_step(messages: Sequence[BaseMessage]) -> int:
    """The number in the latest action the model took (``page[12]`` gives 12), or -1 before
    the first: a script keyed on it works on any view of the transcript, windowed or not."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            found = _LAST_STEP.findall(str(message.content))
            return int(found[-1]) if found else -1
    return -1


class ToolCallingScript(BaseChatModel):
    """The same script as tool calls, for the prebuilt tool-calling agent."""

    turns: int
    tool_name: str = "echo"
    _index: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "tool-calling-script"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingScript:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        index = self._index
        self._index += 1
        if index < self.turns:
            call = {"name": self.tool_name, "args": {"text": str(index)}, "id": f"call-{index}"}
            message = AIMessage(f"step {index}.", tool_calls=[call])
        else:
            message = AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=message)])


def prebuilt_agent(model: BaseChatModel, tools: list[Any], **kwargs: Any) -> Any:
    """LangGraph's prebuilt ReAct agent (its deprecation warning silenced: it is the anchor)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, tools, **kwargs)


@contextlib.contextmanager
def local_server(latency_s: float, turns: int, action: str = "calculator[{n}+1]") -> Iterator[str]:
    """The OpenAI-compatible test server in its own process (as a real one would be, it does
    not share our GIL), scripted as ``serve.py`` says; yields its base URL."""
    server = subprocess.Popen(
        [sys.executable, str(BENCH / "serve.py"), str(latency_s), str(turns), action],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        server.terminate()
        server.wait(10)


def median_ms(seconds: Sequence[float]) -> float:
    return statistics.median(seconds) * 1000


def verdict(met: bool) -> str:
    return "met" if met else "**NOT met**"


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A Markdown table on stdout (the README's figures are pasted from it)."""
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    print()


def mb(size: float) -> str:
    return f"{size / 1e6:.2f} MB"


def reactgraph(*args: str) -> list[str]:
    """The installed console script, as a person runs it (else ``python -m``)."""
    if SCRIPT.exists():
        return [str(SCRIPT), *args]
    return [PYTHON, "-m", "reactgraph.app.cli", *args]


def timed(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> float:
    """The wall seconds of one run of the command ``argv`` in ``cwd``; an exit code not in
    ``ok`` is a failure of the bench."""
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, cwd=cwd, env=os.environ.copy())
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode()[-500:]}")
    return elapsed


def command_medians(
    contenders: dict[str, list[str]], rounds: int, cwd: Path, ok: tuple[int, ...]
) -> tuple[dict[str, float], float]:
    """Each command's median wall ms over ``rounds`` rounds (3 at least, the commands taking
    turns), and the median of ``python -c pass`` (a contender) to compare them with."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(max(rounds, 3)):
        for name, argv in contenders.items():
            times[name].append(timed(argv, cwd, ok))
    medians = {name: median_ms(samples) for name, samples in times.items()}
    return medians, medians["python -c pass"]
