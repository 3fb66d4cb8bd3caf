"""The model ladder's rungs (``escalate_to``): the models above the run's own, each with its name
and the call settings it changes (``Rung``), made and checked once, when the graph is built
(``rungs_of``); and the rungs a run's context may name (``chosen``, ``check_run``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from reactgraph.nodes.calling.providers import model_name, model_url

RUNG_SETTINGS = (
    "constrained_decoding",
    "max_completion_tokens",
    "token_prices",
    "model_retries",
    "retry_backoff_s",
)
"""The settings a rung may have of its own: how its calls are made and priced (a grammar, the
reply cap, its prices, its retries), never what the run is (its format, tools or schema)."""
MAX_RUNGS = 16
"""The most rungs a ladder may have."""
ALL = "all"
"""A run's ``escalate_to`` naming every rung the graph was built with."""
_ADDRESS = re.compile(r"(?P<name>.+?)@(?P<url>https?://\S+)")


class Rung:
    """One model of a ladder: the chat model, its name (in the turns, the usage, the traces and
    a run's context; default: the model's name, with its own settings), and the call settings
    it has of its own (``RUNG_SETTINGS``): ``Rung(model, constrained_decoding="gbnf")`` is the
    same model asked with a grammar, ``Rung(model, token_prices=(2.5, 10))`` a model priced
    apart from the run's."""

    def __init__(self, model: BaseChatModel, *, name: str | None = None, **settings: Any) -> None:
        if not isinstance(model, BaseChatModel):
            raise TypeError(
                f"a rung's model must be a langchain-core BaseChatModel, got {type(model).__name__}"
            )
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError("a rung's name must be a non-empty string")
        other = [key for key in settings if key not in RUNG_SETTINGS]
        if other:
            raise ValueError(
                f"a rung cannot have {', '.join(map(repr, other))} of its own; it may have: "
                f"{', '.join(RUNG_SETTINGS)}"
            )
        self.model, self.name, self.settings = model, name, dict(settings)

    def __repr__(self) -> str:
        return f"Rung({self.name or model_name(self.model) or type(self.model).__name__!r})"


def model_label(model: BaseChatModel) -> str:
    """A model's name in a ladder: its client's model name, else its class's."""
    return model_name(model) or type(model).__name__


def parse_address(text: str) -> tuple[str, str | None]:
    """``MODEL[@BASE_URL]``: the model's name and its server (None: the run's model's)."""
    found = _ADDRESS.fullmatch(text.strip())
    if found is None:
        return text.strip(), None
    return found["name"], found["url"]


def rungs_of(
    entries: Any,
    base: BaseChatModel,
    factory: Callable[[str, str | None], BaseChatModel],
) -> tuple[tuple[Rung, ...], tuple[str, ...]]:
    """The ladder ``build_graph``'s ``escalate_to`` gives (chat models, ``Rung``s, or
    ``MODEL[@BASE_URL]`` texts made by ``factory`` on the base model's server when they name
    none), and the names of its rungs, each unique (the base model's name is the first): a
    rung's own name, else its model's, followed by its own settings when a rung below has that
    name (the same model asked otherwise), else by its number (``scripted #2``)."""
    if entries is None:
        return (), ()
    if isinstance(entries, str | BaseChatModel | Rung):
        entries = [entries]  # one rung
    if isinstance(entries, bytes) or not isinstance(entries, Sequence):
        raise TypeError("escalate_to must be a list of chat models (or MODEL[@BASE_URL] names)")
    if len(entries) > MAX_RUNGS:
        raise ValueError(f"escalate_to takes at most {MAX_RUNGS} models")
    rungs = [_rung(entry, base, factory) for entry in entries]
    names = [model_label(base)]
    for number, rung in enumerate(rungs, 1):
        names.append(_label(rung, number, names))
    return tuple(rungs), tuple(names)


def _rung(
    entry: Any, base: BaseChatModel, factory: Callable[[str, str | None], BaseChatModel]
) -> Rung:
    """One entry of ``escalate_to`` as a rung: a ``Rung`` as it is, a chat model with no
    settings of its own, a ``MODEL[@BASE_URL]`` text made by ``factory``; else TypeError."""
    if isinstance(entry, Rung):
        return entry
    if isinstance(entry, BaseChatModel):
        return Rung(entry)
    if isinstance(entry, str) and entry.strip():
        name, url = parse_address(entry)
        return Rung(factory(name, url or model_url(base)), name=entry.strip())
    raise TypeError(f"escalate_to holds chat models or MODEL[@BASE_URL] names, not {entry!r}"[:200])


def _label(rung: Rung, number: int, names: Sequence[str]) -> str:
    """Rung ``number``'s unique name, given the names of those below it (see ``rungs_of``)."""
    label = rung.name or model_label(rung.model)
    if label in names and rung.name is not None:
        raise ValueError(f"two rungs of the ladder are named {label!r}")
    if label in names and rung.settings:  # the same model asked otherwise
        label += f" ({_shown(rung.settings)})"
    if label in names:
        label = f"{label} #{number}"
    if label.lower() in (ALL, "none"):
        raise ValueError(f"a rung cannot be named {label!r}: give it another name")
    return label


def _shown(settings: Mapping[str, Any]) -> str:
    """A rung's own settings in its name (no comma: a list of names is split at commas)."""
    return " ".join(
        f"{k}={'/'.join(map(str, v)) if isinstance(v, list | tuple) else v}"
        for k, v in settings.items()
    )


def chosen(built: Sequence[str], asked: Sequence[str]) -> tuple[int, ...]:
    """The rungs a run climbs, as positions in the built ladder (``built``: the rungs' names,
    the base model's excluded): those ``asked`` names (its ``escalate_to``), in the built
    order; ``all``: every one."""
    if ALL in asked:
        return tuple(range(len(built)))
    wanted = set(asked)
    return tuple(i for i, name in enumerate(built) if name in wanted)


def check_run(built: Sequence[str], asked: Sequence[str]) -> None:
    """ValueError for a run's ``escalate_to`` that names a rung the graph was not built with: a
    run's context may name a shorter ladder, never a longer one."""
    unknown = [name for name in asked if name != ALL and name not in built]
    if unknown:
        shown = ", ".join(map(repr, built)) or "none (built without escalate_to)"
        raise ValueError(
            f"escalate_to names {', '.join(map(repr, unknown))}, which the graph's ladder does "
            f"not have: a run may name fewer of its rungs, never others; its rungs are: {shown}"
        )
