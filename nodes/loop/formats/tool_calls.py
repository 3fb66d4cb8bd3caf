"""The ``tool_calls`` format (``action_format="tool_calls"``): the model calls its tools
natively, bound as function schemas (``calling.binding``); a reply is read by its tool calls
(``reading.toolcalls``), and a reply with no tool call is the answer."""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from reactgraph.nodes.calling import constrained
from reactgraph.nodes.calling.binding import refused
from reactgraph.nodes.calling.constrained import STRICT_TOOLS
from reactgraph.nodes.reading.textparser import parse_react
from reactgraph.nodes.reading.toolcalls import read_tool_calls
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.run_settings import parallel_cap
from reactgraph.nodes.vocabulary.state import ModelReply, ParsedReply

if TYPE_CHECKING:
    from reactgraph.nodes.calling.providers import ModelCaller
    from reactgraph.nodes.loop.formats import Deps
    from reactgraph.nodes.vocabulary.run_settings import RunSettings

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=256)
def _tool_opening(question: str, blocks: str = "", earlier: str = "") -> tuple[BaseMessage, ...]:
    """The ``tool_calls`` format's opening: the loop's rules (and the run's own blocks), then
    the question (the tools come as bound schemas), the earlier conversation's block (when the
    thread has one) heading the question's message, as in the text format."""
    rules = f"{prompts.TOOL_CALLS_PROMPT}\n\n{blocks}" if blocks else prompts.TOOL_CALLS_PROMPT
    return (
        SystemMessage(rules),
        HumanMessage(earlier + prompts.TOOL_CALLS_QUESTION.format(question=question)),
    )


# The servers already said to write their Actions as text (warned once per process each).
_NO_TOOL_CALLS: set[str | None] = set()
_no_tool_calls_lock = threading.Lock()


def wrote_its_action(text: str, names: Sequence[str]) -> bool:
    """Whether a reply with no tool call wrote an Action all the same: the text format's
    ``Action: tool[input]`` line, or a ``<tool_call>`` block a server left unread (what a
    model does on a server that does not return tool calls)."""
    return "<tool_call>" in text or parse_react(text, names)["kind"] == "action"


def warn_no_tool_calls(url: str | None) -> None:
    """Say once per server that it answers with Actions written as text, not tool calls."""
    with _no_tool_calls_lock:
        if url in _NO_TOOL_CALLS:
            return
        _NO_TOOL_CALLS.add(url)
    logger.warning(prompts.NO_TOOL_CALLS.format(where=f" at {url}" if url else ""))


def forget_no_tool_calls() -> None:
    """Forget which servers were warned about (a test's server may reuse an old one's port)."""
    with _no_tool_calls_lock:
        _NO_TOOL_CALLS.clear()


class ToolCallsFormat:
    name = "tool_calls"
    answer_format = prompts.ANSWER_FORMAT_TOOLS
    notes_block = prompts.NOTES_BLOCK_TOOLS
    reply_cut = prompts.REPLY_CUT_TOOLS
    stop: list[str] | None = None

    def opening(
        self,
        tool_descriptions: str,
        question: str,
        notes_limit: int | None,
        blocks: str,
        earlier: str,
    ) -> list[BaseMessage]:
        return list(_tool_opening(question, blocks, earlier))

    binds_tools = True

    def bound(
        self,
        deps: Deps,
        caller: ModelCaller,
        settings: RunSettings,
        forced: bool = False,
        names: tuple[str, ...] | None = None,
        strict: bool = False,
    ) -> Mapping[str, Any] | None:
        """The tools stay bound for the forced answer, as providers want for a transcript with
        tool calls in it, and are refused where the binding says how (``tool_choice="none"``);
        with ``parallel_tool_calls``, a server that takes it (the OpenAI family's) is asked
        for several calls at once."""
        bound = deps.tool_binding(caller, settings, strict, names)
        if forced:
            return refused(bound)
        if settings.parallel_tool_calls and "tool_choice" in bound:  # the OpenAI family's
            return {**bound, "parallel_tool_calls": True}
        return bound

    def decoding(
        self, deps: Deps, settings: RunSettings, forced: bool, names: tuple[str, ...] | None
    ) -> dict[str, Any]:
        """The tools bound strict."""
        return {STRICT_TOOLS: True}

    def narrowed(
        self,
        messages: list[BaseMessage],
        deps: Deps,
        settings: RunSettings,
        names: tuple[str, ...],
    ) -> list[BaseMessage]:
        """The prompt as it is: the tools bound are the narrowed ones."""
        return messages

    def check_model(self, deps: Deps, settings: RunSettings) -> None:
        if settings.constrained_decoding == "gbnf":
            constrained.check_strict_model(deps.model)
        deps.tool_binding(deps.caller, settings)

    def read(self, reply: ModelReply, deps: Deps, settings: RunSettings) -> ParsedReply:
        """The reply's tool calls; a reply without one that wrote an Action as text all the
        same is warned about, once per server (it cannot bind tools, or was not asked to)."""
        calls = reply.get("tool_calls") or []
        parsed = read_tool_calls(reply["text"], calls, deps.call_params, parallel_cap(settings))
        if not calls and wrote_its_action(reply["text"], deps.action_names):
            warn_no_tool_calls(deps.caller_for(settings).url)
        return parsed

    def read_forced(self, reply: ModelReply, deps: Deps) -> tuple[ParsedReply, str | None]:
        """A tool call that comes all the same is the attempted Action, not an answer."""
        parsed = read_tool_calls(reply["text"], reply.get("tool_calls") or [], deps.call_params)
        return parsed, parsed["answer"] if parsed["kind"] == "answer" else None

    def counted(self, deps: Deps, settings: RunSettings) -> list[BaseMessage]:
        """The bound tools' schemas, as one message of their JSON."""
        return [SystemMessage(json.dumps(deps.tool_schemas(settings), ensure_ascii=False))]


FORMAT = ToolCallsFormat()
