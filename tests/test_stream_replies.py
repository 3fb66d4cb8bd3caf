"""Replies that are not the event stream a streamed call asked for, over the real ChatOpenAI
client and the local test server: a plain chat completion is used as it is (its content, usage
and finish reason); a body that is not UTF-8 or holds no choices is retried and then stops the
run resumably (through the graph and the command line, streamed and plain, sync and async); a
stream cut before its finish reason is asked again at once, plain, never acted on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling.providers import ModelCallError
from reactgraph.tools import calculator
from tests.fakes import (
    NO_CHOICES,
    NOT_UTF8,
    Cut,
    EmptyStream,
    FakeOpenAIServer,
    Fault,
    Raw,
    Runner,
    Unstreamed,
    action,
    answer,
)
from tests.test_cli import cli

# Not UTF-8 inside an event stream, rather than as the whole body.
NOT_UTF8_EVENT = Raw(b'{"choices": [{"delta": {"content": "\xff\xfe"}}]}')
MALFORMED = {
    "not-utf8": NOT_UTF8,
    "not-utf8-event": NOT_UTF8_EVENT,
    "no-choices": NO_CHOICES,
    # What proxies and busy servers send: a page, a JSON value that is no object, a choice
    # without its message.
    "html": Raw("<html><body>busy</body></html>", events=False, content_type="text/html"),
    "json-list": Raw("[1, 2, 3]", events=False),
    "choice-without-message": Raw('{"id": "x", "choices": [{"index": 0}]}', events=False),
}
# An event stream sent to a plain request (to a streamed one it is a cut: asked again plain).
EVENTS_TO_PLAIN = Raw(
    'data: {"id": "c", "choices": [{"index": 0, "delta": {"content": ""}}]}\n\n',
    events=False,
    content_type="text/event-stream",
)
CASES = [
    *[
        pytest.param(body, stream, id=f"{name}-{label}")
        for name, body in MALFORMED.items()
        for stream, label in ((None, "streamed"), (False, "plain"))
    ],
    pytest.param(EVENTS_TO_PLAIN, False, id="event-stream-plain"),
]


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """chat_model's two async transports (the sync client is the same for both)."""
    monkeypatch.setattr(
        "reactgraph.nodes.calling.transport.default_transport", lambda: request.param
    )
    return request.param


def http_graph(server: FakeOpenAIServer, stream: bool | None = None, **settings: Any) -> Any:
    llm = chat_model("gpt-4o-mini", base_url=server.url, timeout=10.0, stream=stream)
    settings.setdefault("retry_backoff_s", 0)
    return build_graph("transcript", model=llm, tools=[], **settings)


def test_a_plain_reply_to_a_streamed_request_is_used_whole(
    openai_server: FakeOpenAIServer, run: Runner, transport: str
) -> None:
    long = action("calculator", "1+1", thought="x" * 400)
    openai_server.script.extend([Unstreamed(long), Unstreamed(answer("42"))])
    out = run(http_graph(openai_server, max_completion_tokens=20), {"question": "q"})
    assert out["answer"] == "42" and out["status"] == "answered"
    assert [r["stream"] for r in openai_server.requests] == [True, True]
    first, second = out["turns"]
    assert first["cut"] is True and "cut" in first["observation"]  # its finish reason: length
    assert [t["token_source"] for t in out["turns"]] == ["usage", "usage"]
    messages = openai_server.requests[1]["messages"]
    assert second["prompt_tokens"] == sum(len(m["content"]) for m in messages) // 4 + 1


@pytest.mark.parametrize(("body", "stream"), CASES)
def test_a_malformed_reply_is_retried_then_stops_the_run_resumably(
    openai_server: FakeOpenAIServer, run: Runner, body: Raw, stream: bool | None
) -> None:
    openai_server.script.extend([body, answer("ok")])
    assert run(http_graph(openai_server, stream), {"question": "q"})["answer"] == "ok"
    assert len(openai_server.requests) == 2
    assert [r.get("stream", False) for r in openai_server.requests] == [stream is None] * 2
    openai_server.script.extend([body, body])
    graph = http_graph(openai_server, stream, model_retries=1, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ModelCallError, match=r"failed after 2 attempts .*MalformedReply"):
        run(graph, {"question": "q"}, config)
    openai_server.script.append(answer("resumed"))
    assert run(graph, None, config)["answer"] == "resumed"


@pytest.mark.slow
@pytest.mark.parametrize(
    "reply",
    [Fault(500, "down"), NOT_UTF8, NO_CHOICES, MALFORMED["html"], EVENTS_TO_PLAIN],
    ids=["500", "not-utf8", "no-choices", "html", "event-stream"],
)
def test_ask_stops_on_a_malformed_reply_as_on_a_500(
    openai_server: FakeOpenAIServer, tmp_path: Path, reply: Any
) -> None:
    openai_server.script.extend([reply] * 3)
    common = ["--base-url", openai_server.url, "--timeout", "30", "--model-retries", "1"]
    result = cli("ask", "q", *common, "--db", str(tmp_path / "runs.db"), "--thread", "t1")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert f"the model at {openai_server.url} failed after 2 attempts" in error, error
    assert f"resume it with: reactgraph resume t1 --db {tmp_path / 'runs.db'}" in error
    # Two attempts; an event stream sent to the streamed first one is a cut, asked again
    # plain at once and not counted as one.
    assert len(openai_server.requests) == (3 if reply is EVENTS_TO_PLAIN else 2)


@pytest.mark.slow
def test_ask_uses_a_plain_reply_to_its_streamed_request(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.script.append(Unstreamed(answer("42")))
    result = cli("ask", "q", "--base-url", openai_server.url, "--db", str(tmp_path / "r.db"))
    assert result.returncode == 0, result.stderr
    assert "Answer: 42" in result.stdout and "(usage)" in result.stdout
    assert openai_server.requests[0]["stream"] is True


@pytest.mark.parametrize("sent", ["", "Thought: half a th", None], ids=["empty", "partial", "none"])
def test_a_stream_cut_short_is_asked_again_plain_and_not_counted(
    openai_server: FakeOpenAIServer, run: Runner, sent: str | None
) -> None:
    """Cut after its first chunk (empty or not), or with no event at all (the stream's
    ``[DONE]`` missing too): llama-cpp-python's server does both."""
    cut = EmptyStream(answer("never")) if sent is None else Cut(answer("never"), sent=sent)
    openai_server.script.extend([cut, answer("whole")])
    out = run(http_graph(openai_server, stream=True, model_retries=0), {"question": "q"})
    assert out["answer"] == "whole" and len(out["turns"]) == 1  # the cut part never acted on
    assert out["turns"][0]["token_source"] == "usage"
    assert [r.get("stream") for r in openai_server.requests] == [True, False]


def test_a_users_own_chat_openai_reads_a_plain_reply_to_its_stream_by_asking_plain(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    """Without chat_model's transport, a plain reply to a streamed request reads as a stream
    with no event: it is asked again plain, and that reply is used."""
    from langchain_openai import ChatOpenAI

    openai_server.script.extend([Unstreamed(answer("never")), answer("whole")])
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.url, api_key="k", streaming=True)
    out = run(build_graph("transcript", model=llm, tools=[], model_retries=0), {"question": "q"})
    assert out["answer"] == "whole" and len(out["turns"]) == 1
    assert [r.get("stream") for r in openai_server.requests] == [True, False]


def test_after_a_cut_a_model_left_to_choose_calls_that_server_plain(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.script.extend([Cut(answer("never")), action("calculator", "1+1"), answer("2")])
    llm = chat_model("local", base_url=openai_server.url, timeout=10.0)
    graph = build_graph("transcript", model=llm, tools=[calculator], model_retries=0)
    assert run(graph, {"question": "q"})["answer"] == "2"
    assert [r.get("stream", False) for r in openai_server.requests] == [True, False, False]


def test_a_server_without_usage_on_streams_is_called_plain_after_its_first_reply(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    """Learnt from the first streamed reply, which ends without usage (counted with tiktoken):
    every call after it, in this run and the runs at once after it, is plain and counted by the
    server; no request is sent to find out."""
    openai_server.stream_usage = False  # as llama-cpp-python's server
    openai_server.responder = lambda body: answer("ok")
    graph = http_graph(openai_server, max_turns=2)

    async def many() -> list[dict[str, Any]]:
        return await asyncio.gather(*(graph.ainvoke({"question": f"q{n}"}) for n in range(8)))

    outs = [run(graph, {"question": "q"}), *asyncio.run(many())]
    sources = [t["token_source"] for out in outs for t in out["turns"]]
    assert sources == ["tiktoken"] + ["usage"] * 8
    assert len(openai_server.requests) == 9
    assert [bool(r.get("stream")) for r in openai_server.requests] == [True] + [False] * 8


def test_a_server_counting_streamed_replies_is_streamed_to(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.responder = lambda body: answer("ok")
    for _ in range(2):
        out = run(http_graph(openai_server), {"question": "q"})
        assert out["turns"][0]["token_source"] == "usage"
    assert len(openai_server.requests) == 2
    for request in openai_server.requests:
        assert request["stream"] is True
        assert request["stream_options"] == {"include_usage": True}


def test_a_chosen_setting_asks_nothing(openai_server: FakeOpenAIServer) -> None:
    openai_server.stream_usage = False
    openai_server.responder = lambda body: answer("ok")
    for stream in (True, True, False):
        http_graph(openai_server, stream).invoke({"question": "q"})
    # Told to stream, it streams every call (tiktoken's counts then), learning nothing.
    assert [r.get("stream", False) for r in openai_server.requests] == [True, True, False]
    with pytest.raises(ValueError, match="stream must be"):
        chat_model("m", base_url=openai_server.url, stream="yes")  # type: ignore[arg-type]


def test_the_servers_called_plain_are_remembered_per_server_and_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reactgraph.nodes.calling import streamchoice

    monkeypatch.setattr(streamchoice, "MOST_SERVERS", 2)
    streamchoice.forget()
    models = [chat_model("local", base_url=f"http://127.0.0.1:{n}/v1") for n in (1, 2, 3)]
    other = chat_model("other", base_url="http://127.0.0.1:1/v1")
    assert [streamchoice.mode(m) for m in models] == ["stream"] * 3
    streamchoice.note_no_usage(models[0])
    assert streamchoice.mode(models[0]) == "plain" and streamchoice.mode(other) == "stream"
    streamchoice.note_cut(models[1])
    streamchoice.note_no_usage(models[2])  # the oldest let go: streamed to again
    assert [streamchoice.mode(m) for m in models] == ["stream", "plain", "plain"]
    told = chat_model("local", base_url="http://127.0.0.1:9/v1", stream=True)
    streamchoice.note_no_usage(told)  # a model told to stream is never switched
    assert streamchoice.mode(told) == "stream"
    streamchoice.forget()


@pytest.mark.parametrize("stream", [True, None], ids=["streamed", "plain-by-choice"])
def test_under_a_messages_stream_a_cut_is_asked_again_plain(
    openai_server: FakeOpenAIServer, stream: bool | None
) -> None:
    # Left to choose, a server without streamed usage is called plain, but LangChain streams
    # such a call itself to a messages stream: that stream can be cut too.
    openai_server.stream_usage = stream is True
    graph = http_graph(openai_server, stream, model_retries=0)
    if stream is None:  # its first reply, streamed without usage, has it called plain
        openai_server.script.append(answer("learnt"))
        graph.invoke({"question": "q"})
        openai_server.requests.clear()
    openai_server.script.extend([Cut(answer("never")), answer("ok")])
    final: dict[str, Any] = {}
    pieces = []
    for mode, item in graph.stream({"question": "q"}, stream_mode=["messages", "values"]):
        if mode == "values":
            final = item
        elif item[0].content:
            pieces.append(item[0].content)
    assert final["answer"] == "ok"
    assert [r.get("stream", False) for r in openai_server.requests] == [True, False]
    assert "never" not in "".join(pieces)


def test_the_langchain_words_and_switches_relied_on(openai_server: FakeOpenAIServer) -> None:
    """``reactgraph.nodes.calling.streaming`` reads langchain-core's and langchain-openai's
    errors by their words, and ``streamchoice`` ChatOpenAI's ``streaming`` by whether it was set."""
    from reactgraph.nodes.calling.replies import NO_CHOICES as CHOICES
    from reactgraph.nodes.calling.replies import NO_CHUNKS

    openai_server.script.extend([NO_CHOICES, NO_CHOICES])
    with pytest.raises(ValueError, match=NO_CHUNKS):
        list(chat_model("m", base_url=openai_server.url, stream=True).stream("q"))
    with pytest.raises((KeyError, TypeError), match=CHOICES):
        chat_model("m", base_url=openai_server.url, stream=False).invoke("q")
    assert "streaming" not in chat_model("m", base_url=openai_server.url).model_fields_set
    assert chat_model("m", base_url=openai_server.url, stream=True).streaming is True
    assert chat_model("m", base_url=openai_server.url).root_async_client is not None


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("call", ["invoke", "ainvoke"])
def test_no_model_call_writes_its_prompt_out_as_one_string(
    action_format: str, call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every callback reactgraph adds to a model call answers ``on_chat_model_start``: else
    langchain-core falls back to ``on_llm_start`` and renders the whole prompt as one string at
    every call (``get_buffer_string``), a cost that grows with the transcript."""
    from langchain_core.callbacks import manager

    from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES, DEMO_TOOL_CALLS, ScriptedChatModel
    from reactgraph.tools import default_tools

    written: list[object] = []
    real = manager.get_buffer_string

    def counted(*args: Any, **kwargs: Any) -> str:
        written.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(manager, "get_buffer_string", counted)
    replies = DEMO_REPLIES if action_format == "text" else DEMO_TOOL_CALLS
    graph = build_graph(
        "transcript",
        model=ScriptedChatModel(replies=list(replies)),
        tools=default_tools(),
        action_format=action_format,
    )
    question = {"question": DEMO_QUESTION}
    out = graph.invoke(question) if call == "invoke" else asyncio.run(graph.ainvoke(question))
    assert out["status"] == "answered"
    assert written == []
