"""A real model on a real server: SmolLM2-135M-Instruct on llama.cpp's OpenAI-compatible server
(``llama-cpp-python[server]``), on 127.0.0.1, started as a new user starts it (so it ends a
streamed reply early when another request waits). ``make test-real-model`` installs both and
runs these (``REACTGRAPH_REAL_MODEL=1``); elsewhere they are skipped.

A 135M model cannot answer the questions: these check the protocol, and that the loop stays
robust on a real model's messy replies, never accuracy. The model is ``chat_model``'s default:
its first call to this server streams, finds no usage in the stream (that call is counted with
tiktoken), and from then on calls it plain, so every later count is the server's own; 8 runs
at once (``ainvoke``, every variant, and a sync batch) all end with a known status.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling import streamchoice
from reactgraph.nodes.calling.binding import describe_tools
from reactgraph.nodes.calling.providers import ModelCallError
from reactgraph.nodes.calling.tokens import TokenCounter
from reactgraph.nodes.vocabulary import prompts
from reactgraph.tools import calculator, search_tools
from reactgraph.variants import REGISTRY
from tests.llama_server import ALIAS, LlamaServer, available
from tests.test_endings import ends_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("REACTGRAPH_REAL_MODEL") != "1" or available() is not None,
        reason=available() or "set REACTGRAPH_REAL_MODEL=1 (make test-real-model)",
    ),
]

CAP = 64
QUESTION = "How many years after the Eiffel Tower was completed did the Golden Gate Bridge open?"
# Seconds each model call may take: generous, for a 2-core machine shared with other work.
TIMEOUT = 240.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama") / "server.log"
    running = LlamaServer(log, threads=1).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def patient_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A server that never ends a stream for a waiting request: only its client going away
    stops it (for the abandoned-call test)."""
    log = tmp_path_factory.mktemp("llama") / "server.log"
    running = LlamaServer(log, threads=1, interrupt=False).start()
    yield running
    running.stop()


def tools() -> list[Any]:
    return [*search_tools(), calculator]


def model(server: LlamaServer, timeout: float = TIMEOUT, stream: bool | None = None) -> Any:
    """chat_model's own choice of streaming unless ``stream`` says."""
    return chat_model(ALIAS, base_url=server.url, timeout=timeout, temperature=0.0, stream=stream)


def graph(server: LlamaServer, variant: str, stream: bool | None = None, **settings: Any) -> Any:
    if "context_window" in {s.name for s in REGISTRY[variant].settings}:
        settings.setdefault("context_window", 2048)
    settings.setdefault("model_retries", 0)  # no fault is expected: none is retried away
    return build_graph(
        variant,
        model=model(server, stream=stream),
        tools=tools(),
        max_completion_tokens=CAP,
        retry_backoff_s=0.5,
        **settings,
    )


def check_turns(result: dict[str, Any], source: str | None = "usage") -> None:
    """Every turn's counts from ``source``; but a run's first turn may be the process's first
    call to this server, a stream without usage, counted with tiktoken."""
    for index, turn in enumerate(result["turns"]):
        if source is not None and not (index == 0 and turn["token_source"] == "tiktoken"):
            assert turn["token_source"] == source
        assert 0 <= turn["completion_tokens"] <= CAP
        assert turn["prompt_tokens"] > 0
        assert "Observation:" not in turn["reply"]
        assert "Observation:" not in turn["text"]


@pytest.mark.parametrize("variant", list(REGISTRY))
def test_every_variant_ends_with_a_known_status(server: LlamaServer, variant: str) -> None:
    result = graph(server, variant, max_turns=3).invoke({"question": QUESTION})
    assert result["status"] in ends_of(REGISTRY[variant])
    assert result["turns"]
    check_turns(result)
    # Its first streamed reply carried no usage: it is called plain from then on.
    assert streamchoice.mode(model(server)) == "plain"


# The bundled questions' first three: what the benchmark asks too (bench/real_model.py).
BUNDLED = [
    json.loads(line)["question"]
    for line in (Path(__file__).resolve().parents[1] / "graphs/app/eval/bundled.jsonl")
    .read_text()
    .splitlines()[:3]
]


def check_constrained(result: dict[str, Any], variant: str, source: str | None = "usage") -> None:
    """Every turn of a run under the grammar read as an action or an answer: none invalid,
    every reply a Thought line then an Action of a real action or a Final Answer."""
    assert result["status"] in ends_of(REGISTRY[variant])
    names = ["search", "lookup", "calculator", *(a.name for a in REGISTRY[variant].actions)]
    for turn in result["turns"]:
        assert turn["kind"] != "invalid", turn
        assert turn["reply"].startswith("Thought: "), turn["reply"]
        assert not turn.get("cut"), turn
        if turn["kind"] == "action":
            assert turn["action"] in names
    check_turns(result, source)


@pytest.mark.parametrize("variant", list(REGISTRY))
def test_with_gbnf_no_turn_is_invalid_in_any_variant(server: LlamaServer, variant: str) -> None:
    built = graph(server, variant, max_turns=3, constrained_decoding="gbnf")
    first = built.invoke({"question": BUNDLED[0]})
    check_constrained(first, variant)

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(*(built.ainvoke({"question": q}) for q in BUNDLED[1:]))

    for result in asyncio.run(main()):
        check_constrained(result, variant)


def test_with_gbnf_a_streamed_reply_follows_the_grammar(server: LlamaServer) -> None:
    built = graph(server, "transcript", stream=True, max_turns=1, constrained_decoding="gbnf")

    async def main() -> tuple[list[str], dict[str, Any]]:
        pieces, final = [], {}
        stream = built.astream({"question": QUESTION}, stream_mode=["messages", "values"])
        async for mode, data in stream:
            if mode == "values":
                final = data
                continue
            message, _metadata = data
            if type(message).__name__ == "AIMessageChunk" and message.content:
                pieces.append(message.content)
        return pieces, final

    pieces, result = asyncio.run(main())
    assert len(pieces) > 3 and "".join(pieces).startswith("Thought: ")
    check_constrained(result, "transcript", source=None)  # a stream has no usage here


def opening_tokens() -> int:
    """The first prompt's tokens, as the compaction variant counts them."""
    text = prompts.REACT_PROMPT.format(tool_descriptions=describe_tools(tools()), question=QUESTION)
    return TokenCounter(ALIAS)([HumanMessage(text)])


def test_a_compaction_with_a_real_summarizer_call(server: LlamaServer) -> None:
    # The threshold sits 150 tokens above the first prompt: a turn or two passes it, and a
    # fresh window (the first prompt and a summary of at most 64 tokens) is under it again.
    threshold = (opening_tokens() + 150) / 2048
    built = graph(server, "compaction", max_turns=6, compaction_threshold=threshold, keep_turns=0)
    result = built.invoke({"question": QUESTION})
    assert result["status"] in ends_of(REGISTRY["compaction"])
    (first, *_) = result["compactions"]
    assert first["prompt_tokens"] > 0 and first["token_source"] == "usage"
    assert 0 < first["completion_tokens"] <= CAP
    check_turns(result)


def test_astream_messages_yields_tokens(server: LlamaServer) -> None:
    built = graph(server, "transcript", stream=True, max_turns=1)

    async def main() -> list[str]:
        pieces = []
        stream = built.astream({"question": QUESTION}, stream_mode="messages")
        async for message, _metadata in stream:
            if type(message).__name__ == "AIMessageChunk" and message.content:
                pieces.append(message.content)
        return pieces

    pieces = asyncio.run(main())
    assert len(pieces) > 3  # token by token, not one message at the end


def test_eight_concurrent_ainvoke_runs_in_every_variant(server: LlamaServer) -> None:
    graphs = {variant: graph(server, variant, max_turns=2) for variant in REGISTRY}
    runs = [(variant, n) for n in range(2) for variant in REGISTRY]

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(graphs[v].ainvoke({"question": f"{QUESTION} (run {n})"}) for v, n in runs)
        )

    results = asyncio.run(main())
    assert len(results) == 8
    for (variant, _), result in zip(runs, results, strict=True):
        assert result["status"] in ends_of(REGISTRY[variant])
        check_turns(result)


def test_a_sync_batch_of_eight_at_once(server: LlamaServer) -> None:
    built = graph(server, "transcript", max_turns=2)
    inputs = [{"question": f"{QUESTION} (batch {n})"} for n in range(8)]
    results = built.batch(inputs, {"max_concurrency": 8})
    for result in results:
        assert result["status"] in ends_of(REGISTRY["transcript"])
        check_turns(result)


def test_streamed_runs_at_once_survive_streams_cut_short(server: LlamaServer) -> None:
    # Every call streamed: this server ends a stream as soon as another request waits; each
    # such reply is asked again, plain (not a retry: there are none), never acted on.
    built = graph(server, "transcript", stream=True, max_turns=2)

    async def main() -> list[dict[str, Any]]:
        questions = [f"{QUESTION} (streamed {n})" for n in range(4)]
        return await asyncio.gather(*(built.ainvoke({"question": q}) for q in questions))

    for result in asyncio.run(main()):
        assert result["status"] in ends_of(REGISTRY["transcript"])
        check_turns(result, source=None)  # a whole stream has no usage here: tiktoken


def test_a_deadline_shorter_than_a_call_frees_the_server(patient_server: LlamaServer) -> None:
    server = patient_server
    endless = model(server, timeout=2.0, stream=True)
    # The end-of-turn token is forbidden: the reply would go on to the context's end.
    endless.extra_body = {"logit_bias": {"<|im_end|>": -100}, "logit_bias_type": "tokens"}
    built = build_graph(
        "transcript", model=endless, tools=[], max_completion_tokens=None, model_retries=0
    )
    before = server.log.read_text().count("Disconnected from client")
    with pytest.raises(ModelCallError, match="TimedOut"):
        built.invoke({"question": "Count from 1 to 100000, one number a line."})
    abandoned = time.monotonic()
    # The server says the client went away (our stream was closed); no other request came.
    deadline = time.monotonic() + 120
    while server.log.read_text().count("Disconnected from client") == before:
        assert time.monotonic() < deadline, "the server never noticed the abandoned call"
        time.sleep(0.1)
    answer = server.complete("Say hi.", max_tokens=8)
    freed = time.monotonic() - abandoned
    assert answer["choices"][0]["message"]["content"] is not None
    print(f"\nthe server answered the next request {freed:.1f} s after the abandoned call")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    variables = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run(
        [sys.executable, "-m", "reactgraph.app.cli", *args],
        capture_output=True,
        text=True,
        timeout=1200,
        env=variables,
        cwd=cwd,
    )


def test_ask_and_batch_from_the_command_line(server: LlamaServer, tmp_path: Path) -> None:
    common = ["--base-url", server.url, "--model", ALIAS, "--max-turns", "1"]
    common += ["--max-completion-tokens", str(CAP), "--timeout", str(TIMEOUT)]
    db = str(tmp_path / "runs.db")
    asked = cli("ask", QUESTION, *common, "--db", db, "--thread", "t1", cwd=tmp_path)
    # `ask` exits 0 on an answer and 1 on any other ending; a 135M model rarely answers.
    shown = re.findall(r"^Status: (\w+)$", asked.stdout, re.MULTILINE)
    assert shown and shown[-1] in ends_of(REGISTRY["transcript"]), asked.stdout[-2000:]
    assert asked.returncode == (0 if shown[-1] == "answered" else 1), asked.stderr
    assert "Traceback" not in asked.stderr, asked.stderr
    # The command's first call streams and finds no usage there (tiktoken's count); every
    # later call is plain, with the server's own counts.
    sources = re.findall(r"completion \((usage|tiktoken)\)", asked.stdout)
    assert sources[0] in {"usage", "tiktoken"} and set(sources[1:]) == {"usage"}, asked.stdout
    questions = tmp_path / "questions.jsonl"
    lines = [{"id": f"q{n}", "question": f"{QUESTION} ({n})"} for n in range(2)]
    questions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "results.jsonl"
    batch = cli(
        "batch",
        str(questions),
        "--out",
        str(out),
        *common,
        "--db",
        db,
        "--workers",
        "1",
        cwd=tmp_path,
    )
    assert batch.returncode == 0, batch.stderr
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in results) == ["q0", "q1"]
    assert all(r["status"] in ends_of(REGISTRY["transcript"]) for r in results)
