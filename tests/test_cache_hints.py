"""Prefix-cache hints (issue 56): OpenAI's ``prompt_cache_key`` from the thread and llama.cpp's
``cache_prompt``, sent only to a server whose earlier replies showed it takes them (never on a
server's first call, no probe request), never again to one that refused them; the hint as a
middleware's ``wrap_model_call`` (``PromptCache``), under ``invoke`` and ``ainvoke``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling import cachehints
from tests.fakes import FakeOpenAIServer, Runner, ToolLog, action, answer, fake_model

LLAMA_BUILD = "b6123-abcdef0"


def graph(server: FakeOpenAIServer, **settings: Any) -> Any:
    model = chat_model("local-model", base_url=server.url, timeout=10, stream=False)
    return build_graph("transcript", model=model, tools=[ToolLog().echo()], **settings)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def three_turns(server: FakeOpenAIServer) -> None:
    server.script.extend([action("echo", "a"), action("echo", "b"), answer("done")])


def test_llama_cpp_gets_cache_prompt_once_its_replies_show_it(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.fingerprint = LLAMA_BUILD
    three_turns(openai_server)
    out = run(graph(openai_server), {"question": "Q?"}, config("t1"))
    assert out["status"] == "answered"
    sent = [request.get("cache_prompt") for request in openai_server.requests]
    assert sent == [None, True, True]  # the first reply told which server it is
    assert all("prompt_cache_key" not in request for request in openai_server.requests)


def test_openai_gets_the_threads_prompt_cache_key(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.fingerprint = "fp_1234abcd"
    three_turns(openai_server)
    run(graph(openai_server), {"question": "Q?"}, config("thread-A"))
    openai_server.script.extend([answer("again")])
    run(graph(openai_server), {"question": "Q2?"}, config("thread-B"))
    keys = [request.get("prompt_cache_key") for request in openai_server.requests]
    first = cachehints.cache_key("thread-A")
    assert keys == [None, first, first, cachehints.cache_key("thread-B")]
    assert first != cachehints.cache_key("thread-B") and len(first) <= 64
    assert "thread-A" not in first  # a thread id is not sent as it is
    assert all("cache_prompt" not in request for request in openai_server.requests)


@pytest.mark.parametrize("fingerprint", [None, "", "vllm-0.11", "fp-other"])
def test_a_server_whose_replies_say_neither_gets_no_hint(
    openai_server: FakeOpenAIServer, run: Runner, fingerprint: str | None
) -> None:
    openai_server.fingerprint = fingerprint
    three_turns(openai_server)
    run(graph(openai_server), {"question": "Q?"}, config("t1"))
    for request in openai_server.requests:
        assert "cache_prompt" not in request and "prompt_cache_key" not in request


def test_a_server_that_refuses_the_hint_is_asked_again_without_and_never_sent_it_again(
    openai_server: FakeOpenAIServer, run: Runner, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.fingerprint = LLAMA_BUILD
    openai_server.reject_fields = {"cache_prompt"}
    three_turns(openai_server)
    out = run(graph(openai_server, token_prices=(1.0, 1.0)), {"question": "Q?"}, config("t1"))
    assert out["status"] == "answered" and out["answer"] == "done"
    sent = [request.get("cache_prompt") for request in openai_server.requests]
    assert sent == [None, True, None, None]  # refused once: sent again at once, then never
    assert caplog.text.count("refused a prefix-cache hint") == 1
    # The refused call is billed nothing; the three answered calls are counted.
    assert out["usage"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in openai_server.usages)


def test_the_hint_goes_beside_a_grammar_and_the_reply_cap(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.fingerprint = LLAMA_BUILD
    three_turns(openai_server)
    run(graph(openai_server, constrained_decoding="gbnf"), {"question": "Q?"}, config("t1"))
    last = openai_server.requests[-1]
    assert last["cache_prompt"] is True and "grammar" in last and last["max_tokens"] == 4096


def test_the_scripted_model_gets_no_hint(run: Runner) -> None:
    model = fake_model(action("echo", "a"), answer("done"))
    run(build_graph("transcript", model=model, tools=[ToolLog().echo()]), {"question": "Q?"})
    for recorded in model.calls:
        assert "prompt_cache_key" not in recorded["options"]
        assert "cache_prompt" not in (recorded["options"].get("extra_body") or {})


def test_what_a_reply_shows_its_server_to_be() -> None:
    def reply(**metadata: Any) -> AIMessage:
        return AIMessage("x", response_metadata=metadata)

    local = "http://127.0.0.1:8080/v1"
    assert cachehints.kind_of(local, reply(system_fingerprint=LLAMA_BUILD)) == "llama.cpp"
    assert cachehints.kind_of(local, reply(timings={"cache_n": 3})) == "llama.cpp"
    assert cachehints.kind_of(local, reply(system_fingerprint="fp_abc")) == "openai"
    assert cachehints.kind_of("https://api.openai.com/v1", reply()) == "openai"
    assert cachehints.kind_of(local, reply(system_fingerprint="b12")) is None
    assert cachehints.kind_of(local, reply()) is None
    assert cachehints.kind_of(local, None) is None


def test_a_streamed_llama_cpp_server_gets_the_hint_too(
    openai_server: FakeOpenAIServer, run: Runner
) -> None:
    openai_server.fingerprint = LLAMA_BUILD
    three_turns(openai_server)
    model = chat_model("local-model", base_url=openai_server.url, timeout=10, stream=True)
    graph = build_graph("transcript", model=model, tools=[ToolLog().echo()])
    out = run(graph, {"question": "Q?"}, config("t1"))
    assert out["status"] == "answered"
    streamed = [request.get("stream") for request in openai_server.requests]
    assert streamed == [True, True, True]
    assert [request.get("cache_prompt") for request in openai_server.requests] == [
        None,
        True,
        True,
    ]
