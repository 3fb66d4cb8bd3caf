"""The text format (``action_format="text"``): the model writes its Action as a line of its
reply, ``Action: tool_name[input]``, read by the text parser (``reading.textparser``); its
tools are described in the prompt, and a call stops at ``Observation:``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage

from reactgraph.nodes.calling import constrained
from reactgraph.nodes.calling.constrained import GRAMMAR
from reactgraph.nodes.reading.textparser import parse_react
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.run_settings import notes_limit, parallel_cap
from reactgraph.nodes.vocabulary.state import ModelReply, ParsedReply

if TYPE_CHECKING:
    from reactgraph.nodes.calling.providers import ModelCaller
    from reactgraph.nodes.loop.formats import Deps
    from reactgraph.nodes.vocabulary.run_settings import RunSettings

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

    binds_tools = False

    def bound(
        self,
        deps: Deps,
        caller: ModelCaller,
        settings: RunSettings,
        forced: bool = False,
        names: tuple[str, ...] | None = None,
        strict: bool = False,
    ) -> Mapping[str, Any] | None:
        return None

    def decoding(
        self, deps: Deps, settings: RunSettings, forced: bool, names: tuple[str, ...] | None
    ) -> dict[str, Any]:
        """The step's grammar, of the actions ``names`` (None: all)."""
        return {GRAMMAR: deps.step_grammar(settings, forced, names)}

    def narrowed(
        self,
        messages: list[BaseMessage],
        deps: Deps,
        settings: RunSettings,
        names: tuple[str, ...],
    ) -> list[BaseMessage]:
        """The prompt with the lines of the actions ``names`` alone, where it lists them all
        (a middleware that rewrote that message keeps its own words)."""
        limit = str(notes_limit(settings))
        every = deps.described().replace(prompts.NOTES_LIMIT, limit)
        some = deps.described(names).replace(prompts.NOTES_LIMIT, limit)
        out = list(messages)
        for index, message in enumerate(out):
            if isinstance(message.content, str) and every in message.content:
                content = message.content.replace(every, some, 1)
                out[index] = message.model_copy(update={"content": content})
                break
        return out

    def check_model(self, deps: Deps, settings: RunSettings) -> None:
        if settings.constrained_decoding == "gbnf":
            constrained.check_grammar_model(deps.model)

    def read(self, reply: ModelReply, deps: Deps, settings: RunSettings) -> ParsedReply:
        return parse_react(reply["text"], deps.action_names, parallel_cap(settings))

    def read_forced(self, reply: ModelReply, deps: Deps) -> tuple[ParsedReply, str | None]:
        parsed = parse_react(reply["text"], deps.action_names)
        return parsed, _text_answer(parsed, reply["text"])

    def counted(self, deps: Deps, settings: RunSettings) -> list[BaseMessage]:
        return []


FORMAT = TextFormat()
