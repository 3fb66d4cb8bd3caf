"""Reading the GBNF that ``reactgraph.nodes.calling.grammar`` writes, for its tests: the grammar as
a Python regular expression (what it allows, exactly), random replies it allows, and whether
llama.cpp's own grammar parser takes it (when llama-cpp-python and SmolLM2 are installed).

The subset read is the one the builder writes (one rule a line; literals, character classes,
rule references, groups, ``|``, ``?``, ``*``, ``+``, ``{m,n}``), with no recursion.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

Node = tuple[Any, ...]
# ("lit", text) ("cls", negated, ranges) ("ref", name) ("seq", [nodes]) ("alt", [nodes])
# ("rep", node, least, most)

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_ESCAPES["^"] = "^"


@dataclass
class _Reader:
    text: str
    at: int = 0

    def peek(self) -> str:
        return self.text[self.at : self.at + 1]

    def blank(self) -> None:
        while self.peek() in (" ", "\t"):
            self.at += 1

    def char(self) -> str:
        """One character of a literal or class, escapes read."""
        c = self.text[self.at]
        self.at += 1
        if c != "\\":
            return c
        e = self.text[self.at]
        self.at += 1
        if e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            code = int(self.text[self.at : self.at + width], 16)
            self.at += width
            return chr(code)
        return _ESCAPES[e]

    def alternatives(self) -> Node:
        options = [self.sequence()]
        while self.peek() == "|":
            self.at += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else ("alt", options)

    def sequence(self) -> Node:
        items: list[Node] = []
        while True:
            self.blank()
            c = self.peek()
            if c in ("", "|", ")"):
                return items[0] if len(items) == 1 else ("seq", items)
            items.append(self.postfix(self.atom()))

    def atom(self) -> Node:
        c = self.peek()
        if c == '"':
            self.at += 1
            out = []
            while self.peek() != '"':
                out.append(self.char())
            self.at += 1
            return ("lit", "".join(out))
        if c == "[":
            self.at += 1
            negated = self.peek() == "^"
            if negated:
                self.at += 1
            ranges = []
            while self.peek() != "]":
                low = self.char()
                high = low
                if self.peek() == "-" and self.text[self.at + 1] != "]":
                    self.at += 1
                    high = self.char()
                ranges.append((low, high))
            self.at += 1
            return ("cls", negated, tuple(ranges))
        if c == "(":
            self.at += 1
            inner = self.alternatives()
            assert self.peek() == ")", self.text[self.at :]
            self.at += 1
            return inner
        found = re.match(r"[a-zA-Z0-9-]+", self.text[self.at :])
        assert found, f"cannot read {self.text[self.at :][:40]!r}"
        self.at += found.end()
        return ("ref", found.group())

    def postfix(self, node: Node) -> Node:
        c = self.peek()
        if c == "?":
            self.at += 1
            return ("rep", node, 0, 1)
        if c == "*":
            self.at += 1
            return ("rep", node, 0, None)
        if c == "+":
            self.at += 1
            return ("rep", node, 1, None)
        if c == "{":
            end = self.text.index("}", self.at)
            least, _, most = self.text[self.at + 1 : end].partition(",")
            self.at = end + 1
            return ("rep", node, int(least), int(most) if most else None)
        return node


def read(grammar: str) -> dict[str, Node]:
    """The rules of a grammar, name -> node."""
    rules = {}
    for line in grammar.splitlines():
        if not line.strip():
            continue
        name, _, body = line.partition(" ::= ")
        reader = _Reader(body)
        rules[name] = reader.alternatives()
        assert reader.at == len(body), f"{name}: unread {body[reader.at :]!r}"
    return rules


def _class_regex(negated: bool, ranges: tuple[tuple[str, str], ...]) -> str:
    parts = "".join(re.escape(a) if a == b else f"{re.escape(a)}-{re.escape(b)}" for a, b in ranges)
    return f"[{'^' if negated else ''}{parts}]"


def to_regex(grammar: str) -> re.Pattern[str]:
    """The whole language of the grammar, as a regular expression (rules inlined)."""
    rules = read(grammar)

    @cache
    def rule(name: str) -> str:
        return f"(?:{node(rules[name])})"

    def node(n: Node) -> str:
        kind = n[0]
        if kind == "lit":
            return re.escape(n[1])
        if kind == "cls":
            return _class_regex(n[1], n[2])
        if kind == "ref":
            return rule(n[1])
        if kind == "seq":
            return "".join(node(x) for x in n[1])
        if kind == "alt":
            return "(?:" + "|".join(node(x) for x in n[1]) + ")"
        least, most = n[2], n[3]
        bound = f"{{{least},{'' if most is None else most}}}"
        return f"(?:{node(n[1])}){bound}"

    return re.compile(rule("root"), re.S)


POOL = [
    *"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    *" \t:.,;!?()[]{}<>\"'\\/*_`#-+=|&%$@~^",
    *["é", "中", "\U0001f600", "\n"],
    *["n"] * 12,
    *[":"] * 6,
    *["O"] * 2,
]


def _allows(n: Node, c: str) -> bool:
    inside = any(a <= c <= b for a, b in n[2])
    return inside != n[1]


def sample(grammar: str, rng: random.Random, max_repeat: int = 12) -> str:
    """A random text the grammar allows (each repetition of at most ``max_repeat`` items past
    its least, to keep texts short)."""
    rules = read(grammar)
    out: list[str] = []

    def walk(n: Node) -> None:
        kind = n[0]
        if kind == "lit":
            out.append(n[1])
        elif kind == "cls":
            out.append(rng.choice([c for c in POOL if _allows(n, c)]))
        elif kind == "ref":
            walk(rules[n[1]])
        elif kind == "seq":
            for x in n[1]:
                walk(x)
        elif kind == "alt":
            walk(rng.choice(n[1]))
        else:
            least, most = n[2], n[3]
            top = least + max_repeat if most is None else min(most, least + max_repeat)
            for _ in range(rng.randint(least, top)):
                walk(n[1])

    walk(rules["root"])
    return "".join(out)


def llama_parses(grammar: str) -> bool | None:
    """Whether llama.cpp's grammar parser (in llama-cpp-python) takes the grammar; None when
    llama-cpp-python or SmolLM2's GGUF (its vocabulary) is not installed."""
    vocab = _vocab()
    if vocab is None:
        return None
    import llama_cpp

    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


@cache
def _vocab() -> Any:
    try:
        import llama_cpp
    except ImportError:
        return None
    from tests.llama_server import model_path

    path = model_path()
    if path is None:
        return None
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    _models.append(model)
    return llama_cpp.llama_model_get_vocab(model)


_models: list[Any] = []  # kept loaded for the process: the vocabulary points into it
