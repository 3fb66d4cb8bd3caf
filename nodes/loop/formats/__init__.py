"""Action formats: how the model gives its Action, one module per format behind one interface,
chosen once from the run's ``action_format`` setting (``of(settings)``). Nothing outside this
package asks which format a run has (``tests/test_formats.py`` checks that).

A format says how the run's opening prompt reads, which blocks of the prompt it words its own
way (the answer format, the notes), what a model call is sent with (stop sequences, the tools
bound), what constrains the call (``constrained_decoding``), how a reply is read (a turn's and
the forced answer's), what else a call counts against the context window, and which models it
refuses. Adding a format (JSON in the reply's text, say) is a module with a ``FORMAT`` value and
one line in ``_MODULES``; the setting's values, the command line's choices, Studio's enum and the
eval's arms are checked against ``NAMES`` (``tests/test_formats.py``).

This module imports only the standard library and the formats load when first asked for, so
the nodes that ask (``loop.model``, ``loop.transcript``, ``loop.deps``) import it freely.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

    from reactgraph.nodes.calling.providers import ModelCaller
    from reactgraph.nodes.vocabulary.run_settings import RunSettings
    from reactgraph.nodes.vocabulary.state import ModelReply, ParsedReply

# The registered formats: the setting's value -> the module that holds its ``FORMAT``.
_MODULES = {
    "text": "reactgraph.nodes.loop.formats.text",
    "tool_calls": "reactgraph.nodes.loop.formats.tool_calls",
}
NAMES: tuple[str, ...] = tuple(_MODULES)
"""Every ``action_format`` a run may have, the default first."""


class Deps(Protocol):
    """What a format asks of the graph it runs in (the loop's ``Deps`` is one): its model and
    callers, its actions, and the tool schemas, bindings and grammars it keeps made."""

    @property
    def model(self) -> BaseChatModel:
        """The graph's model."""
        ...

    @property
    def caller(self) -> ModelCaller:
        """The graph's model's caller."""
        ...

    @property
    def call_params(self) -> Mapping[str, tuple[str, ...]]:
        """Every action with the names of its arguments."""
        ...

    @property
    def action_names(self) -> list[str]:
        """Every action the model may call."""
        ...

    def caller_for(self, settings: RunSettings) -> ModelCaller:
        """The run's model's caller."""
        ...

    def tool_schemas(
        self, settings: RunSettings, names: tuple[str, ...] | None = None
    ) -> list[dict[str, Any]]:
        """Every action (or those of ``names``) as a tool's JSON schema."""
        ...

    def tool_binding(
        self,
        caller: ModelCaller,
        settings: RunSettings,
        strict: bool = False,
        names: tuple[str, ...] | None = None,
    ) -> dict[str, Any]:
        """The call arguments that bind every action (or those of ``names``) to the model."""
        ...

    def step_grammar(
        self, settings: RunSettings, forced: bool = False, names: tuple[str, ...] | None = None
    ) -> str:
        """The GBNF grammar of one step of the run (of the actions ``names``)."""
        ...

    def described(self, names: tuple[str, ...] | None = None) -> str:
        """The prompt's lines of every action (or of those of ``names``)."""
        ...


class ActionFormat(Protocol):
    """How the model gives its Action, and everything about a run that follows from it."""

    name: str
    """The ``action_format`` value that chooses it."""
    answer_format: str
    """The prompt block of an answer schema (``{kind}``, ``{schema}``)."""
    notes_block: str
    """The prompt block of the notes (``{notes}``)."""
    reply_cut: str
    """The correction for a reply cut at the token cap (``{limit}``, ``{valid}``)."""
    stop: list[str] | None
    """The stop sequences a model call is sent with."""

    def opening(
        self,
        tool_descriptions: str,
        question: str,
        notes_limit: int | None,
        blocks: str,
        earlier: str,
    ) -> list[BaseMessage]:
        """The prompt's first messages: the loop's rules (with the run's own ``blocks``), the
        earlier conversation's block and the question."""
        ...

    binds_tools: bool
    """Whether its calls bind the tools (and its replies carry tool calls)."""

    def bound(
        self,
        deps: Deps,
        caller: ModelCaller,
        settings: RunSettings,
        forced: bool = False,
        names: tuple[str, ...] | None = None,
        strict: bool = False,
    ) -> Mapping[str, Any] | None:
        """The tools bound to a model call (``bind_tools``' arguments), or None; ``forced``: the
        forced answer's call, which must not call a tool; ``names``: only those actions (a
        middleware narrowed them); ``strict``: bound strict (``constrained_decoding``)."""
        ...

    def decoding(
        self, deps: Deps, settings: RunSettings, forced: bool, names: tuple[str, ...] | None
    ) -> dict[str, Any]:
        """What constrains a model call under ``constrained_decoding="gbnf"``, as the model
        request's settings (``model_settings``): the step's grammar, or the tools bound
        strict."""
        ...

    def narrowed(
        self,
        messages: list[BaseMessage],
        deps: Deps,
        settings: RunSettings,
        names: tuple[str, ...],
    ) -> list[BaseMessage]:
        """The prompt for the actions ``names`` alone (a middleware narrowed the tools)."""
        ...

    def check_model(self, deps: Deps, settings: RunSettings) -> None:
        """ValueError, saying what to do, for a model this format cannot run on (checked when
        the graph is built)."""
        ...

    def read(self, reply: ModelReply, deps: Deps, settings: RunSettings) -> ParsedReply:
        """A turn's reply, read: pure, never raises (a warning at most)."""
        ...

    def read_forced(self, reply: ModelReply, deps: Deps) -> tuple[ParsedReply, str | None]:
        """The forced answer's reply, read, and the answer in it (None: it holds none)."""
        ...

    def counted(self, deps: Deps, settings: RunSettings) -> list[BaseMessage]:
        """What a model call sends besides its messages, as messages counted against the
        context window."""
        ...


_loaded: dict[str, ActionFormat] = {}


def format_named(name: str) -> ActionFormat:
    """The registered format ``name`` (KeyError: none is)."""
    found = _loaded.get(name)
    if found is None:
        found = _loaded[name] = importlib.import_module(_MODULES[name]).FORMAT
    return found


def registered() -> Sequence[ActionFormat]:
    """Every registered format."""
    return [format_named(name) for name in NAMES]


def of(settings: RunSettings) -> ActionFormat:
    """The run's action format, chosen by its ``action_format`` setting."""
    return format_named(settings.action_format)
