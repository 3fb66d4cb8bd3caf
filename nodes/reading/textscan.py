"""Finding the labels and calls in a reply, in time linear in its length.

Replies can be long and repetitive (a model looping on ``search[x`` for 100 KB), so nothing here
rescans. Every pattern is possessive (``*+``, ``++``, ``?+`` never give back what they matched,
so no pattern can backtrack), text a call consumed is never read again, and where a bracket
closes is read from the bracket's own line, the rest from an index of depths built once per
reply on first need (``Brackets``). The module reads in that order: where brackets close, then
the labels and calls (``scan``). ``textparser`` turns what it finds into a ``ParsedReply``.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import NamedTuple

CLOSERS = {"[": "]", "(": ")"}
_BLANK = re.compile(r"\s*+")
_STRING = re.compile(r'"(?:[^"\\\n]++|\\.)*+"?')
# A quoted input ends at its quote followed by the closing bracket.
_QUOTED = {
    q + o: re.compile(re.escape(q) + r"[ \t]*+" + re.escape(c))
    for q in "'\""
    for o, c in CLOSERS.items()
}
# The tokens that move the depth: brackets, and in a JSON-like input whole strings, which end at
# their line's end as a JSON string must (so any two scans agree from the next line on).
_TOKENS = {
    (o, json_like): re.compile(
        (_STRING.pattern + "|" if json_like else "") + "[" + re.escape(o + c) + "]"
    )
    for o, c in CLOSERS.items()
    for json_like in (False, True)
}


class Searches:
    """``pattern.search(text, start)`` for lookups that move forward through one text: the
    last answer is reused while it still holds, so a failed search is never repeated."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._last: dict[re.Pattern[str], tuple[int, re.Match[str] | None]] = {}

    def search(self, pattern: re.Pattern[str], start: int) -> re.Match[str] | None:
        if pattern in self._last:
            since, found = self._last[pattern]
            if since <= start and (found is None or start <= found.start()):
                return found
        found = pattern.search(self.text, start)
        self._last[pattern] = (start, found)
        return found


class Brackets:
    """The brackets of one reply."""

    def __init__(self, searches: Searches) -> None:
        self.text = searches.text
        self._searches = searches
        self._depths: dict[tuple[str, bool], _Depths] = {}

    def close(self, opener: int) -> int | None:
        """Where the bracket at ``opener`` closes: after a quoted input at its closing quote;
        otherwise where the depth returns to zero, skipping strings in a JSON-like input."""
        text = self.text
        first = opener + 1
        if text[first : first + 1].isspace():
            first = _BLANK.match(text, first).end()  # type: ignore[union-attr]
        lead = text[first : first + 1]
        if lead in ("'", '"'):
            quoted = self._searches.search(_QUOTED[lead + text[opener]], first + 1)
            if quoted is not None:
                return quoted.end() - 1
        json_like = lead in ("{", '"')
        char, closer = text[opener], CLOSERS[text[opener]]
        eol = line_end(text, opener)
        shut = text.find(closer, opener + 1, eol)
        if shut >= 0 and not json_like and text.find(char, opener + 1, shut) < 0:
            return shut
        line = text[opener:eol]
        if closer not in line:
            # It cannot close on its own line (a long run of `[[[[`, say): count, do not scan.
            depth = (_STRING.sub("", line) if json_like else line).count(char)
        else:
            depth = 0
            for token in _TOKENS[(char, json_like)].finditer(text, opener, eol):
                if token.group() == char:
                    depth += 1
                elif token.group() == closer:
                    depth -= 1
                    if depth == 0:
                        return token.start()
        if eol >= len(text):
            return None
        key = (char, json_like)
        if key not in self._depths:
            self._depths[key] = _Depths(text, _TOKENS[key], char, closer)
        return self._depths[key].first_drop(eol, depth)


class _Depths:
    """The depth of one kind of bracket through the whole reply, so that where any bracket
    closes is a binary search rather than a scan to the end of the text."""

    def __init__(self, text: str, tokens: re.Pattern[str], opener: str, closer: str) -> None:
        self.positions: list[int] = []
        self.depths: list[int] = []
        self.closers_at: dict[int, list[int]] = {}
        depth = 0
        for token in tokens.finditer(text):
            if token.group() == opener:
                depth += 1
            elif token.group() == closer:
                depth -= 1
                self.closers_at.setdefault(depth, []).append(token.start())
            else:
                continue
            self.positions.append(token.start())
            self.depths.append(depth)

    def first_drop(self, start: int, drop: int) -> int | None:
        """The first closing bracket after ``start`` where the depth is ``drop`` below its
        depth at ``start``."""
        before = bisect_left(self.positions, start)
        target = (self.depths[before - 1] if before else 0) - drop
        closers = self.closers_at.get(target, [])
        index = bisect_right(closers, start)
        return closers[index] if index < len(closers) else None


def line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return len(text) if end < 0 else end


_LIST = r"(?:[-+][ \t]++|\*[ \t]++|\d++[.)][ \t]++)?+"
# After the colon go emphasis and the backtick closing a `Label:`, but not a backtick that
# opens the text (inline code, a ``` fence): that belongs to the input or the answer.
_AFTER_COLON = r"[ \t]*+(?:[*_]|`(?=[ \t*_]|$))*+[ \t]*+"
LABEL = re.compile(
    r"^[ \t>]*+" + _LIST + r"(?:#{1,6}+[ \t]*+)?+[*_`]*+[ \t]*+"
    r"(?P<label>thought|action[ \t_]*+input|action|final[ \t]*+answer)"
    r"[ \t]*+(?:#?+[ \t]*+\d++)?+[ \t]*+[*_`]*+[ \t]*+:" + _AFTER_COLON + r"(?P<rest>.*)$",
    re.I | re.M,
)
_NAME = r"[*_`'\"]*+(?P<name>[A-Za-z_][\w.\-]*+)[*_`'\"]*+[ \t]*+"
_CALL = re.compile(
    _NAME + r"(?:(?P<open>[\[(])|(?P<colon>:)|(?P<bare>[ \t.*_`'\"]*+(?=\r?\n|\Z)))?+"
)
_BARE_CALL = re.compile(r"^[ \t>]*+" + _LIST + r"[*_`]*+[ \t]*+" + _NAME + r"(?P<open>[\[(])", re.M)
_FENCE_CLOSE = re.compile(r"^[ \t]*+`{3,}+[ \t]*+\r?$", re.M)
_KWARG = re.compile(r"\w++[ \t]*+=[ \t]*+(?P<value>(['\"]).*\2)\Z")
# A reply with more calls than this is a model looping on one line; its first calls already
# decide it (one action, or more than one), so the rest are not read as calls. Labels are
# still found to the end, so a later Final Answer still counts.
MAX_CALLS = 100


class Call(NamedTuple):
    """What an Action line (or a bare ``tool[input]`` line) wrote."""

    name: str
    tool_input: str | None
    """None when the line gave no input of its own."""
    prose: str | None
    """The line, when the name was followed by free text rather than an input."""
    end: int
    """Where the call's text ends; labels before this are part of its input."""


class Scan(NamedTuple):
    """What a reply wrote, before any decision about what it means."""

    thought: str | None
    """The first Thought's text, or the text before the first label."""
    answer: str | None
    """The first Final Answer's text; None when there is no Final Answer label."""
    calls: list[tuple[str, str | None]]
    """Every call, in order, as (name as written, input or None)."""
    prose: list[str]
    """Action lines that wrote no call: a name followed by a sentence."""


def scan(text: str, known: Callable[[str], bool]) -> Scan:
    """The labels of a reply and its calls. Labels inside a bracketed input (a multi-line
    ``update_notes[...]``) or inside a fence that opens an Action Input or Final Answer belong
    to that text. Without any Action label call, lines that start with ``known[input]`` count.
    """
    reader = _Reader(text)
    # Plain tuples, not Match objects: a long reply has tens of thousands of labels, and
    # tuples of ints and strings cost the garbage collector nothing once they are kept.
    labels: list[tuple[int, int, str]] = []  # (start, start of its text, kind)
    pending: list[tuple[int, str, str | None, str | None]] = []  # (label, name, input, prose)
    skip_until = -1
    for match in LABEL.finditer(text):
        if match.start() < skip_until:
            continue
        kind = _kind(match.group("label"))
        labels.append((match.start(), match.start("rest"), kind))
        if kind == "action" and len(pending) < MAX_CALLS:
            call = reader.call_after(match)
            if call is not None:
                pending.append((len(labels) - 1, call.name, call.tool_input, call.prose))
                skip_until = call.end
        elif kind in ("action input", "final answer"):
            skip_until = reader.fence_end(match.start("rest"))

    def text_of(index: int) -> str:
        end = labels[index + 1][0] if index + 1 < len(labels) else len(text)
        return text[labels[index][1] : end]

    kinds = [kind for _, _, kind in labels]
    if "thought" in kinds:
        thought = text_of(kinds.index("thought"))
    else:
        thought = text[: labels[0][0]] if labels else text
    answer = text_of(kinds.index("final answer")) if "final answer" in kinds else None
    calls: list[tuple[str, str | None]] = []
    prose: list[str] = []
    for index, name, tool_input, line in pending:
        given = None
        if index + 1 < len(labels) and kinds[index + 1] == "action input":
            # The Action Input wins over text on the Action line: that text is most often
            # the tool's signature or description echoed back, as in `add (add two numbers)`.
            given = unwrap(text_of(index + 1)) or None
        if line is None:
            calls.append((name, given if given is not None else tool_input))
        elif given is not None and known(name):
            calls.append((name, given))
        else:
            prose.append(line)
    if not calls:
        calls = reader.bare_calls(known)
    return Scan(thought.strip() or None, answer, calls, prose)


def _kind(label: str) -> str:
    label = label.lower()
    if label[0] == "t":
        return "thought"
    if label[0] == "f":
        return "final answer"
    return "action input" if label.endswith("input") else "action"


def unwrap(value: str) -> str:
    """An input as the tool gets it: a one-line input loses one pair of quotes (or a lone
    ``key=`` in front of a quoted value); a multi-line one, a fenced block say, stays as
    written."""
    value = value.strip()
    if "\n" in value:
        return value
    kwarg = _KWARG.match(value) if "=" in value else None
    if kwarg is not None:
        value = kwarg.group("value")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        if value.startswith("``"):
            return value
        if value[0] == '"':
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = None
            if isinstance(decoded, str):
                return decoded
        return value[1:-1]
    return value


class _Reader:
    """One reply, with the memory that keeps repeated lookups from rescanning it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._searches = Searches(text)
        self._brackets = Brackets(self._searches)

    def call_after(self, label: re.Match[str]) -> Call | None:
        """The call of an Action label: on its line, or on the next line when the label's
        line is empty and that next line is not itself a label."""
        start = label.start("rest")
        if not label.group("rest").strip():
            start = _BLANK.match(self.text, label.end()).end()  # type: ignore[union-attr]
            line_start = self.text.rfind("\n", 0, start) + 1
            if start >= len(self.text) or LABEL.match(self.text, line_start):
                return None
        return self._call_at(start)

    def bare_calls(self, known: Callable[[str], bool]) -> list[tuple[str, str | None]]:
        calls: list[tuple[str, str | None]] = []
        skip_until = -1
        for head in _BARE_CALL.finditer(self.text):
            name = head.group("name").rstrip(".-")
            if head.start() < skip_until or not known(name):
                continue
            call = self._bracketed(name, head)
            calls.append((name, call.tool_input))
            if len(calls) >= MAX_CALLS:
                break
            skip_until = call.end
        return calls

    def fence_end(self, start: int) -> int:
        """Where a ``` fence that opens the text at ``start`` closes; -1 when there is none."""
        text = self.text
        start = _BLANK.match(text, start).end()  # type: ignore[union-attr]
        if not text.startswith("```", start):
            return -1
        eol = line_end(text, start)
        if "```" in text[start + 3 : eol]:
            return -1
        close = self._searches.search(_FENCE_CLOSE, eol)
        return -1 if close is None else close.end()

    def _call_at(self, start: int) -> Call:
        text = self.text
        head = _CALL.match(text, start)
        if head is None:
            eol = line_end(text, start)
            return Call("", None, text[start:eol].strip(), eol)
        name = head.group("name").rstrip(".-")
        if head.group("open"):
            return self._bracketed(name, head)
        eol = line_end(text, head.end())
        if head.group("colon"):
            line = text[head.end() : eol].strip()
            return Call(name, unwrap(line) if line else None, None, eol)
        if head.group("bare") is not None:
            return Call(name, None, None, eol)
        return Call(name, None, text[start:eol].strip(), eol)

    def _bracketed(self, name: str, head: re.Match[str]) -> Call:
        text = self.text
        opener = head.start("open")
        close = self._brackets.close(opener)
        if close is not None:
            return Call(name, unwrap(text[head.end() : close]), None, close + 1)
        # An unclosed bracket: the input runs to the end of the paragraph.
        end = text.find("\n\n", head.end())
        end = len(text) if end < 0 else end
        inner = text[head.end() : end].rstrip().rstrip(CLOSERS[text[opener]])
        return Call(name, unwrap(inner), None, end)
