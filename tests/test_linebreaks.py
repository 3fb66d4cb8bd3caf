"""What streams is what stays: the tokens of ``stream_mode="messages"`` add up to the stored AI
message, hard line breaks included, for a streaming model (the real ``ChatOpenAI`` against the
test server) and one that does not stream (the scripted model), sync and async; the loop itself
parses, records and re-sends what the model wrote. This is also the test that fails if
langchain-core stops running inline callbacks in order
(``reactgraph.nodes.calling.linebreaks``)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from pydantic import Field

from reactgraph import build_graph
from reactgraph.models import chat_model
from reactgraph.nodes.calling.linebreaks import hard, plain
from reactgraph.tools import calculator, search_tools
from tests.fakes import SEED, FakeChatModel, FakeOpenAIServer


def test_hard_breaks_every_newline_once() -> None:
    assert hard("a\nb\n") == "a  \nb  \n"
    assert hard(hard("a\nb")) == "a  \nb"  # a break already hard stays as it is
    assert hard("no newline") == "no newline"
    assert plain(AIMessage(hard("a\nb"))).content == "a\nb"
    blocks = AIMessage([{"type": "text", "text": "a\nb"}])
    assert plain(blocks) is blocks  # content blocks are left to the client


def streamed(graph: Any, mode: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Each AI message's streamed text by id, and the final state."""
    pieces: dict[str, str] = defaultdict(str)
    final: dict[str, Any] = {}

    def take(kind: str, item: Any) -> None:
        nonlocal final
        if kind == "values":
            final = item
        elif item[0].type in ("ai", "AIMessageChunk"):
            pieces[item[0].id] += item[0].content

    if mode == "sync":
        for kind, item in graph.stream({"question": "q"}, stream_mode=["messages", "values"]):
            take(kind, item)
    else:

        async def main() -> None:
            stream = graph.astream({"question": "q"}, stream_mode=["messages", "values"])
            async for kind, item in stream:
                take(kind, item)

        asyncio.run(main())
    return dict(pieces), final


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("model", ["streaming", "plain"])
def test_streamed_tokens_add_up_to_the_stored_message(
    openai_server: FakeOpenAIServer, mode: str, model: str
) -> None:
    search, _ = search_tools()
    if model == "streaming":
        openai_server.script.extend(SEED)
        llm: Any = chat_model("gpt-4o-mini", base_url=openai_server.url, timeout=10)
    else:
        llm = FakeChatModel(replies=list(SEED))
    graph = build_graph("transcript", model=llm, tools=[search, calculator])
    pieces, final = streamed(graph, mode)
    assert final["answer"] == "48"
    stored = {m.id: m.content for m in final["messages"] if m.type == "ai"}
    assert len(stored) == 4 and set(stored) <= set(pieces), (stored, pieces)
    for message_id, content in stored.items():
        assert "  \n" in content
        assert pieces[message_id] == content  # no visible change once it has streamed
    # The loop keeps the model's own text: parsed, recorded and sent back without the breaks.
    assert [t["reply"] for t in final["turns"]] == SEED
    sent = (
        [str(m["content"]) for r in openai_server.requests for m in r["messages"]]
        if model == "streaming"
        else llm.prompts
    )
    assert sent and not any("  \n" in text for text in sent)


class HandlersSeen(FakeChatModel):
    """The fake, noting the callback handlers each call ran with (by class name)."""

    seen: list[list[str]] = Field(default_factory=list)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        self.seen.append([type(h).__name__ for h in (run_manager.handlers if run_manager else [])])
        return super()._generate(messages, stop, run_manager, **kw)


@pytest.mark.parametrize("listened", [False, True])
def test_a_call_nobody_listens_to_goes_out_without_the_loops_handlers(listened: bool) -> None:
    """``HardBreaks`` and ``RawCalls`` copy the call's callback manager: a plain ``invoke`` with
    no callbacks has nobody to show tokens to, so the call goes without them (a tenth of a
    turn's cost); a messages stream still gets the hard breaks first."""
    llm = HandlersSeen(replies=list(SEED))
    graph = build_graph("transcript", model=llm, tools=[search_tools()[0], calculator])
    if listened:
        _, final = streamed(graph, "sync")
    else:
        final = graph.invoke({"question": "q"})
    assert final["answer"] == "48" and len(llm.seen) == 4
    for handlers in llm.seen:
        if listened:
            assert handlers[0] == "HardBreaks" and "RawCalls" in handlers, handlers
        else:
            assert not {"HardBreaks", "RawCalls"} & set(handlers), handlers
    assert [t["reply"] for t in final["turns"]] == SEED
