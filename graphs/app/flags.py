"""The command line's setting flags, generated from the variants' settings fields (read through
``reactgraph.settings.Setting``, a view of each), and the options only the command line has,
which travel apart from the settings.

Every build-time setting of every variant is one flag (``max_turns`` -> ``--max-turns``), typed
and checked by the setting itself, with its description and the spec's defaults as its help. A
flag has no default of its own: a setting not given on the command line keeps its variant's
default (and is not written into the run's record). A new setting (a field with its ``knob``)
gets its flag with no change here. The run-time-only model settings are the command line's
``--model``/``--base-url``.

Imports no LangGraph: the parser is built from this for ``--help`` too.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reactgraph.settings import Setting, check_all
from reactgraph.variants import REGISTRY

MODEL_FLAGS = {"model_name": "--model", "base_url": "--base-url"}
"""The settings a run may change but a graph is not built with: the model to call. The command
line chooses it with these flags (they build the model), not with generated ones."""


class UsageError(Exception):
    """Bad input from the person at the terminal: one line, exit code 2."""


@dataclass(frozen=True)
class RunOptions:
    """What the command line chooses besides the settings; stored in the run's record beside
    them, so a resume rebuilds the same tools and notes store."""

    notes_in_db: bool = False
    """Keep the notes in the database's store instead of ``notes_dir`` (``--notes-in-db``)."""
    mcp: str | None = None
    """The absolute path of an MCP servers.json whose tools the agent also gets (``--mcp``)."""
    default_tools: bool = True
    """Whether the agent gets the bundled tools (``--no-default-tools`` leaves them out)."""
    tools: tuple[str, ...] = ()
    """The person's own tools, each ``module:name`` or an absolute ``file.py:name``
    (``--tools``)."""

    @classmethod
    def of(cls, value: Mapping[str, Any] | None) -> RunOptions:
        """The options of a stored record; keys this version does not know are ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        given = {k: v for k, v in (value or {}).items() if k in known}
        if "tools" in given:
            given["tools"] = tuple(given["tools"] or ())  # JSON keeps a list
        return cls(**given)

    def as_dict(self) -> dict[str, Any]:
        """The options as the run record stores them."""
        return dataclasses.asdict(self)


def flag(name: str) -> str:
    """A setting's flag: ``max_turns`` -> ``--max-turns``; a setting may name its own
    (``tool_call_limits`` -> ``--tool-call-limit``, one limit a flag)."""
    takers = flag_settings().get(name) or {}
    own = next((s.knob.flag for s in takers.values() if s.knob.flag), None)
    return own or "--" + name.replace("_", "-")


def repeated(setting: Setting) -> bool:
    """Whether the setting's flag may be given again, its texts joined: a list of names
    (``--approve a --approve b``) or a number per name (``--tool-call-limit search=5``)."""
    return (setting.kind is tuple and not setting.items) or (
        setting.kind is dict and setting.values is not Any  # not a JSON document's file
    )


def flag_settings() -> dict[str, dict[str, Setting]]:
    """Every setting that gets a generated flag: name -> {variant: that variant's setting}, in
    the order the variants declare them."""
    found: dict[str, dict[str, Setting]] = {}
    for name, spec in REGISTRY.items():
        for setting in spec.settings:
            if setting.knob.build:
                found.setdefault(setting.name, {})[name] = setting
    return found


class _None:
    """A setting given as ``none`` on the command line (``--max-completion-tokens none``)."""

    def __repr__(self) -> str:
        return "none"


NONE = _None()


def _parse(setting: Setting) -> Callable[[str], Any]:
    """An argparse type: the text as the setting's kind, checked by the setting itself."""
    words = {
        int: "a whole number",
        float: "a number",
        str: "a string",
        tuple: "names",
        bool: "true or false",
    }
    as_text = setting.kind in (tuple, dict, bool)  # checked from the text itself

    def parse(text: str) -> Any:
        if setting.optional and text.strip().lower() == "none":
            return NONE  # given as none: no value, unlike a flag not given
        try:
            if setting.kind is dict and setting.values is Any:
                value = _json_file(text)  # a JSON document (answer_schema): its file's
            elif setting.knob.at_file and text.startswith("@"):
                value = _text_file(text[1:])
            else:
                value = text if as_text else setting.kind(text)
        except OSError as error:
            raise argparse.ArgumentTypeError(
                f"cannot read {error.filename or text}: {error.strerror or error}"
            ) from None
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {words.get(setting.kind, setting.kind.__name__)}"
            ) from None
        try:
            checked = setting.check(value)
        except (TypeError, ValueError) as error:
            # argparse names the flag: "argument --max-turns: must be >= 1, got 0".
            message = str(error).removeprefix(f"{setting.name} ")
            raise argparse.ArgumentTypeError(message) from None
        return text if repeated(setting) else checked  # the flag's texts join later

    parse.__name__ = setting.kind.__name__  # argparse names the type in its messages
    return parse


MAX_FILE_BYTES = 1_000_000
"""The largest file a setting's flag reads (``--answer-schema FILE.json``, ``@FILE``)."""


def _read(path: str) -> bytes:
    """A file's bytes, at most ``MAX_FILE_BYTES``; OSError when it cannot be read."""
    with open(path, "rb") as stream:
        data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise argparse.ArgumentTypeError(f"{path} is over {MAX_FILE_BYTES} bytes")
    return data


def _text_file(path: str) -> str:
    """``@FILE``: the file's text (UTF-8)."""
    try:
        return _read(path).decode("utf-8")
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{path} is not UTF-8 text") from None


def _json_file(path: str) -> Any:
    """A JSON file's value (a setting whose kind is a JSON object)."""
    try:
        return json.loads(_read(path).decode("utf-8"))
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{path} is not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError) as error:
        raise argparse.ArgumentTypeError(f"{path} is not JSON: {error}") from None


def shown(setting: Setting) -> str:
    """A setting's default as ``--help`` shows it."""
    return setting.shown()


def help_text(takers: Mapping[str, Setting]) -> str:
    """A setting's help: its description, the spec's default (per variant where they differ),
    and which variants take it when not all do."""
    first = next(iter(takers.values()))
    groups: dict[str, list[str]] = {}
    for variant, setting in takers.items():
        groups.setdefault(shown(setting), []).append(variant)
    if len(groups) == 1:
        default = f"default: {next(iter(groups))}"
    else:
        default = "default: " + ", ".join(f"{d} ({', '.join(v)})" for d, v in groups.items())
    only = "" if len(takers) == len(REGISTRY) else f"; only {', '.join(takers)}"
    again = "; repeatable" if repeated(first) else ""
    return f"{first.knob.description} ({default}{only}{again})".replace("%", "%%")


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per build-time setting of any variant, in a group of their own; a list of
    names is one flag that may be given again (``--approve search --approve calculator``)."""
    group = parser.add_argument_group("settings (unset: the variant's own default)")
    for name, takers in flag_settings().items():
        first = next(iter(takers.values()))
        metavar = first.knob.metavar or first.kind.__name__.upper()
        group.add_argument(
            flag(name),
            dest=name,
            type=_parse(first),
            default=None,
            action="append" if repeated(first) else "store",
            metavar="|".join(first.choices) or metavar + ("|none" if first.optional else ""),
            help=help_text(takers),
        )


def settings_from(args: argparse.Namespace, variants: Iterable[str]) -> dict[str, Any]:
    """The settings given on the command line, checked (by ``check_all``) against each of
    ``variants`` that takes them; a flag none of them takes is a ``UsageError``."""
    chosen = list(variants)
    declared = flag_settings()
    given = {
        name: None if getattr(args, name) is NONE else getattr(args, name)
        for name in declared
        if getattr(args, name, None) is not None
    }
    for name, value in given.items():
        first = next(iter(declared[name].values()))
        if repeated(first):  # the flag's texts, given once or more, as one list
            try:
                given[name] = first.check(value)
            except ValueError as error:
                raise UsageError(f"{flag(name)}: {error}".replace(f": {name}: ", ": ")) from None
        if not any(variant in declared[name] for variant in chosen):
            raise UsageError(
                f"{flag(name)} does not apply to the {', '.join(chosen)} variant(s); "
                f"only to: {', '.join(declared[name])}"
            )
    for variant in chosen:
        own = {k: v for k, v in given.items() if variant in declared[k]}
        try:
            check_all(variant, REGISTRY[variant].settings, own, where="build")
        except (TypeError, ValueError) as error:
            raise UsageError(str(error)) from None
    return given
