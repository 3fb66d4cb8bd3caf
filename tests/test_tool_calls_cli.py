"""``--action-format tool_calls`` from the command line: ``ask`` and ``batch`` against the local
OpenAI-compatible server answering with tool calls (streamed, as ``chat_model`` calls), ``show``
of the thread, ``resume`` keeping the format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.tools import default_tools
from tests.fakes import Call, EmptyStream, FakeOpenAIServer, Runner, seed_call_responder
from tests.test_cli import cli

pytestmark = pytest.mark.slow
NATIVE = {"action_format": "tool_calls"}


def test_ask_batch_and_show_with_native_tool_calls(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_call_responder
    db = str(tmp_path / "runs.sqlite")
    common = ["--base-url", openai_server.url, "--db", db, "--action-format", "tool_calls"]
    asked = cli("ask", "How many years?", "--thread", "t1", *common)
    assert asked.returncode == 0, asked.stderr
    assert "Action: search[Eiffel Tower]" in asked.stdout
    assert "Answer: 48" in asked.stdout
    requests = openai_server.requests
    assert len(requests) == 4 and all(r.get("tools") for r in requests)
    assert all(r.get("stream") for r in requests)  # the tool calls came streamed
    assert [m["role"] for m in requests[-1]["messages"]][:2] == ["system", "user"]
    shown = cli("show", "t1", "--db", db)
    assert shown.returncode == 0 and "Action: calculator[1937-1889]" in shown.stdout
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "a", "question": "How many years?"}) + "\n")
    out = tmp_path / "r.jsonl"
    batch = cli("batch", str(questions), "--out", str(out), "--workers", "1", *common)
    assert batch.returncode == 0, batch.stderr
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    assert (line["answer"], line["turns"]) == ("48", 4)


def test_a_bad_action_format_is_one_line() -> None:
    result = cli("ask", "q", "--action-format", "json", "--base-url", "http://127.0.0.1:9/v1")
    assert result.returncode == 2
    assert "argument --action-format: must be one of text, tool_calls, got 'json'" in result.stderr


def native(server: FakeOpenAIServer, stream: bool) -> Any:
    """The transcript variant calling the server's model with native tool calls, no retries."""
    model = chat_model("local", base_url=server.url, stream=stream)
    tools = default_tools()
    return build_graph("transcript", model=model, tools=tools, model_retries=0, **NATIVE)


def test_a_server_that_cannot_stream_tool_calls_is_called_unstreamed(
    openai_server: FakeOpenAIServer, run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    """llama-cpp-python's chatml-function-calling answers a streamed request whose model calls
    a tool with an empty stream: the call is made again unstreamed (not as a retry), and the
    caller stays unstreamed for tool-calling requests."""

    def responder(body: dict) -> object:
        reply = seed_call_responder(body)
        return EmptyStream(reply) if isinstance(reply, Call) else reply

    openai_server.responder = responder  # type: ignore[assignment]
    out = run(native(openai_server, stream=True), {"question": "How many years?"})
    assert (out["status"], out["answer"]) == ("answered", "48")
    streamed = [bool(r.get("stream")) for r in openai_server.requests]
    assert streamed == [True, False, False, False, False]
    assert "calling it without streaming" in caplog.text


def test_a_call_without_a_thought_is_sent_with_text(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    """ChatOpenAI sends an empty assistant content as null, which llama-cpp-python's server
    refuses (500): a tool call with no Thought goes back with a space as its text."""
    openai_server.responder = seed_call_responder  # its calls have no text
    openai_server.refuse_null_content = True
    out = run(native(openai_server, stream=False), {"question": "How many years?"})
    assert (out["status"], out["answer"]) == ("answered", "48")
    assert out["turns"][0]["text"] == ""  # the record keeps what the model wrote


def test_the_forced_answer_keeps_the_tools_and_refuses_them(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    """At the cap, ChatOpenAI's forced call sends the tools with ``tool_choice="none"``: a
    valid request wherever the transcript holds tool calls, and the model can only answer."""

    def responder(body: dict) -> object:
        refused = body.get("tool_choice") == "none"
        return "It is 48." if refused else seed_call_responder(body)

    openai_server.responder = responder  # type: ignore[assignment]
    graph = native(openai_server, stream=False)
    out = run(graph, {"question": "How many years?"}, context={"max_turns": 2})
    assert (out["status"], out["answer"]) == ("turn_limit", "It is 48.")
    *turns, forced = openai_server.requests
    assert [r.get("tool_choice") for r in turns] == ["auto", "auto"]
    assert forced["tool_choice"] == "none" and forced["tools"] == turns[0]["tools"]
    assert [m["role"] for m in forced["messages"]].count("tool") == 2
