"""The text format (``action_format="text"``): the model writes its Action as a line of its
reply, ``Action: tool_name[input]``, read by the text parser (``reading.textparser``); its
tools are described in the prompt, and a call stops at ``Observation:``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage

from reactgraph.nodes.calling import constrained
from reactgraph.nodes.calling.constrained import Constraint, grammar_constraint
from reactgraph.nodes.loop import prompts
from reactgraph.nodes.loop.state import ModelReply, ParsedReply
from reactgraph.nodes.reading.textparser import parse_react

if TYPE_CHECKING:
    from reactgraph.nodes.calling.providers import ModelCaller
    from reactgraph.nodes.loop.deps import Deps
    from reactgraph.nodes.loop.run_settings import RunSettings

# The seed's prompt up to its last line, "Question: {question}": the earlier conversation goes
# between the two, the prompt's text otherwise as written.
_RULES = prompts.REACT_PROMPT.removesuffix(prompts.TOOL_CALLS_QUESTION)


@functools.lru_cache(maxsize=256)
def _opening(
    tool_descriptions: str,
    question: str,
    notes_limit: int | None,
    blocks: str = "",
    earlier: str = "",
) -> HumanMessage:
    """The text format's opening: the seed's prompt, with the run's own blocks (``run_blocks``)
    after its rules and the earlier conversation's block (when the thread has one) right before
    its ``Question:`` line."""
    described = tool_descriptions.replace(prompts.NOTES_LIMIT, str(notes_limit))
    if not blocks and not earlier:
        text = prompts.REACT_PROMPT.format(tool_descriptions=described, question=question)
        return HumanMessage(text)
    rules = _RULES.format(tool_descriptions=described)
    own = f"{blocks}\n\n" if blocks else ""
    return HumanMessage(
        rules + own + earlier + prompts.TOOL_CALLS_QUESTION.format(question=question)
    )


def _text_answer(parsed: ParsedReply, text: str) -> str | None:
    """The answer in a forced reply of the text format: its Final Answer, or plain prose with
    no labels (the model answering in its own words); an Action is no answer."""
    if parsed["kind"] == "answer":
        return parsed["answer"]
    if parsed["kind"] == "invalid" and text:
        return text
    return None


class TextFormat:
    name = "text"
    answer_format = prompts.ANSWER_FORMAT
    notes_block = prompts.NOTES_BLOCK
    reply_cut = prompts.REPLY_CUT

    def __init__(self) -> None:
        self.stop: list[str] | None = [prompts.STOP_SEQUENCE]

    def opening(
        self,
        tool_descriptions: str,
        question: str,
        notes_limit: int | None,
        blocks: str,
        earlier: str,
    ) -> list[BaseMessage]:
        return [_opening(tool_descriptions, question, notes_limit, blocks, earlier)]

    def bound(
        self, deps: Deps, caller: ModelCaller, settings: RunSettings, forced: bool = False
    ) -> Mapping[str, Any] | None:
        return None

    def constraint(
        self, deps: Deps, caller: ModelCaller, settings: RunSettings, forced: bool
    ) -> Constraint:
        return grammar_constraint(deps.step_grammar(settings, forced))

    def check_model(self, deps: Deps, settings: RunSettings) -> None:
        if settings.constrained_decoding == "gbnf":
            constrained.check_grammar_model(deps.model)

    def read(self, reply: ModelReply, deps: Deps, settings: RunSettings) -> ParsedReply:
        return parse_react(reply["text"], deps.action_names)

    def read_forced(self, reply: ModelReply, deps: Deps) -> tuple[ParsedReply, str | None]:
        parsed = parse_react(reply["text"], deps.action_names)
        return parsed, _text_answer(parsed, reply["text"])

    def counted(self, deps: Deps, settings: RunSettings) -> list[BaseMessage]:
        return []


FORMAT = TextFormat()
