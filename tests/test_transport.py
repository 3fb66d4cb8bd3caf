"""chat_model's async client: aiohttp when installed (else httpx), one connection pool per
event loop, so a model works from any number of asyncio.run calls."""

from __future__ import annotations

import asyncio

import openai
import pytest

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling.transport import (
    MOST_ENDED_BYTES,
    EndedStream,
    LoopLocalClient,
    aiohttp_available,
    default_transport,
)
from tests.fakes import Body, FakeOpenAIServer


@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_one_model_serves_several_event_loops_on_its_own_pools(
    openai_server: FakeOpenAIServer, transport: str
) -> None:
    openai_server.responder = lambda body: "Final Answer: ok"
    llm = chat_model("gpt-4o-mini", base_url=openai_server.url, transport=transport)
    graph = build_graph("transcript", model=llm, tools=[])
    client = llm.http_async_client
    assert isinstance(client, LoopLocalClient) and client.transport_name == transport
    pools = []

    async def once() -> str:
        out = await graph.ainvoke({"question": "q"})
        pools.append(client._pools[asyncio.get_running_loop()][0])
        return out["answer"]

    # The second asyncio.run failed with "Event loop is closed" when one pool was shared.
    assert [asyncio.run(once()), asyncio.run(once())] == ["ok", "ok"]
    kind = openai.DefaultAioHttpClient if transport == "aiohttp" else openai.DefaultAsyncHttpxClient
    assert all(isinstance(pool, kind) for pool in pools) and pools[0] is not pools[1]
    # Each pool closed as its loop ended: an aiohttp session left open warned at exit
    # ("Unclosed client session") and kept its loop alive.
    assert all(pool.is_closed for pool in pools) and not client._pools


def test_aiohttp_is_the_default_when_installed() -> None:
    assert aiohttp_available()  # the dev extra installs it, so both transports are tested
    assert default_transport() == "aiohttp"


def test_bad_transport_settings_raise() -> None:
    with pytest.raises(ValueError, match="transport"):
        chat_model("m", base_url="http://127.0.0.1:9/v1", transport="curl")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="concurrency"):
        chat_model("m", base_url="http://127.0.0.1:9/v1", concurrency=0)


def test_a_stream_closed_before_its_done_is_closed_unread() -> None:
    body = Body(b"data: {}\n\n", b"data: [DONE]\n\n")
    stream = EndedStream(body, "http://127.0.0.1:1")
    assert next(iter(stream)) == b"data: {}\n\n"
    stream.close()  # abandoned mid-way: the connection goes, and the server stops generating
    assert body.closed and body.read == 1


SPACED, UNSPACED = b"data: [DONE]\n\n", b"data:[DONE]\n\n"


@pytest.mark.parametrize(("done", "split"), [(SPACED, 0), (SPACED, 5), (SPACED, 9), (UNSPACED, 5)])
def test_a_stream_closed_at_its_done_has_its_end_read_first(done: bytes, split: int) -> None:
    body = Body(b"data: {}\n\n" + done[:split], done[split : split + 2], done[split + 2 :], b"")
    stream = EndedStream(body, "http://127.0.0.1:1")
    seen = b""
    for chunk in stream:
        seen += chunk
        if b"[DONE]" in seen:
            break  # as the SDK's sync stream stops
    stream.close()
    assert body.closed and body.read == 4  # the end read: the connection goes back to the pool


def test_more_than_an_end_after_done_is_not_read() -> None:
    body = Body(b"data: [DONE]\n\n", *[b"x" * 4096] * 100)
    stream = EndedStream(body, "http://127.0.0.1:1")
    next(iter(stream))
    stream.close()
    assert body.closed and body.read == 1 + MOST_ENDED_BYTES // 4096 + 1


def test_done_in_a_reply_s_text_is_not_its_end() -> None:
    said = b'data: {"choices": [{"delta": {"content": "data: [DONE]"}}]}\n\n'
    body = Body(said, b"data: {}\n\n", b"data: [DONE]\n\n")
    stream = EndedStream(body, "http://127.0.0.1:1")
    next(iter(stream))
    stream.close()  # abandoned after that text: closed unread, the server stops generating
    assert body.closed and body.read == 1
