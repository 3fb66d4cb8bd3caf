"""Token counting: tiktoken when it loads, graceful fallbacks when it does not, and caching."""

from __future__ import annotations

import logging
import time

import pytest
import tiktoken
from langchain_core.messages import AIMessage, HumanMessage

from reactgraph.nodes.calling import bundled, tokens
from reactgraph.nodes.calling.tokens import TokenCounter, encoding_for, estimate_tokens


@pytest.fixture(autouse=True)
def fresh_encoding_cache() -> None:
    tokens._encoding_named.cache_clear()
    yield
    tokens._encoding_named.cache_clear()


def cl100k() -> tiktoken.Encoding:
    """cl100k_base from reactgraph's own copy (tiktoken's download needs the network)."""
    return bundled.cl100k_base()


def test_counts_match_tiktoken_on_the_whole_prompt() -> None:
    encoding = cl100k()
    messages = [HumanMessage("Answer the question. " * 50), AIMessage("Action: search[x]")]
    expected = sum(
        tokens.TOKENS_PER_MESSAGE + len(encoding.encode(str(m.content))) for m in messages
    )
    assert TokenCounter("gpt-4")(messages) == expected + tokens.TOKENS_PER_REPLY


def test_the_shipped_cl100k_base_is_tiktokens_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy in the package makes the encoding tiktoken's registry makes: the same ranks
    (the file's SHA-256 is the one tiktoken expects), split pattern and special tokens."""
    from tiktoken_ext import openai_public

    ours = cl100k()
    seen: list[tuple[str, str | None]] = []

    def the_copy(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen.append((path, expected_hash))
        return ours._mergeable_ranks

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", the_copy)
    theirs = tiktoken.Encoding(**openai_public.cl100k_base())
    assert seen == [(seen[0][0], bundled.SHA256)] and seen[0][0].endswith("cl100k_base.tiktoken")
    assert ours.name == theirs.name == "cl100k_base"
    assert ours._pat_str == theirs._pat_str
    assert ours._special_tokens == theirs._special_tokens
    assert len(ours._mergeable_ranks) == 100_256 and ours.n_vocab == 100_277
    text = "Thought: I'll search.\nAction: search[Zürich's 1,234 rivers]\r\n  <|endoftext|>"
    assert ours.encode(text, disallowed_special=()) == theirs.encode(text, disallowed_special=())
    assert ours.decode(ours.encode("Final Answer: 48")) == "Final Answer: 48"


def test_a_damaged_copy_is_refused() -> None:
    with pytest.raises(ValueError, match="SHA-256"):
        bundled.read_ranks(b"IQ== 0\n")


def test_cl100k_base_never_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cl100k_base model is counted from the copy: tiktoken's download is never asked."""

    def refuse(name: str) -> object:
        raise AssertionError(f"downloaded {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    assert encoding_for("gpt-4") is cl100k()


def test_each_text_is_encoded_once() -> None:
    real = cl100k()
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


def test_unavailable_encoding_falls_back_to_cl100k_with_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def offline(name: str) -> object:
        raise ConnectionError(f"cannot download {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with caplog.at_level(logging.INFO):
        encoding = encoding_for("gpt-4o")
        assert encoding_for("gpt-4o-mini") is encoding  # the same encoding: said once
    assert encoding.name == "cl100k_base"
    (record,) = caplog.records
    message = record.getMessage()
    assert record.levelno == logging.WARNING and "estimated with cl100k_base" in message
    assert "o200k_base: cannot download it (ConnectionError, offline?)" in message
    assert "TIKTOKEN_CACHE_DIR" in message and "docs/models.md" in message


def hanging_download(name: str) -> object:
    """``tiktoken.get_encoding`` of a download that hangs past the test's timeout."""
    time.sleep(5)
    raise AssertionError("not reached in time")


def test_a_hanging_download_falls_back_in_time(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tiktoken, "get_encoding", hanging_download)
    started = time.perf_counter()
    with caplog.at_level(logging.INFO):
        assert encoding_for("gpt-4o", timeout=0.1) is cl100k()
    assert time.perf_counter() - started < 2
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "timed out" in record.getMessage()


def test_no_encoding_at_all_falls_back_to_an_estimate(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The copy unreadable too (a damaged install): one warning, then characters / 4."""

    def damaged() -> object:
        raise OSError("no such file")

    monkeypatch.setattr(tiktoken, "get_encoding", hanging_download)
    monkeypatch.setattr(bundled, "cl100k_base", damaged)
    with caplog.at_level(logging.INFO):
        assert encoding_for("gpt-4o", timeout=0.1) is None
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "estimated" in record.getMessage()
    assert "o200k_base" in record.getMessage() and "cl100k_base" in record.getMessage()
    counter = TokenCounter.__new__(TokenCounter)
    TokenCounter.__init__(counter, None)
    monkeypatch.setattr(tokens, "encoding_for", lambda name: None)
    assert counter.count_text("abcdefgh") == estimate_tokens("abcdefgh") == 2
    assert counter.source == "estimate"
