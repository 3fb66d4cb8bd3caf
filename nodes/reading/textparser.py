"""Reading a model's reply: one pure function from text to a typed ``ParsedReply``.

Real models drift from the format: emphasis around labels, numbered labels, the
``Action:`` + ``Action Input:`` form, ``tool(input)``, quoted or JSON inputs, nested brackets,
a hallucinated Observation. The parser reads the intended action from all of these, rejects
only what is truly ambiguous, never raises, and runs in time linear in the reply's length
(below).

The rules:

- A label counts only at the start of a line, after optional whitespace, emphasis, a heading
  mark or list numbering. ``Final Answer:`` in the middle of a sentence ("I will give my final
  answer: after one more search") is not an answer.
- An Action line names a tool, then gives its input in brackets or parentheses right after the
  name (``search[x]``, ``search(x)``), after a colon (``search: x``), or on an ``Action Input:``
  line that follows. A non-empty Action Input wins over any input on the Action line, which is
  most often the tool's signature echoed back (``Action: add (add two numbers)``).
- A name followed by anything else (``Action: Search the internet for "AI 2024".``,
  ``Action: search Eiffel Tower``) is a sentence, not a call: it runs only when the name is a
  known tool and an Action Input line follows; otherwise the model is told to write
  ``tool_name[input]``.
- When no Action label holds a call, a line that starts with ``known_tool[...]`` is the call.
- Labels inside a bracketed input, or inside a fence that opens an Action Input or a Final
  Answer, are part of that text.
- ``Finish[answer]`` (any case, as an action or a bare line) is the ReAct paper's own final
  answer.
- A one-line input loses one pair of quotes; a multi-line input (a fenced block) stays as
  written.

Linear time: the labels and calls are found by ``textscan.scan``, which never rescans (see that
module); what is done here with what it found is linear too.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from reactgraph.nodes.reading.textscan import scan
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.state import CallReading, ParsedReply

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.S | re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.I)
# Where a reply stops being the model's own: the literal stop sequence anywhere, or an
# Observation label in any decoration at the start of a line.
_OBSERVATION_CUT = re.compile(
    r"Observation:|^[ \t>#*_`\-]*+observation[ \t]*+(?:#?+[ \t]*+\d++)?+[ \t]*+[*_`]*+[ \t]*+:",
    re.I | re.M,
)
_EDGE_DECOR = " \t\r\n*_"
# The ReAct paper ends a run with the action Finish[answer], and models trained on its
# transcripts write it unprompted. It is reserved: a tool named "finish" would make that reply
# mean two things, and the paper's meaning wins, so such a tool cannot be called.
_FINISH = prompts.FINISH_ACTION
_SHOWN_CHARS = 80


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


_SEPARATORS = re.compile(r"[\s\-]+")


def canonical_name(name: str) -> str:
    """How tool names are compared: case, hyphens and spaces do not matter."""
    return _SEPARATORS.sub("_", name.strip()).lower()


@functools.lru_cache(maxsize=64)
def _named(tool_names: tuple[str, ...]) -> tuple[dict[str, str], str]:
    """The tools by their canonical names, and the list of them a correction gives (the same
    few names are read at every turn of a run)."""
    names = {canonical_name(n): n for n in tool_names}
    return names, ", ".join(names.values()) or "(none)"


def parse_react(text: str, tool_names: Iterable[str], max_calls: int | None = None) -> ParsedReply:
    """Read a cleaned reply (see ``clean_reply``) as a final answer, one action, or invalid;
    with ``max_calls`` (``parallel_tool_calls``: at least 1), as several actions: each distinct
    call read on its own (``CallReading``), those past ``max_calls`` answered so, and a final
    answer beside calls not taken (the calls run; the answer comes in a later reply)."""
    names, valid = _named(tuple(tool_names))
    canonical: dict[str, str] = {}

    def known(name: str) -> bool:
        name = _canonical(name, canonical)
        return name in names or name == _FINISH

    found = scan(text, known)
    thought = found.thought
    if found.answer is not None and not (max_calls is not None and found.calls):
        return _answer(found.answer, thought)

    if not found.calls:
        if found.prose:
            line = _shorten(found.prose[0])
            return invalid_reading(prompts.BAD_ACTION.format(text=line, valid=valid), thought)
        template = prompts.EMPTY_REPLY if not text.strip() else prompts.NO_ACTION
        return invalid_reading(template.format(valid=valid), thought)

    firsts: dict[tuple[str, str | None], tuple[str, str | None]] = {}
    for name, tool_input in found.calls:
        firsts.setdefault((_canonical(name, canonical), tool_input), (name, tool_input))
    distinct = list(firsts.values())
    if max_calls is not None and (len(distinct) > 1 or found.answer is not None):
        readings = [
            _call(name, tool_input, index, max_calls, names, valid, canonical)
            for index, (name, tool_input) in enumerate(distinct)
        ]
        return several(readings, thought)
    if len(distinct) > 1:
        shown = ", ".join(f"{n}[{_shorten(i)}]" if i is not None else n for n, i in distinct[:3])
        return invalid_reading(prompts.TWO_ACTIONS.format(actions=shown), thought)
    name, tool_input = distinct[0]
    if _canonical(name, canonical) == _FINISH:
        return _answer(tool_input or "", thought)
    tool = names.get(_canonical(name, canonical))
    if tool is None:
        return invalid_reading(prompts.UNKNOWN_TOOL.format(name=name, valid=valid), thought)
    if tool_input is None:
        return invalid_reading(prompts.MISSING_INPUT.format(name=tool, valid=valid), thought)
    return ParsedReply(
        kind="action",
        thought=thought,
        action=tool,
        action_input=tool_input,
        answer=None,
        error=None,
    )


def _call(
    name: str,
    tool_input: str | None,
    index: int,
    cap: int,
    names: dict[str, str],
    valid: str,
    canonical: dict[str, str],
) -> CallReading:
    """One call of a reply of several: the tool and input it runs, or why it does not."""
    tool = names.get(_canonical(name, canonical))
    error = None
    if index >= cap:
        error = prompts.PAST_PARALLEL_CAP.format(cap=cap, name=tool or name)
    elif _canonical(name, canonical) == _FINISH:
        error = prompts.ANSWER_AMONG_CALLS
    elif tool is None:
        error = prompts.UNKNOWN_TOOL.format(name=_shorten(name), valid=valid)
    elif tool_input is None:
        error = prompts.MISSING_INPUT.format(name=tool, valid=valid)
    return CallReading(
        action=tool if error is None else None,
        action_input=tool_input if error is None else None,
        call_id=None,
        args=None,
        error=error,
    )


def several(readings: list[CallReading], thought: str | None) -> ParsedReply:
    """A reply of several calls, read (``readings``, in its order): an ``action`` reading when
    one of them runs, its single-action fields the first's; else ``invalid``, every call's
    correction its error."""
    first = readings[0]
    if len(readings) == 1 and first["error"] is None and first["call_id"] is None:
        return ParsedReply(
            kind="action",
            thought=thought,
            action=first["action"],
            action_input=first["action_input"],
            answer=None,
            error=None,
        )
    if all(r["error"] is not None for r in readings):
        errors = dict.fromkeys(str(r["error"]) for r in readings)
        return invalid_reading(" ".join(errors), thought)
    reading = ParsedReply(
        kind="action",
        thought=thought,
        action=first["action"],
        action_input=first["action_input"],
        answer=None,
        error=first["error"],
    )
    if first["call_id"] is not None:
        reading["call_id"], reading["args"] = first["call_id"], first["args"]
    reading["actions"] = readings
    return reading


def _canonical(name: str, seen: dict[str, str]) -> str:
    """``canonical_name``, remembered: a long reply repeats the same few names."""
    if name not in seen:
        seen[name] = canonical_name(name)
    return seen[name]


def _answer(after: str, thought: str | None) -> ParsedReply:
    answer = after.strip(_EDGE_DECOR)
    if "\n" not in answer:
        # Inline code marks go; a fenced block (always several lines) keeps its fences.
        answer = answer.strip(_EDGE_DECOR + "`")
    if not answer:
        return invalid_reading(prompts.EMPTY_ANSWER, thought)
    if is_placeholder(answer):
        return invalid_reading(prompts.PLACEHOLDER_ANSWER.format(answer=answer), thought)
    return ParsedReply(
        kind="answer", thought=thought, action=None, action_input=None, answer=answer, error=None
    )


def is_placeholder(answer: str) -> bool:
    """Whether an answer is the prompt's placeholder copied (``your answer``, in any case,
    in brackets, quotes or emphasis, with a full stop): at most a few dozen characters read."""
    if len(answer) > 40:
        return False
    words = " ".join(answer.strip(_EDGE_DECOR + "`'\"<>[]().!").lower().split())
    return words in prompts.ANSWER_PLACEHOLDERS


_PLACEHOLDER_HEAD = prompts.PLACEHOLDER_ANSWER.split("{", 1)[0]


def refused_answer(parsed: ParsedReply) -> bool:
    """Whether a reading is a Final Answer line refused for what it holds (nothing, or the
    format's placeholder), rather than a reply with no answer line at all."""
    error = parsed["error"] or ""
    return error == prompts.EMPTY_ANSWER or error.startswith(_PLACEHOLDER_HEAD)


def invalid_reading(error: str, thought: str | None) -> ParsedReply:
    """A reading that is no Action and no answer: its corrective Observation is ``error``."""
    return ParsedReply(
        kind="invalid", thought=thought, action=None, action_input=None, answer=None, error=error
    )


def _shorten(text: str) -> str:
    """Enough of a model's text to recognise it in a corrective Observation."""
    text = " ".join(text[: _SHOWN_CHARS * 2].split())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
