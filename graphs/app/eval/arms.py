"""What an eval compares: its arms, each a name in ``--variants`` and a row of the report.

- ``transcript`` (any variant's name): that variant in the text action format, or in the format
  ``--action-format`` gives;
- ``transcript:tool_calls`` (``VARIANT:FORMAT``): that variant in that format
  (``transcript:text`` is ``transcript``);
- ``transcript+gbnf`` (``NAME+gbnf``, any of the above but the prebuilt agent): that arm with
  its replies constrained by the grammar (``constrained_decoding="gbnf"``), an arm of its own,
  so one eval compares the same format with and without it (``reactgraph eval --bench bfcl``
  names every arm so when ``--constrained-decoding`` is given);
- ``prebuilt``: LangGraph's prebuilt ReAct agent (``create_react_agent``), a contender: the
  same model, server, tools and questions, run its own way (``reactgraph.app.eval.prebuilt``).

An arm's name (its ``label``) always says its format when that is not text, and keys its result
lines and threads: a result is never reused for another format, and a report row never mixes
two. Plain data: the parser imports no LangChain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reactgraph.app.flags import UsageError
from reactgraph.nodes.loop.formats import NAMES
from reactgraph.variants import REGISTRY, VARIANTS

PREBUILT = "prebuilt"
FORMATS = NAMES
TEXT = NAMES[0]  # the default format
GRAMMAR = "gbnf"
"""The constrained decoding an arm named ``NAME+gbnf`` runs with."""


@dataclass(frozen=True)
class Arm:
    """One contender of an eval."""

    label: str
    """Its name in the result lines and the report: ``transcript``, ``notes:tool_calls``,
    ``prebuilt``."""
    variant: str
    """The reactgraph variant it runs (``prebuilt``: its own name)."""
    action_format: str
    """``text`` or ``tool_calls`` (the prebuilt agent calls its tools natively)."""
    grammar: str | None = None
    """Its ``constrained_decoding``: ``gbnf`` or ``off`` when the arm names it; None: the
    run's setting."""

    @property
    def prebuilt(self) -> bool:
        """Whether it is LangGraph's prebuilt agent rather than a reactgraph variant."""
        return self.variant == PREBUILT


def arm(name: str, default_format: str | None = None) -> Arm:
    """The arm a name of ``--variants`` means (``default_format``: ``--action-format``'s, for a
    variant named without one); UsageError for a name that means none."""
    name = name.strip()
    if name == PREBUILT:
        return Arm(PREBUILT, PREBUILT, "tool_calls")
    name, plus, grammar = name.partition("+")
    if plus and grammar != GRAMMAR:
        raise UsageError(f"unknown grammar +{grammar} in --variants; only +{GRAMMAR} is one")
    variant, _, chosen = name.partition(":")
    form = chosen or default_format or TEXT
    if variant not in REGISTRY or form not in FORMATS:
        raise UsageError(
            f"unknown variant(s) {name} in --variants; choose from: {', '.join(VARIANTS)}, "
            f"each optionally as VARIANT:{'|'.join(FORMATS)}, and {PREBUILT} (LangGraph's "
            "prebuilt agent)"
        )
    label = variant if form == TEXT else f"{variant}:{form}"
    if plus:
        return Arm(f"{label}+{GRAMMAR}", variant, form, GRAMMAR)
    return Arm(label, variant, form)


def with_grammar(arms: Sequence[Arm], decoding: str) -> list[Arm]:
    """The arms with their grammar in their names (an eval that compares with and without it
    keeps them apart): ``decoding`` (the run's setting) for those that do not name one; the
    prebuilt agent has none."""
    named = []
    for a in arms:
        chosen = a.grammar or decoding
        if a.prebuilt or a.grammar is not None:
            named.append(a)
        elif chosen == GRAMMAR:
            named.append(Arm(f"{a.label}+{GRAMMAR}", a.variant, a.action_format, GRAMMAR))
        else:
            named.append(Arm(a.label, a.variant, a.action_format, "off"))
    return list({a.label: a for a in named}.values())


def arms_of(text: str, default_format: str | None = None) -> list[Arm]:
    """``a,b,c`` as arms, in that order, each once (``transcript`` and ``transcript:text`` are
    one arm)."""
    names = [name for name in text.split(",") if name.strip()]
    if not names:
        raise UsageError(f"no variant in --variants; choose from: {', '.join(VARIANTS)}")
    found = {a.label: a for a in (arm(name, default_format) for name in names)}
    return list(found.values())


def variants_of(arms: Sequence[Arm]) -> list[str]:
    """The reactgraph variants the arms run (those a setting flag must apply to); the
    transcript variant's when only the prebuilt agent runs (its turn cap is ``max_turns``)."""
    found = list(dict.fromkeys(a.variant for a in arms if not a.prebuilt))
    return found or ["transcript"]
