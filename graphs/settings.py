"""Settings: each declared once, checked by one function at build time and per run alike.

Every setting is a field of a run-settings class (``reactgraph.nodes.loop.run_settings``), and only
that: ``settings_of`` gives a read-only view of each field of a variant's class (``Setting``:
the field, its resolved type and the variant's default), which the command line's flags, the
docs' table and the result identities read. ``check_all`` checks ``build_graph``'s keyword
arguments, the command line's flags and a run's context alike; ``context_schema`` makes the
graph's context schema (Studio's form) from the same views, its defaults the built values.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, Literal

from reactgraph.nodes.loop.run_settings import Knob, RunSettings, default_of, knob_of

MAX_NAMES = 256
"""The most names a list setting holds (a run's context comes from whoever starts the run)."""
MAX_NAME_CHARS = 200
ALL, NONE = "all", "none"
"""The two words a list of names may be instead: every one, or none."""


@dataclass(frozen=True)
class Setting:
    """One setting as a variant takes it: a read-only view of one field of its settings class.

    Nothing is declared here: the name, type and ``Knob`` (description, bounds, where it may be
    set) are the field's, and the default is the variant's spec's own (``max_turns=40``) or else
    the field's. ``settings_of`` makes them; the checks, the command line's flags, Studio's form
    and the docs' table read them.
    """

    field: dataclasses.Field[Any]
    hint: Any
    """The field's type, resolved (``int | None``, ``Literal["off", "gbnf"]``): the context
    schema's field's type (Studio's form lists a ``Literal``'s choices)."""
    default: Any
    """The variant's default: its spec's ``defaults`` entry, else the field's."""

    @property
    def name(self) -> str:
        """The field's name: the ``build_graph`` keyword, the context's key."""
        return self.field.name

    @property
    def knob(self) -> Knob:
        """Its description, bounds and where it may be set: the field's."""
        return knob_of(self.field)

    @property
    def optional(self) -> bool:
        """Whether None is a valid value (meaning "not set": the built value or a lookup)."""
        return _optional(self.hint)[1]

    @property
    def kind(self) -> type:
        """``int``, ``float``, ``str`` (a ``Literal``'s too), ``tuple`` for a list of names (or,
        with ``items``, a fixed tuple of numbers), or ``dict`` for a number per name (or, with
        ``values`` ``Any``, a JSON object); a float setting also takes an int, a list of names
        also a string (``"a"``, ``"a, b"``, ``"all"``, ``"none"``), a pair also ``"2.5,10"``, a
        mapping also ``"search=5"`` or a list of such."""
        bare = _optional(self.hint)[0]
        origin = typing.get_origin(bare)
        return str if origin is Literal else origin or bare

    @property
    def choices(self) -> tuple[str, ...]:
        """For a ``Literal``: the only values it takes (``action_format``: text, tool_calls)."""
        own = _optional(self.hint)[0]
        return typing.get_args(own) if typing.get_origin(own) is Literal else ()

    @property
    def items(self) -> tuple[type, ...]:
        """For a fixed tuple (``token_prices``: ``(float, float)``): its items' types; empty for
        a list of names."""
        args = typing.get_args(_optional(self.hint)[0]) if self.kind is tuple else ()
        return args if Ellipsis not in args else ()

    @property
    def values(self) -> Any:
        """For a ``dict`` (``tool_call_limits``): its values' type (``Any``: a JSON object,
        ``answer_schema``)."""
        return typing.get_args(_optional(self.hint)[0])[1] if self.kind is dict else None

    def _as(self, hint: Any) -> Setting:
        """This setting's view with another type: an item of a pair or of a mapping, checked
        with the setting's own bounds and named by its name."""
        return dataclasses.replace(self, hint=hint)

    def shown(self) -> str:
        """Its default in words: ``--help`` and the README's table show it."""
        if self.default is None:
            return self.knob.unset
        if isinstance(self.default, dict):
            return ", ".join(f"{k}={v}" for k, v in self.default.items()) or NONE
        if isinstance(self.default, tuple) and self.items:
            return ",".join(f"{v:g}" for v in self.default)
        if isinstance(self.default, tuple):
            return ", ".join(self.default) or NONE
        return f"{self.default}"

    def check(self, value: Any) -> Any:
        """The value, normalised; TypeError for a wrong type, ValueError for a wrong value."""
        knob = self.knob
        if value is None:
            if self.optional:
                return None
            raise TypeError(f"{self.name} must be set, got None")
        if self.kind is float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{self.name} must be a number, got {type(value).__name__}")
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"{self.name} must be a finite number, got {value}")
        elif self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{self.name} must be an int, got {type(value).__name__}")
        elif self.kind is str:
            if isinstance(value, PathLike):
                value = str(value)
            if not isinstance(value, str):
                raise TypeError(f"{self.name} must be a string, got {type(value).__name__}")
            if not value.strip():
                raise ValueError(f"{self.name} must not be empty")
            if self.choices and value not in self.choices:
                raise ValueError(
                    f"{self.name} must be one of {', '.join(self.choices)}, got {value!r}"
                )
            if knob.maximum is not None and len(value) > knob.maximum:
                raise ValueError(
                    f"{self.name} must be at most {knob.maximum:g} characters, got {len(value)}"
                )
            return knob.checker(value) if knob.checker is not None else value
        elif self.kind is dict and self.values is Any:  # a JSON object (answer_schema)
            if not isinstance(value, Mapping):
                raise TypeError(f"{self.name} must be a JSON object, got {type(value).__name__}")
            return knob.checker(value) if knob.checker is not None else dict(value)
        elif self.kind is tuple and self.items:
            return tuple(self._as(t).check(v) for t, v in self._pair(value))
        elif self.kind is tuple:
            return names(self.name, value)
        elif self.kind is dict:
            return self._mapping(value)
        if knob.minimum is not None and value < knob.minimum:
            raise ValueError(f"{self.name} must be >= {knob.minimum:g}, got {value}")
        if knob.above is not None and not value > knob.above:
            raise ValueError(f"{self.name} must be > {knob.above:g}, got {value}")
        if knob.maximum is not None and value > knob.maximum:
            raise ValueError(f"{self.name} must be <= {knob.maximum:g}, got {value}")
        return value

    def _pair(self, value: Any) -> list[tuple[type, Any]]:
        """A fixed tuple's items with their types: given as a list or tuple, or as one string
        of them separated by commas (``"2.5,10"``)."""
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(value, str):
            try:
                items = [float(item) for item in items]
            except ValueError:
                raise ValueError(
                    f"{self.name} must be {len(self.items)} numbers separated by a comma, "
                    f"got {value[:60]!r}"
                ) from None
        if not isinstance(items, list | tuple):
            raise TypeError(
                f"{self.name} must be a list of {len(self.items)} numbers, got "
                f"{type(value).__name__}"
            )
        if len(items) != len(self.items):
            raise ValueError(f"{self.name} must be {len(self.items)} numbers, got {len(items)}")
        return list(zip(self.items, items, strict=True))

    def _mapping(self, value: Any) -> dict[str, Any]:
        """A number per name: given as a mapping, or as ``"name=N"`` texts (one string, a list
        of them, or one string of them separated by commas); each name once, the last wins."""
        if isinstance(value, str | list | tuple):
            texts = [value] if isinstance(value, str) else list(value)
            if len(texts) > MAX_NAMES or not all(isinstance(t, str) for t in texts):
                raise TypeError(
                    f"{self.name} must be a mapping of names to numbers, or NAME=N texts"
                )
            pairs: dict[str, Any] = {}
            for part in (p.strip() for text in texts for p in text.split(",")[: MAX_NAMES + 1]):
                if not part:
                    continue
                key, equals, number = part.partition("=")
                try:
                    pairs[key.strip()] = self.values(number.strip())
                except ValueError:
                    raise ValueError(
                        f"{self.name} takes NAME=N, got {part[:MAX_NAME_CHARS]!r}"
                    ) from None
                if not equals:
                    raise ValueError(f"{self.name} takes NAME=N, got {part[:MAX_NAME_CHARS]!r}")
            value = pairs
        if not isinstance(value, Mapping):
            raise TypeError(
                f"{self.name} must be a mapping of names to numbers, got {type(value).__name__}"
            )
        if len(value) > MAX_NAMES:
            raise ValueError(f"{self.name} takes at most {MAX_NAMES} names")
        checked: dict[str, Any] = {}
        number = self._as(self.values)
        for key, item in value.items():
            if not isinstance(key, str) or not key.strip() or len(key) > MAX_NAME_CHARS:
                raise ValueError(
                    f"{self.name}: each name must be a non-empty string of at most "
                    f"{MAX_NAME_CHARS} characters"
                )
            try:
                checked[key.strip()] = number.check(item)
            except (TypeError, ValueError) as error:
                named = f"{self.name}[{key.strip()!r}]{str(error)[len(self.name) :]}"
                raise type(error)(named) from None
        return checked


def names(name: str, value: Any) -> tuple[str, ...]:
    """A list of names, normalised: each name once, in order; ``("all",)`` for all, ``()`` for
    none. Given as a list of strings or one string, either of which may separate names by
    commas."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise TypeError(
            f"{name} must be a name, names separated by commas, {ALL!r}, {NONE!r}, or a list of "
            f"names; got {type(value).__name__}"
        )
    too_many = ValueError(
        f"{name} takes at most {MAX_NAMES} names of at most {MAX_NAME_CHARS} characters"
    )
    if len(items) > MAX_NAMES or sum(map(len, items)) > MAX_NAMES * (MAX_NAME_CHARS + 1):
        raise too_many  # bounded before it is read: a run's context is anyone's
    found = dict.fromkeys(part.strip() for item in items for part in item.split(","))
    found.pop("", None)
    if len(found) > MAX_NAMES or any(len(part) > MAX_NAME_CHARS for part in found):
        raise too_many
    if NONE in found:
        if len(found) > 1:
            raise ValueError(f"{name}: {NONE!r} cannot be combined with names")
        return ()
    return (ALL,) if ALL in found else tuple(found)


def _optional(hint: Any) -> tuple[Any, bool]:
    """A field's type without its None (``int | None``: ``int``), and whether it had one."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kinds = [k for k in typing.get_args(hint) if k is not type(None)]
        return kinds[0], len(kinds) < len(typing.get_args(hint))
    return hint, False


def settings_of(kind: type[RunSettings], **defaults: Any) -> tuple[Setting, ...]:
    """A view of every field of ``kind``, in the class's order, with ``defaults`` (a variant's
    own: ``max_turns=40``) over the declared ones."""
    hints = typing.get_type_hints(kind)
    unknown = set(defaults) - {f.name for f in dataclasses.fields(kind)}
    if unknown:
        raise ValueError(f"{kind.__name__} has no setting {', '.join(sorted(unknown))}")
    return tuple(
        Setting(item, hints[item.name], defaults.get(item.name, default_of(item)))
        for item in dataclasses.fields(kind)
    )


def at_least(floor: Sequence[str], chosen: Sequence[str]) -> tuple[str, ...]:
    """A list of names that holds every name of ``floor``: ``chosen`` extended by it
    (``("all",)`` when either says all)."""
    if ALL in floor or ALL in chosen:
        return (ALL,)
    return tuple(dict.fromkeys((*floor, *chosen)))


def check_all(
    variant: str, settings: Iterable[Setting], given: Mapping[str, Any], *, where: str
) -> dict[str, Any]:
    """Every setting's value: ``given`` checked over the defaults. A name the variant does not
    have (for ``where``: "build" or "run") is a ValueError naming the variant's own settings."""
    allowed = {
        s.name: s for s in settings if (s.knob.build if where == "build" else s.knob.per_run)
    }
    unknown = [name for name in given if name not in allowed]
    if unknown:
        raise ValueError(
            f"{', '.join(sorted(unknown))} do(es) not apply to the {variant!r} variant"
            f"{' at run time' if where == 'run' else ''}; its settings are: "
            f"{', '.join(allowed)}"
        )
    values = {name: setting.default for name, setting in allowed.items()}
    for name, value in given.items():
        values[name] = allowed[name].check(value)
    return values


def _with_floor(description: str, floor: tuple[str, ...] | None) -> str:
    if not floor:
        return description
    return f"{description} Always at least: {', '.join(floor)} (this server's policy)."


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
) -> type:
    """The graph's context schema: one field per run setting (the field's type and description,
    and no more), defaulting to the built value.

    Its constructor is the run-time check: LangGraph builds it from a dict context (Python or
    Studio), so an unknown field or a bad value fails the run before it starts. ``also`` then
    sees the run's effective values (the built ones under those given) and raises ValueError
    for what one setting alone cannot tell: ``approve`` naming a tool the graph lacks,
    ``action_format="tool_calls"`` with a model that cannot bind tools.

    ``floors`` holds, for a list-of-names setting, the names a run keeps whatever its context
    says (a server's policy: ``approve_floor``): a context extends them, never removes one. The
    field's default and description show the effective value.
    """
    floors = {name: floor for name, floor in (floors or {}).items() if floor}
    run_settings = [s for s in settings if s.knob.per_run]

    def field(setting: Setting) -> Any:
        value = getattr(built, setting.name)
        about = {"description": _with_floor(setting.knob.description, floors.get(setting.name))}
        if isinstance(value, dict):  # a JSON schema: a dataclass takes no mutable default
            return dataclasses.field(default_factory=lambda: copy.deepcopy(value), metadata=about)
        return dataclasses.field(default=value, metadata=about)

    fields = [(s.name, s.hint, field(s)) for s in run_settings]

    def __init__(self: Any, **given: Any) -> None:
        # None means "not set" (a cleared field in Studio's form): keep the built value.
        chosen = {name: value for name, value in given.items() if value is not None}
        checked = check_all(variant, run_settings, chosen, where="run")
        for setting in run_settings:
            value = (
                checked[setting.name] if setting.name in chosen else getattr(built, setting.name)
            )
            if setting.name in floors:
                value = at_least(floors[setting.name], value)
            object.__setattr__(self, setting.name, value)
        if also is not None:
            also(built.over(vars(self)))

    title = "".join(part.title() for part in variant.split("_")) + "Context"
    schema = dataclasses.make_dataclass(
        title, fields, namespace={"__init__": __init__}, init=False, frozen=True
    )
    schema.__doc__ = f"Run settings of the {variant} variant; unset fields keep the built values."
    return schema
