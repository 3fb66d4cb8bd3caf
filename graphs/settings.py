"""Settings: each declared once, checked by one function at build time and per run alike.

Every setting is a field of a run-settings class (``reactgraph.nodes.vocabulary.run_settings``),
and only that: ``settings_of`` gives a read-only view of each field of a variant's class
(``Setting``: the field, its resolved type and the variant's default), which the command line's
flags, the docs' table and the result identities read. ``check_all`` checks ``build_graph``'s
keyword arguments, the command line's flags and a run's context alike; ``context_schema`` makes the
graph's context schema (Studio's form) from the same views, its defaults the built values.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from typing import Any, Literal

from reactgraph.nodes.vocabulary.run_settings import Knob, RunSettings, default_of, knob_of
from reactgraph.nodes.vocabulary.storable import unstorable_value


def checked(knob: Knob, value: Any) -> Any:
    """``value`` through the knob's own check (its ``checker``, by dotted name), if it has one."""
    if knob.checker is None:
        return value
    module, _, name = knob.checker.rpartition(".")
    return getattr(importlib.import_module(module), name)(value)


MAX_NAMES = 256
"""The most names a list setting holds (a run's context comes from whoever starts the run)."""
MAX_NAME_CHARS = 200
BOOL_WORDS = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}
"""The words a yes-or-no setting takes as text (a flag: ``--parallel-tool-calls on``)."""
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
        """For a fixed tuple (``token_prices``: ``(float, float)`` or ``(float, float,
        float)``): its items' types, the longest form's; empty for a list of names."""
        args = typing.get_args(_optional(self.hint)[0]) if self.kind is tuple else ()
        return args if Ellipsis not in args else ()

    @property
    def fewest(self) -> int:
        """For a fixed tuple: the fewest items it takes (its shortest form's: ``token_prices``
        takes two or three numbers)."""
        bare = [k for k in _kinds(self.hint) if typing.get_origin(k) is tuple]
        return min((len(typing.get_args(k)) for k in bare), default=len(self.items))

    @property
    def values(self) -> Any:
        """For a ``dict`` (``tool_call_limits``): its values' type (``Any``: JSON, a schema)."""
        return typing.get_args(_optional(self.hint)[0])[1] if self.kind is dict else None

    def _as(self, hint: Any) -> Setting:
        """This setting's view with another type: an item of a pair or of a mapping, checked
        with the setting's own bounds and named by its name."""
        return dataclasses.replace(self, hint=hint)

    def shown(self) -> str:
        """Its default in words: ``--help`` and the README's table show it."""
        if self.default is None:
            return self.knob.unset
        if isinstance(self.default, bool):  # as its flag takes it: --parallel-tool-calls on
            return "on" if self.default else "off"
        if isinstance(self.default, dict):
            return ", ".join(f"{k}={v}" for k, v in self.default.items()) or NONE
        if isinstance(self.default, tuple) and self.items:
            return ",".join(f"{v:g}" for v in self.default)
        if isinstance(self.default, tuple):
            return ", ".join(self.default) or NONE
        return f"{self.default}"

    def check(self, value: Any) -> Any:
        """The value, normalised; TypeError for a wrong type, ValueError for a wrong value, and
        for one no checkpointer could store (an integer outside 64 bits, a text holding NUL or
        a lone surrogate: ``storable.unstorable_value``), before anything is stored."""
        checked = self._check(value)
        problem = unstorable_value(checked)
        if problem is not None:
            raise ValueError(f"{self.name} cannot be stored: it holds {problem}")
        return checked

    def _check(self, value: Any) -> Any:
        if value is None:
            if self.optional:
                return None
            raise TypeError(f"{self.name} must be set, got None")
        if self.kind is bool:
            return self._bool(value)
        if self.kind is float:
            return self._bounded(self._float(value))
        if self.kind is int:
            return self._bounded(self._int(value))
        if self.kind is str:
            return self._text(value)
        if self.kind is dict:
            return self._object(value) if self.values is Any else self._mapping(value)
        if self.kind is tuple:
            return self._tuple(value) if self.items else names(self.name, value)
        return self._bounded(value)

    def _bool(self, value: Any) -> bool:
        """True or False, or one of the words for them (a flag's text, a form's)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in BOOL_WORDS:
            return BOOL_WORDS[value.strip().lower()]
        raise TypeError(f"{self.name} must be true or false, got {type(value).__name__}")

    def _float(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{self.name} must be a number, got {type(value).__name__}")
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"{self.name} must be a finite number, got {value}")
        return value

    def _int(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{self.name} must be an int, got {type(value).__name__}")
        return value

    def _bounded(self, value: Any) -> Any:
        """A number within the knob's bounds."""
        knob = self.knob
        if knob.minimum is not None and value < knob.minimum:
            raise ValueError(f"{self.name} must be >= {knob.minimum:g}, got {value}")
        if knob.above is not None and not value > knob.above:
            raise ValueError(f"{self.name} must be > {knob.above:g}, got {value}")
        if knob.maximum is not None and value > knob.maximum:
            raise ValueError(f"{self.name} must be <= {knob.maximum:g}, got {value}")
        return value

    def _text(self, value: Any) -> Any:
        if isinstance(value, PathLike):
            value = str(value)
        if not isinstance(value, str):
            raise TypeError(f"{self.name} must be a string, got {type(value).__name__}")
        if not value.strip():
            raise ValueError(f"{self.name} must not be empty")
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.name} must be one of {', '.join(self.choices)}, got {value!r}")
        maximum = self.knob.maximum
        if maximum is not None and len(value) > maximum:
            raise ValueError(
                f"{self.name} must be at most {maximum:g} characters, got {len(value)}"
            )
        return checked(self.knob, value)

    def _object(self, value: Any) -> Any:
        """A JSON object (``answer_schema``), through the knob's own check."""
        if not isinstance(value, Mapping):
            raise TypeError(f"{self.name} must be a JSON object, got {type(value).__name__}")
        return checked(self.knob, value) if self.knob.checker is not None else dict(value)

    def _tuple(self, value: Any) -> tuple[Any, ...]:
        return tuple(self._as(t).check(v) for t, v in self._pair(value))

    def _pair(self, value: Any) -> list[tuple[type, Any]]:
        """A fixed tuple's items with their types: given as a list or tuple, or as one string
        of them separated by commas (``"2.5,10"``)."""
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(value, str):
            try:
                items = [float(item) for item in items]
            except ValueError:
                raise ValueError(
                    f"{self.name} must be {self._count()} separated by a comma, got {value[:60]!r}"
                ) from None
        if not isinstance(items, list | tuple):
            raise TypeError(
                f"{self.name} must be a list of {self._count()}, got {type(value).__name__}"
            )
        if not self.fewest <= len(items) <= len(self.items):
            raise ValueError(f"{self.name} must be {self._count()}, got {len(items)}")
        return list(zip(self.items, items, strict=False))

    def _count(self) -> str:
        """How many numbers a fixed tuple takes, in words: ``2 numbers (or 3)``."""
        most = len(self.items)
        return f"{self.fewest} numbers" + (f" (or {most})" if most > self.fewest else "")

    def _mapping(self, value: Any) -> dict[str, Any]:
        """A number per name: given as a mapping, or as ``"name=N"`` texts (one string, a list
        of them, or one string of them separated by commas); each name once, the last wins."""
        if isinstance(value, str | list | tuple):
            value = self._named_texts(value)
        if not isinstance(value, Mapping):
            raise TypeError(
                f"{self.name} must be a mapping of names to numbers, got {type(value).__name__}"
            )
        if len(value) > MAX_NAMES:
            raise ValueError(f"{self.name} takes at most {MAX_NAMES} names")
        number = self._as(self.values)
        return dict(self._entry(number, key, item) for key, item in value.items())

    def _named_texts(self, value: str | list[Any] | tuple[Any, ...]) -> dict[str, Any]:
        """``"name=N"`` texts (one string, a list of them, or one string of them separated by
        commas) as a mapping of names to numbers, not yet checked; the last of a name wins."""
        texts = [value] if isinstance(value, str) else list(value)
        if len(texts) > MAX_NAMES or not all(isinstance(t, str) for t in texts):
            raise TypeError(f"{self.name} must be a mapping of names to numbers, or NAME=N texts")
        parts = (p.strip() for text in texts for p in text.split(",")[: MAX_NAMES + 1])
        return dict(self._named_text(part) for part in parts if part)

    def _named_text(self, part: str) -> tuple[str, Any]:
        """One ``"name=N"`` text: its name and its number (of ``values``' type, not yet
        checked), or ValueError."""
        key, equals, number = part.partition("=")
        try:
            parsed = self.values(number.strip())
        except ValueError:
            raise ValueError(f"{self.name} takes NAME=N, got {part[:MAX_NAME_CHARS]!r}") from None
        if not equals:
            raise ValueError(f"{self.name} takes NAME=N, got {part[:MAX_NAME_CHARS]!r}")
        return key.strip(), parsed

    def _entry(self, number: Setting, key: Any, item: Any) -> tuple[str, Any]:
        """One name of a mapping setting (a non-empty string of at most ``MAX_NAME_CHARS``
        characters, stripped) and its number, checked; the error names the setting and key."""
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_NAME_CHARS:
            raise ValueError(
                f"{self.name}: each name must be a non-empty string of at most "
                f"{MAX_NAME_CHARS} characters"
            )
        try:
            return key.strip(), number.check(item)
        except (TypeError, ValueError) as error:
            named = f"{self.name}[{key.strip()!r}]{str(error)[len(self.name) :]}"
            raise type(error)(named) from None


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
    found = _split_names(name, items)
    if NONE in found:
        if len(found) > 1:
            raise ValueError(f"{name}: {NONE!r} cannot be combined with names")
        return ()
    return (ALL,) if ALL in found else tuple(found)


def _split_names(name: str, items: list[str] | tuple[str, ...]) -> dict[str, None]:
    """The names in ``items`` (split at commas, stripped), each once, in order; ValueError
    past ``MAX_NAMES`` names or ``MAX_NAME_CHARS`` characters a name."""
    too_many = ValueError(
        f"{name} takes at most {MAX_NAMES} names of at most {MAX_NAME_CHARS} characters"
    )
    if len(items) > MAX_NAMES or sum(map(len, items)) > MAX_NAMES * (MAX_NAME_CHARS + 1):
        raise too_many  # bounded before it is read: a run's context is anyone's
    found = dict.fromkeys(part.strip() for item in items for part in item.split(","))
    found.pop("", None)
    if len(found) > MAX_NAMES or any(len(part) > MAX_NAME_CHARS for part in found):
        raise too_many
    return found


def _kinds(hint: Any) -> list[Any]:
    """A field's types but None (``int | None``: ``[int]``)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return [k for k in typing.get_args(hint) if k is not type(None)]
    return [hint]


@functools.cache  # a class's field types: few, and asked of at every build
def _optional(hint: Any) -> tuple[Any, bool]:
    """A field's type without its None (``int | None``: ``int``; of fixed tuples of several
    lengths, the longest), and whether it had one."""
    kinds = _kinds(hint)
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    optional = union and len(kinds) < len(typing.get_args(hint))
    return max(kinds, key=lambda k: len(typing.get_args(k))), optional


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


def check_all(
    variant: str,
    settings: Iterable[Setting],
    given: Mapping[str, Any],
    *,
    where: str,
    over: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every setting's value: ``given`` checked over the defaults. A name the variant does not
    have (for ``where``: "build" or "run") is a ValueError naming the variant's own settings.
    A setting bounded by another (``Knob.most``) is checked against that one's value: given,
    else ``over``'s (a run's: the built values), else its default."""
    settings = tuple(settings)
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
    checked = {name: allowed[name].check(value) for name, value in given.items()}
    _check_related(settings, {**{s.name: s.default for s in settings}, **(over or {}), **checked})
    return {**{name: setting.default for name, setting in allowed.items()}, **checked}


def _check_related(settings: Iterable[Setting], values: Mapping[str, Any]) -> None:
    """ValueError for a setting over the setting that bounds it (``Knob.most``)."""
    for setting in settings:
        bound = setting.knob.most
        value, most = values.get(setting.name), values.get(bound or "")
        if bound is None or value is None or not isinstance(most, int | float):
            continue
        if value > most:
            raise ValueError(f"{setting.name} must be <= {bound} ({most}), got {value}")
