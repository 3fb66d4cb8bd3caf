"""Reading a model's reply: one pure function from text to a typed ``ParsedReply``.

Real models drift from the format: emphasis around labels, numbered labels, the
``Action:`` + ``Action Input:`` form, ``tool(input)``, quoted or JSON inputs, nested brackets,
a hallucinated Observation. The parser reads the intended action from all of these, rejects
only what is truly ambiguous, and never raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from reactgraph.nodes import prompts
from reactgraph.nodes.state import ParsedReply

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.S | re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.I)
# Where a reply stops being the model's own: the literal stop sequence anywhere, or an
# Observation label in any decoration at the start of a line.
_OBSERVATION_CUT = re.compile(
    r"Observation:|^[ \t>#*_`\-]*observation[ \t]*(?:#?[ \t]*\d+)?[ \t]*[*_`]*[ \t]*:",
    re.I | re.M,
)
_DECOR = r"[*_`]*"
_LABEL = re.compile(
    r"^[ \t>]*(?:[-+][ \t]+|\*[ \t]+|\d+[.)][ \t]+)?(?:#{1,6}[ \t]*)?" + _DECOR + r"[ \t]*"
    r"(?P<label>thought|action[ \t_]*input|action|final[ \t]*answer)"
    r"[ \t]*(?:#?[ \t]*\d+)?[ \t]*" + _DECOR + r"[ \t]*:[ \t]*" + _DECOR + r"[ \t]*"
    r"(?P<rest>.*)$",
    re.I | re.M,
)
_INLINE_ANSWER = re.compile(r"final[ \t]*answer[ \t]*" + _DECOR + r"[ \t]*:", re.I)
_CALL = re.compile(
    r"^[*_`'\"]*(?P<name>[A-Za-z_][\w.\-]*)[*_`'\"]*[ \t]*"
    r"(?:(?P<open>[\[(])|:[ \t]*|[ \t]+|(?=\r?\n)|$)"
)
_BARE_CALL = re.compile(r"^[ \t>]*(?:[-+*][ \t]+|\d+[.)][ \t]+)?" + _DECOR + r"[ \t]*(?=\S)", re.M)
_KWARG = re.compile(r"^\w+[ \t]*=[ \t]*(?P<value>(['\"]).*\2)$", re.S)
_CLOSERS = {"[": "]", "(": ")"}
_EDGE_DECOR = " \t\r\n*_`"


def clean_reply(raw: str) -> str:
    """The part of a reply that is the model's own: no reasoning blocks, nothing after an
    'Observation:' it wrote itself."""
    text = _THINK_BLOCK.sub("", raw)
    # Some servers strip the opening tag: everything up to a lone closing tag is reasoning.
    closings = list(_THINK_CLOSE.finditer(text))
    if closings:
        text = text[closings[-1].end() :]
    cut = _OBSERVATION_CUT.search(text)
    if cut is not None:
        text = text[: cut.start()]
    return text.strip()


def canonical_name(name: str) -> str:
    """How tool names are compared: case, hyphens and spaces do not matter."""
    return re.sub(r"[\s\-]+", "_", name.strip()).lower()


def parse_react(text: str, tool_names: Iterable[str]) -> ParsedReply:
    """Read a cleaned reply (see ``clean_reply``) as a final answer, one action, or invalid."""
    names = {canonical_name(n): n for n in tool_names}
    valid = ", ".join(names.values()) or "(none)"
    labels, calls = _scan(text)
    thought = _thought(text, labels)

    for index, match in enumerate(labels):
        if _kind(match) == "final answer":
            return _answer(_section(text, labels, index), thought)

    calls = calls or _bare_calls(text, names)
    if not calls:
        inline = _INLINE_ANSWER.search(text)
        if inline is not None:
            return _answer(text[inline.end() :], thought)
        template = prompts.EMPTY_REPLY if not text.strip() else prompts.NO_ACTION
        return _invalid(template.format(valid=valid), thought)

    distinct = list(dict.fromkeys(calls))
    if len(distinct) > 1:
        shown = ", ".join(f"{n}[{i}]" if i is not None else n for n, i in distinct[:3])
        return _invalid(prompts.TWO_ACTIONS.format(actions=shown), thought)
    name, tool_input = distinct[0]
    tool = names.get(canonical_name(name))
    if tool is None:
        return _invalid(prompts.UNKNOWN_TOOL.format(name=name, valid=valid), thought)
    if tool_input is None:
        return _invalid(prompts.MISSING_INPUT.format(name=tool, valid=valid), thought)
    return ParsedReply(
        kind="action",
        thought=thought,
        action=tool,
        action_input=tool_input,
        answer=None,
        error=None,
    )


def _scan(text: str) -> tuple[list[re.Match[str]], list[tuple[str, str | None]]]:
    """The labels of a reply and the calls of its Action labels.

    Labels inside a bracketed action input (a multi-line ``update_notes[...]``, say) are part of
    that input, not labels.
    """
    labels: list[re.Match[str]] = []
    pending: list[tuple[int, str, str | None]] = []
    skip_until = -1
    for match in _LABEL.finditer(text):
        if match.start() < skip_until:
            continue
        labels.append(match)
        if _kind(match) != "action":
            continue
        body = text[match.start("rest") :]
        stripped = body.lstrip()
        call = _read_call(stripped)
        if call is None:
            continue
        name, tool_input, consumed = call
        skip_until = match.start("rest") + (len(body) - len(stripped)) + consumed
        pending.append((len(labels) - 1, name, tool_input))
    calls = []
    for index, name, tool_input in pending:
        following = labels[index + 1] if index + 1 < len(labels) else None
        if tool_input is None and following is not None and _kind(following) == "action input":
            tool_input = _unwrap(_section(text, labels, index + 1))
        calls.append((name, tool_input))
    return labels, calls


def _kind(match: re.Match[str]) -> str:
    return re.sub(r"[\s_]+", " ", match.group("label").lower())


def _section(text: str, labels: list[re.Match[str]], index: int) -> str:
    """A label's text: the rest of its line and the lines up to the next label."""
    match = labels[index]
    end = labels[index + 1].start() if index + 1 < len(labels) else len(text)
    return match.group("rest") + text[match.end() : end]


def _thought(text: str, labels: list[re.Match[str]]) -> str | None:
    for index, match in enumerate(labels):
        if _kind(match) == "thought":
            return _section(text, labels, index).strip() or None
    head = text[: labels[0].start()] if labels else text
    return head.strip() or None


def _answer(after: str, thought: str | None) -> ParsedReply:
    answer = after.strip(_EDGE_DECOR)
    if not answer:
        return _invalid(prompts.EMPTY_ANSWER, thought)
    return ParsedReply(
        kind="answer", thought=thought, action=None, action_input=None, answer=answer, error=None
    )


def _invalid(error: str, thought: str | None) -> ParsedReply:
    return ParsedReply(
        kind="invalid", thought=thought, action=None, action_input=None, answer=None, error=error
    )


def _bare_calls(text: str, names: dict[str, str]) -> list[tuple[str, str | None]]:
    """Calls written without an Action label: only bracketed calls of known tools count."""
    calls = []
    for line_start in _BARE_CALL.finditer(text):
        body = text[line_start.end() :]
        call = _read_call(body)
        if call is None or call[1] is None or canonical_name(call[0]) not in names:
            continue
        if re.match(r"[*_`'\"]*[\w.\-]+[*_`'\"]*[ \t]*[\[(]", body):
            calls.append((call[0], call[1]))
    return calls


def _read_call(body: str) -> tuple[str, str | None, int] | None:
    """``name[input]``, ``name(input)``, ``name: input``, ``name input`` or a bare ``name``;
    with how many characters of ``body`` the call took."""
    match = _CALL.match(body)
    if match is None:
        return None
    name = match.group("name").rstrip(".-")
    if match.group("open"):
        close = _matching_close(body, match.start("open"))
        if close is None:
            # An unclosed bracket: the input runs to the end of the paragraph.
            end = body.find("\n\n", match.end())
            end = len(body) if end < 0 else end
            inner = body[match.end() : end].rstrip().rstrip(_CLOSERS[match.group("open")])
            return name, _unwrap(inner), end
        return name, _unwrap(body[match.end() : close]), close + 1
    end = body.find("\n", match.end())
    end = len(body) if end < 0 else end
    line = body[match.end() : end].strip()
    return name, (_unwrap(line) if line else None), end


def _matching_close(text: str, start: int) -> int | None:
    """Index of the bracket closing ``text[start]``; nested pairs and quoted inputs are skipped."""
    opener = text[start]
    closer = _CLOSERS[opener]
    inner = text[start + 1 :].lstrip()
    offset = len(text) - len(inner)
    if inner[:1] in ("'", '"'):
        quote = inner[0]
        found = re.search(re.escape(quote) + r"[ \t]*" + re.escape(closer), text[offset + 1 :])
        if found is not None:
            return offset + 1 + found.end() - 1
    depth = 0
    in_string = False
    json_like = inner[:1] in ("{", '"')
    index = start
    while index < len(text):
        char = text[index]
        if in_string:
            if char == "\\":
                index += 1
            elif char == '"':
                in_string = False
        elif char == '"' and json_like:
            in_string = True
        elif char == opener:
            depth += 1
        elif char == closer:
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return None


def _unwrap(value: str) -> str:
    """Strip one pair of quotes (or a lone ``key=`` in front of a quoted value)."""
    value = value.strip()
    kwarg = _KWARG.match(value)
    if kwarg is not None:
        value = kwarg.group("value")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        if value[0] == '"':
            try:
                decoded = json.loads(value)
            except ValueError:
                decoded = None
            if isinstance(decoded, str):
                return decoded
        return value[1:-1]
    return value
