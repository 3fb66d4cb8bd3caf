"""What a variant is: one value that says everything the assembly needs to build its graph.

A variant adds nodes in front of the model call (``before_model``), extra actions the model may
call besides the tools (``actions``), changes the model's view of the transcript (``view``), and
chooses its exit at the turn cap (``at_cap``). Its settings, with their defaults and
descriptions, are its context schema. ``reactgraph.assembly`` turns any ``Variant`` into a graph;
nothing else in the code asks which variant it is running.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.nodes.vocabulary.view import WHOLE, View
from reactgraph.settings import Setting, check_all, settings_of

if TYPE_CHECKING:
    from reactgraph.nodes.loop.deps import Deps
    from reactgraph.nodes.vocabulary.state import State

# A node body: (state, config, deps) -> a partial update, or a generator of effects that
# returns one (see ``reactgraph.nodes.vocabulary.effects``).
Body = Callable[["State", Any, "Deps"], Any]


class _Bodied:
    """A part of a variant whose node body is the function ``name`` of the node ``module``."""

    name: str
    module: str

    @property
    def body(self) -> Body:
        """The node body ``module.name``, imported when a graph is built (not when the registry
        is read: the command line's parser reads the specs without loading LangChain)."""
        return getattr(importlib.import_module(self.module), self.name)


@dataclass(frozen=True)
class Step(_Bodied):
    """A node spliced in front of the model call."""

    name: str
    """The node's name, and the name of its body in ``module``."""
    module: str
    """The node module that holds the body, e.g. ``reactgraph.nodes.loop.compaction``."""
    every_turn: bool
    """True: before every model call (``compact_history``); False: once per run, after
    ``start_run`` (``load_notes``)."""
    can_end: bool = False
    """Whether it may end the run by setting a status (compaction's ``context_exhausted``)."""


@dataclass(frozen=True)
class Action(_Bodied):
    """An action the model may call besides the tools, handled by its own node."""

    name: str
    description: str
    """Its line in the prompt's list of actions (``<max_notes_chars>`` is filled per run)."""
    module: str
    """The node module whose function ``name`` handles it."""


@dataclass(frozen=True)
class Variant:
    """One variant of the loop, described once."""

    name: str
    summary: str
    """One line for ``--help``, Studio and the README."""
    settings_type: type[RunSettings]
    """Its runs' settings: the class whose fields it takes (``NotesSettings``...)."""
    defaults: Mapping[str, Any]
    """Its own defaults over the declared ones (``{"max_turns": 40}``)."""
    before_model: tuple[Step, ...] = ()
    actions: tuple[Action, ...] = ()
    view: View = WHOLE
    at_cap: Literal["force_answer", "stop_run"] = "force_answer"
    """At ``max_turns``: one forced last call that must answer, or stop with the state saved."""
    objects: frozenset[str] = frozenset()
    """Build-time Python objects it accepts beyond the model and tools: ``store``,
    ``token_counter``, ``summarizer``."""

    def __post_init__(self) -> None:
        self.settings  # noqa: B018 (a default naming no setting fails here, on import)

    @cached_property
    def settings(self) -> tuple[Setting, ...]:
        """Every setting it takes: a view of each field of ``settings_type``, with this
        variant's defaults."""
        return settings_of(self.settings_type, **self.defaults)

    def built(self, given: Mapping[str, Any]) -> RunSettings:
        """The settings a graph of this variant built with ``given`` has, as one value;
        ValueError/TypeError as ``build_graph`` would raise them."""
        return self.settings_type.of(check_all(self.name, self.settings, given, where="build"))

    def setting(self, name: str) -> Setting | None:
        """Its setting of that name, if it has one."""
        return next((s for s in self.settings if s.name == name), None)
