"""A deployment's policy over a run's settings, and the graph's run context: the approval floor
a run's context cannot lower (``at_least``), the budget ceiling it cannot raise (``at_most``,
``check_ceiling``), and ``context_schema``, the graph's context schema (Studio's form) made from
the settings' views, its defaults the built values, its checks ``settings.check_all``'s.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.settings import ALL, Setting, check_all


def at_least(floor: Sequence[str], chosen: Sequence[str]) -> tuple[str, ...]:
    """A list of names that holds every name of ``floor``: ``chosen`` extended by it
    (``("all",)`` when either says all)."""
    if ALL in floor or ALL in chosen:
        return (ALL,)
    return tuple(dict.fromkeys((*floor, *chosen)))


BUDGETS = ("max_run_tokens", "max_run_cost", "max_run_seconds", "tool_call_limits")
"""The budgets a deployment may cap (``budget_ceiling``): a run's context can only lower them."""


def at_most(ceiling: Any, chosen: Any) -> Any:
    """A budget no larger than ``ceiling``: the smaller of the two, None (no budget) being the
    largest; for a number per tool (``tool_call_limits``), each tool's smaller limit, with every
    tool of the ceiling kept."""
    if isinstance(ceiling, Mapping):
        limits = dict(chosen or {})
        for tool, limit in ceiling.items():
            limits[tool] = min(limit, limits.get(tool, limit))
        return limits
    if ceiling is None or (chosen is not None and chosen <= ceiling):
        return chosen
    return ceiling


def check_ceiling(
    variant: str, settings: Iterable[Setting], ceiling: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A deployment's budget ceiling (``build_graph``'s ``budget_ceiling``), each value checked
    as its setting's; a name that is not a budget is a ValueError, a None is no ceiling."""
    if ceiling is None:
        return {}
    if not isinstance(ceiling, Mapping):
        raise TypeError(
            f"budget_ceiling must be a mapping of budgets to limits, got {type(ceiling).__name__}"
        )
    unknown = [name for name in ceiling if name not in BUDGETS]
    if unknown:
        raise ValueError(
            f"budget_ceiling takes {', '.join(BUDGETS)}; not {', '.join(map(repr, unknown))}"
        )
    given = {name: value for name, value in ceiling.items() if value is not None}
    checked = check_all(variant, settings, given, where="build")
    return {name: checked[name] for name in given}


def _with_floor(description: str, floor: tuple[str, ...] | None) -> str:
    if not floor:
        return description
    return f"{description} Always at least: {', '.join(floor)} (this server's policy)."


def _shown(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, tuple | list):
        return ",".join(f"{v:g}" for v in value)
    return f"{value:g}" if isinstance(value, float) else f"{value}"


def _with_ceiling(description: str, ceiling: Any, fixed: Any) -> str:
    if ceiling is not None:
        description += f" At most: {_shown(ceiling)} (this server's budget; a run can lower it)."
    if fixed is not None:
        description += f" Fixed by this server: {_shown(fixed)} (its cost budget's prices)."
    return description


class RunContext(dict[str, Any]):
    """Per-run overrides for any variant: ``graph.invoke(q, config, context=RunContext(...))``.

    Unset (None) fields keep the values the graph was built with. It is a plain mapping, so the
    graph checks it exactly like a context given as a dict: a field the variant does not have,
    or an out-of-range value, raises ValueError before anything is stored.
    """

    def __init__(self, **fields: Any) -> None:
        super().__init__({k: v for k, v in fields.items() if v is not None})


def context_schema(
    variant: str,
    settings: Iterable[Setting],
    built: RunSettings,
    also: Callable[[RunSettings], None] | None = None,
    floors: Mapping[str, tuple[str, ...]] | None = None,
    ceilings: Mapping[str, Any] | None = None,
    fixed: Mapping[str, Any] | None = None,
) -> type:
    """The graph's context schema: one field per run setting (the field's type and description,
    and no more), defaulting to the built value.

    Its constructor is the run-time check: LangGraph builds it from a dict context (Python or
    Studio), so an unknown field or a bad value fails the run before it starts. ``also`` then
    sees the run's effective values (the built ones under those given) and raises ValueError
    for what one setting alone cannot tell: ``approve`` naming a tool the graph lacks,
    ``action_format="tool_calls"`` with a model that cannot bind tools.

    ``floors`` holds, for a list-of-names setting, the names a run keeps whatever its context
    says (a server's policy: ``approve_floor``): a context extends them, never removes one.
    ``ceilings`` holds, for a budget, the most a run may have (a server's budget:
    ``budget_ceiling``): a context lowers it, never raises or removes it (``at_most``).
    ``fixed`` holds the settings a context cannot change at all (``token_prices``, under a cost
    ceiling). The field's default and description show the effective value.
    """
    floors = {name: floor for name, floor in (floors or {}).items() if floor}
    ceilings = dict(ceilings or {})
    fixed = dict(fixed or {})
    run_settings = [s for s in settings if s.knob.per_run]

    def field(setting: Setting) -> Any:
        value = getattr(built, setting.name)
        description = _with_floor(setting.knob.description, floors.get(setting.name))
        description = _with_ceiling(
            description, ceilings.get(setting.name), fixed.get(setting.name)
        )
        about = {"description": description}
        if isinstance(value, dict):  # a JSON schema: a dataclass takes no mutable default
            return dataclasses.field(default_factory=lambda: copy.deepcopy(value), metadata=about)
        return dataclasses.field(default=value, metadata=about)

    fields = [(s.name, s.hint, field(s)) for s in run_settings]

    def __init__(self: Any, **given: Any) -> None:
        # None means "not set" (a cleared field in Studio's form): keep the built value.
        chosen = {name: value for name, value in given.items() if value is not None}
        checked = check_all(variant, run_settings, chosen, where="run", over=vars(built))
        for setting in run_settings:
            value = (
                checked[setting.name] if setting.name in chosen else getattr(built, setting.name)
            )
            if setting.name in floors:
                value = at_least(floors[setting.name], value)
            if setting.name in ceilings:
                value = at_most(ceilings[setting.name], value)
            if setting.name in fixed:
                value = fixed[setting.name]
            object.__setattr__(self, setting.name, value)
        if also is not None:
            also(built.over(vars(self)))

    title = "".join(part.title() for part in variant.split("_")) + "Context"
    schema = dataclasses.make_dataclass(
        title, fields, namespace={"__init__": __init__}, init=False, frozen=True
    )
    schema.__doc__ = f"Run settings of the {variant} variant; unset fields keep the built values."
    return schema
