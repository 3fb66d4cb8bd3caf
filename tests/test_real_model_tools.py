"""Native tool calls on a real model and server: SmolLM2-135M-Instruct on llama-cpp-python's
server with ``--chat_format chatml-function-calling``. ``make test-real-model`` runs these
(``REACTGRAPH_REAL_MODEL=1``); elsewhere they are skipped.

What that chat format does (llama-cpp-python 0.3.36), which these tests pin:

- it calls a tool only with ``tool_choice`` given ("auto" included: without it the tools are
  ignored), which is why reactgraph binds ChatOpenAI's tools with ``tool_choice="auto"``;
- it describes the tools only inside a system message (the tool_calls prompt is one);
- with ``tool_choice="auto"`` a streamed request whose model chooses a tool gets an empty
  stream ("Automatic streaming tool choice is not supported", raised after the headers): the
  loop then calls it unstreamed;
- its template drops ``tool`` messages: the model never sees its tools' results (the protocol
  is still kept: every call id is answered);
- in auto mode it ignores ``max_tokens`` (its grammar steps are uncapped): the tools here
  bound each argument in their schemas (``maxLength``), which its grammar honours, or a small
  model may write one argument to the end of its context;
- its request model refuses an assistant message with null content (how ChatOpenAI sends a
  tool call with no text): reactgraph sends a space instead.

A 135M model cannot answer the questions: these check the protocol, never accuracy.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reactgraph import build_graph
from reactgraph.app.eval.run import read_results
from reactgraph.models import chat_model
from reactgraph.nodes.loop.transcript import render_prompt
from reactgraph.variants import REGISTRY
from tests.fakes import bounded_tools
from tests.llama_server import ALIAS, LlamaServer, available
from tests.test_cli import cli
from tests.test_endings import ends_of
from tests.test_real_model import CAP, QUESTION
from tests.test_tool_calls_graph import answered

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("REACTGRAPH_REAL_MODEL") != "1" or available() is not None,
        reason=available() or "set REACTGRAPH_REAL_MODEL=1 (make test-real-model)",
    ),
]
STATUSES = {
    "answered",
    "turn_limit",
    "stuck",
    "stopped_early",
    "context_exhausted",
    "budget_exhausted",
}
# Seconds a model call may take: a tool-calling call is three grammar-constrained completions
# here, on one thread of a 2-core machine shared with other work.
TIMEOUT = 600.0
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama-tools") / "server.log"
    running = LlamaServer(
        log, threads=1, interrupt=False, chat_format="chatml-function-calling"
    ).start()
    yield running
    running.stop()


def graph(server: LlamaServer, variant: str, stream: bool = False, **settings: Any) -> Any:
    if REGISTRY[variant].setting("context_window"):
        settings.setdefault("context_window", 2048)
    model = chat_model(ALIAS, base_url=server.url, timeout=TIMEOUT, temperature=0.0, stream=stream)
    return build_graph(
        variant,
        model=model,
        tools=bounded_tools(),  # the server's grammar ignores max_tokens: bound each argument
        action_format="tool_calls",
        max_completion_tokens=CAP,
        model_retries=1,
        retry_backoff_s=0.5,
        **settings,
    )


def check(result: dict[str, Any], variant: str, streamed: bool = False) -> list[dict[str, Any]]:
    """The protocol of a finished run; its tool calls. The server reports usage on plain
    requests only (a streamed reply is counted with tiktoken)."""
    assert result["status"] in ends_of(REGISTRY[variant])
    assert result["turns"]
    made = []
    sources = {"usage", "tiktoken"} if streamed else {"usage"}
    for turn in result["turns"]:
        assert turn["token_source"] in sources and turn["prompt_tokens"] > 0
        assert "Observation:" not in turn["text"]
        made.extend(turn.get("tool_calls") or [])
        if turn.get("tool_calls") and turn["kind"] == "action":
            assert turn["tool_call_id"] == turn["tool_calls"][0]["id"]
    spec = REGISTRY[variant]
    settings = spec.settings_type.of(result["settings"])  # the run's own, as stored
    answered(render_prompt(result, spec.view, "", settings))  # every call id answered
    return made


@pytest.mark.parametrize("variant", list(REGISTRY))
def test_every_variant_with_native_tool_calls(server: LlamaServer, variant: str) -> None:
    result = graph(server, variant, max_turns=2).invoke({"question": QUESTION})
    made = check(result, variant)
    print(f"\n{variant}: {result['status']}; tool calls {[(c['name'], c['args']) for c in made]}")
    assert made, "the model called no tool"  # the server's grammar lets it choose one
    assert all(c["name"] in {"search", "lookup", "calculator", "update_notes"} for c in made)


def test_gbnf_binds_the_tools_strict_and_the_server_takes_them(
    server: LlamaServer, caplog: pytest.LogCaptureFixture
) -> None:
    # The server constrains tool-call arguments to their schemas itself; the strict schemas
    # (closed objects) are taken, not rejected: no warning, and the calls follow them.
    built = graph(server, "transcript", max_turns=2, constrained_decoding="gbnf")
    with caplog.at_level(logging.WARNING, logger="reactgraph.nodes.calling.constrained"):
        result = built.invoke({"question": QUESTION})
    made = check(result, "transcript")
    assert not caplog.records, caplog.text
    assert made and all(c["name"] in {"search", "lookup", "calculator"} for c in made)
    for made_call in made:
        assert set(made_call["args"]) <= {"query", "keyword", "expression"}


def request(stream: bool) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    function = {"name": "search", "description": "Search the encyclopedia.", "parameters": schema}
    messages = [
        {"role": "system", "content": "Answer the question. Call one tool per turn."},
        {"role": "user", "content": "When was the Eiffel Tower completed?"},
    ]
    return {
        "model": ALIAS,
        "messages": messages,
        "tools": [{"type": "function", "function": function}],
        "tool_choice": "auto",
        "temperature": 0,
        "stream": stream,
    }


def test_a_streamed_tool_call_is_an_empty_stream_and_the_loop_calls_unstreamed(
    server: LlamaServer, caplog: pytest.LogCaptureFixture
) -> None:
    plain = json.loads(server.post(request(stream=False)))
    (choice,) = plain["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "search"
    assert plain["usage"]["prompt_tokens"] > 0
    streamed = server.post(request(stream=True))
    # Upstream: "Automatic streaming tool choice is not supported". Fails once it streams.
    assert "data: {" not in streamed, streamed[:500]
    result = graph(server, "transcript", stream=True, max_turns=1).invoke({"question": QUESTION})
    made = check(result, "transcript", streamed=True)
    print(f"\nstreamed: {result['status']}; tool calls {[(c['name'], c['args']) for c in made]}")
    if made:  # the model chose a tool: the stream was empty, the call was made unstreamed
        assert "calling it without streaming" in caplog.text
        assert result["turns"][0]["token_source"] == "usage"  # the plain request's


def test_eval_runs_both_formats_and_the_prebuilt_agent_on_this_server(
    server: LlamaServer, tmp_path: Path
) -> None:
    arms = ["transcript", "transcript:tool_calls", "prebuilt"]
    out = tmp_path / "eval"
    args = ["eval", "--bundled", "--limit", "1", "--variants", ",".join(arms)]
    args += ["--max-turns", "2", "--max-completion-tokens", str(CAP), "--timeout", str(TIMEOUT)]
    args += ["--base-url", server.url, "--model", ALIAS, "--workers", "1", "--out", str(out)]
    args += ["--tools", "tests.fakes:bounded_tools", "--no-default-tools"]
    run = cli(*args, env={"PYTHONPATH": str(ROOT)}, cwd=tmp_path, timeout=3000)
    lines = {line["variant"]: line for line in read_results(out)}
    assert sorted(lines) == sorted(arms), run.stderr[-3000:]
    for label in ("transcript", "transcript:tool_calls"):
        line = lines[label]
        assert line["error"] is None and line["status"] in STATUSES, line
        assert line["turns"] >= 1 and line["prompt_tokens"] > 0
    prebuilt = lines["prebuilt"]
    print(f"\nprebuilt: {prebuilt['status']}, error {prebuilt['error']!r}")
    if prebuilt["error"] is None:
        assert prebuilt["status"] in STATUSES and run.returncode == 0, run.stderr[-3000:]
    else:
        # The anchor sends its tool calls back with null content, which this server refuses.
        assert "Input should be a valid string" in prebuilt["error"], prebuilt["error"]
        assert run.returncode == 1
    summary = (out / "summary.md").read_text()
    assert all(f"| {arm} |" in summary for arm in arms)
    print("\n".join(re.findall(r"^\|.*\|$", summary, re.M)))
