"""Where a bracket closes, found without rescanning the reply.

A reply can hold thousands of unclosed brackets (a model looping on ``search[x``); scanning to
the end of the text for each would be quadratic. Instead a bracket's own line is read directly
and the rest comes from an index of depths built once per reply, on first need.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

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
