"""Token counting: tiktoken when it loads, graceful fallbacks when it does not, and caching."""

from __future__ import annotations

import logging
import time

import pytest
import tiktoken
from langchain_core.messages import AIMessage, HumanMessage

from reactgraph.nodes.calling import tokens
from reactgraph.nodes.calling.tokens import TokenCounter, encoding_for, estimate_tokens


@pytest.fixture(autouse=True)
def fresh_encoding_cache() -> None:
    encoding_for.cache_clear()
    yield
    encoding_for.cache_clear()


def test_counts_match_tiktoken_on_the_whole_prompt() -> None:
    encoding = tiktoken.get_encoding("cl100k_base")
    messages = [HumanMessage("Answer the question. " * 50), AIMessage("Action: search[x]")]
    expected = sum(
        tokens.TOKENS_PER_MESSAGE + len(encoding.encode(str(m.content))) for m in messages
    )
    assert TokenCounter("gpt-4")(messages) == expected + tokens.TOKENS_PER_REPLY


def test_each_text_is_encoded_once() -> None:
    real = tiktoken.get_encoding("cl100k_base")
    encoded: list[str] = []

    class Spy:
        def encode(self, text: str, **kwargs: object) -> list[int]:
            encoded.append(text)
            return real.encode(text, **kwargs)

    counter = TokenCounter(encoding=Spy())
    history = [HumanMessage(f"observation {i}") for i in range(20)]
    for end in range(1, 21):
        counter(history[:end])
    assert len(encoded) == 20


def test_unavailable_encoding_falls_back_to_cl100k(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = tiktoken.get_encoding

    def only_cl100k(name: str) -> object:
        if name != "cl100k_base":
            raise ValueError(f"cannot download {name}")
        return real(name)

    monkeypatch.setattr(tiktoken, "get_encoding", only_cl100k)
    with caplog.at_level(logging.INFO):
        encoding = encoding_for("gpt-4o")
    assert encoding.name == "cl100k_base"
    # One line, and not a warning: the counts stay close, and it would be said on every run.
    (record,) = caplog.records
    assert record.levelno == logging.INFO and "o200k_base" in record.getMessage()


def test_a_hanging_download_falls_back_to_an_estimate(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def hang(name: str) -> object:
        time.sleep(5)
        raise AssertionError("not reached in time")

    monkeypatch.setattr(tiktoken, "get_encoding", hang)
    started = time.perf_counter()
    with caplog.at_level(logging.INFO):
        assert encoding_for("gpt-4o", timeout=0.1) is None
    assert time.perf_counter() - started < 2
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "estimated" in record.getMessage()
    assert "o200k_base" in record.getMessage() and "cl100k_base" in record.getMessage()
    counter = TokenCounter.__new__(TokenCounter)
    TokenCounter.__init__(counter, None)
    monkeypatch.setattr(tokens, "encoding_for", lambda name: None)
    assert counter.count_text("abcdefgh") == estimate_tokens("abcdefgh") == 2
    assert counter.source == "estimate"
