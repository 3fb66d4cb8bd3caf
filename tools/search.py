"""Search over a local folder of .md/.txt pages: BM25 over passages, with page titles, and
``lookup`` of a keyword on the last page found (as the ReAct paper's Wikipedia tools do)."""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

DEFAULT_CORPUS = Path(__file__).parent / "corpus"
MAX_PASSAGE_CHARS = 1200
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "how",
        "did",
        "does",
        "do",
    ]
)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without stopwords."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


@dataclass(frozen=True)
class Passage:
    """One paragraph of a page."""

    title: str
    text: str


def _title_and_body(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    heading = re.search(r"^#\s+(.+)$", text, re.M)
    if heading is not None:
        return heading.group(1).strip(), text[heading.end() :]
    return re.sub(r"[-_]+", " ", path.stem).strip().title(), text


def _paragraphs(body: str) -> list[str]:
    paragraphs = []
    for block in re.split(r"\n\s*\n", body):
        if not block.strip().startswith("#"):
            paragraphs.extend(_passages(block))
    return paragraphs


def _passages(paragraph: str) -> list[str]:
    """One paragraph as passages of at most MAX_PASSAGE_CHARS, cut at sentence ends."""
    passages = []
    block = " ".join(paragraph.split())
    while len(block) > MAX_PASSAGE_CHARS:
        cut = block.rfind(". ", 0, MAX_PASSAGE_CHARS)
        cut = cut + 1 if cut > 0 else MAX_PASSAGE_CHARS
        passages.append(block[:cut].strip())
        block = block[cut:].strip()
    if block:
        passages.append(block)
    return passages


def _inverse_frequencies(docs: Sequence[Counter[str]]) -> dict[str, float]:
    """BM25's inverse document frequency of each term of ``docs`` (term counts): the rarer
    the term across them, the more a match on it weighs."""
    frequency = Counter(term for doc in docs for term in doc)
    total = len(docs)
    return {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}


class LocalCorpus:
    """BM25 (k1=1.5, b=0.75) over the passages of every .md/.txt file under a folder, or over
    pages given in memory (``from_pages``)."""

    def __init__(self, folder: str | Path = DEFAULT_CORPUS, top_k: int = 3) -> None:
        root = Path(folder)
        if not root.is_dir():
            raise ValueError(f"corpus folder not found: {root}")
        pages: dict[str, list[str]] = {}
        for path in sorted(p for p in root.rglob("*") if p.suffix in (".md", ".txt")):
            title, body = _title_and_body(path)
            pages.setdefault(title, []).extend(_paragraphs(body))
        self._index(pages, top_k, f"no .md or .txt pages with text under {root}")

    @classmethod
    def from_pages(cls, pages: Mapping[str, str | Sequence[str]], top_k: int = 3) -> LocalCorpus:
        """A corpus of the given pages only, title -> paragraphs (or one text): e.g. the ten
        paragraphs a HotpotQA question brings, so its search cannot reach another question's."""
        corpus = cls.__new__(cls)
        paragraphs = {
            title: [
                p
                for text in ([texts] if isinstance(texts, str) else texts)
                for p in _passages(text)
            ]
            for title, texts in pages.items()
        }
        corpus._index(paragraphs, top_k, "no pages with text given")
        return corpus

    def _index(self, pages: dict[str, list[str]], top_k: int, empty: str) -> None:
        self.top_k = top_k
        self.pages = {title: paragraphs for title, paragraphs in pages.items() if paragraphs}
        self.passages = [Passage(t, p) for t, paragraphs in self.pages.items() for p in paragraphs]
        if not self.passages:
            raise ValueError(empty)
        # The title counts twice, so a page about the query outranks passing mentions.
        self._docs = [Counter(tokenize(f"{p.title} {p.title} {p.text}")) for p in self.passages]
        self._lengths = [sum(d.values()) for d in self._docs]
        self._average = sum(self._lengths) / len(self._lengths)
        self._idf = _inverse_frequencies(self._docs)
        self._last_page: dict[str | None, str] = {}
        self._lock = threading.Lock()

    def rank(self, query: str) -> list[tuple[float, Passage]]:
        """Passages scoring above zero, best first."""
        terms = tokenize(query)
        scored = []
        for doc, length, passage in zip(self._docs, self._lengths, self.passages, strict=True):
            score = 0.0
            for term in terms:
                tf = doc.get(term, 0)
                if tf:
                    norm = tf + 1.5 * (1 - 0.75 + 0.75 * length / self._average)
                    score += self._idf[term] * tf * 2.5 / norm
            if score > 0:
                scored.append((score, passage))
        scored.sort(key=lambda pair: -pair[0])
        return scored

    def search(self, query: str, conversation: str | None = None) -> str:
        """The best passages for a query, each with its page title. ``conversation`` keys the
        last page found, so concurrent runs each look up their own."""
        if not query.strip():
            return "Error: empty query. Give a few keywords, e.g. search[Eiffel Tower]."
        ranked = self.rank(query)[: self.top_k]
        if not ranked:
            return f"No pages match {query.strip()!r}. Try other keywords."
        with self._lock:
            self._last_page[conversation] = ranked[0][1].title
        return "\n".join(f"[{p.title}] {p.text}" for _, p in ranked)

    def lookup(self, keyword: str, conversation: str | None = None) -> str:
        """The sentences of the last page found (in this conversation) that mention the
        keyword."""
        with self._lock:
            page = self._last_page.get(conversation)
        if page is None:
            return "Error: no page found yet. Use search first; lookup reads the last page found."
        needle = keyword.strip().lower()
        if not needle:
            return "Error: empty keyword."
        sentences = [s for p in self.pages[page] for s in _SENTENCE.split(p)]
        hits = [s for s in sentences if needle in s.lower()]
        if not hits:
            return f"No sentence on the page {page!r} mentions {keyword.strip()!r}."
        return "\n".join(f"({i}/{len(hits)}) [{page}] {s}" for i, s in enumerate(hits, 1))


def search_tools(
    folder: str | Path | None = None,
    top_k: int = 3,
    *,
    pages: Mapping[str, str | Sequence[str]] | None = None,
) -> list[BaseTool]:
    """``search`` and ``lookup`` over one folder (the bundled corpus by default) or over the
    given pages (title -> paragraphs); they share the last page found."""
    if folder is not None and pages is not None:
        raise ValueError("search_tools takes a folder or pages, not both")
    if pages is not None:
        return corpus_tools(LocalCorpus.from_pages(pages, top_k))
    return corpus_tools(LocalCorpus(DEFAULT_CORPUS if folder is None else folder, top_k))


def corpus_tools(corpus: LocalCorpus) -> list[BaseTool]:
    """``search`` and ``lookup`` over a corpus already built."""

    def conversation(config: RunnableConfig) -> str | None:
        # The caller's thread, when it has one: runs sharing these tools keep their own page.
        thread = (config.get("configurable") or {}).get("thread_id")
        return None if thread is None else str(thread)

    def search_(query: str, config: RunnableConfig) -> str:
        return corpus.search(query, conversation(config))

    def lookup_(keyword: str, config: RunnableConfig) -> str:
        return corpus.lookup(keyword, conversation(config))

    search = StructuredTool.from_function(
        search_,
        name="search",
        description="Search the encyclopedia for a topic, e.g. search[Eiffel Tower]; returns the "
        "best passages with their page titles.",
    )
    lookup = StructuredTool.from_function(
        lookup_,
        name="lookup",
        description="Find the sentences mentioning a keyword on the page last found by search, "
        "e.g. lookup[opened].",
    )
    return [search, lookup]
