"""The action format as one interface (``reactgraph.nodes.loop.formats``): every registered format
implements all of it, its names are declared once (the setting, the command line, Studio's form
and the eval's arms take them from the registry), and nothing outside the package asks which
format a run has."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from reactgraph.nodes.loop import formats
from reactgraph.nodes.loop.formats import NAMES, ActionFormat
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.settings import settings_of

ROOT = Path(__file__).resolve().parents[1]
MEMBERS = sorted(
    {n for n in vars(ActionFormat) if not n.startswith("_")} | set(ActionFormat.__annotations__)
)
# Asking which format a run has: comparing its ``action_format`` (an attribute, a key, a
# ``get``) to anything.
ASKING = re.compile(r"""action_format["']?[\])]?\s*(?:[!=]=|(?:not\s+)?in\b)""")


@pytest.mark.parametrize("name", NAMES)
def test_every_format_has_the_whole_interface(name: str) -> None:
    found = formats.format_named(name)
    assert found.name == name
    missing = [m for m in MEMBERS if not hasattr(found, m)]
    assert not missing, (name, missing)
    assert isinstance(found.answer_format, str) and "{schema}" in found.answer_format
    assert isinstance(found.notes_block, str) and "{notes}" in found.notes_block
    assert "{limit}" in found.reply_cut


def test_the_interface_is_what_the_formats_differ_in() -> None:
    assert (
        sorted(
            [
                "answer_format",
                "binds_tools",
                "bound",
                "check_model",
                "counted",
                "decoding",
                "name",
                "narrowed",
                "notes_block",
                "opening",
                "read",
                "read_forced",
                "reply_cut",
                "stop",
            ]
        )
        == MEMBERS
    )


def test_the_names_are_declared_once() -> None:
    hint = typing.get_type_hints(RunSettings)["action_format"]
    assert typing.get_args(hint) == NAMES
    setting = next(s for s in settings_of(RunSettings) if s.name == "action_format")
    assert setting.choices == NAMES  # the command line's choices and Studio's enum
    assert RunSettings().action_format == NAMES[0]
    from reactgraph.app.eval.arms import FORMATS

    assert tuple(FORMATS) == NAMES


def test_the_run_chooses_its_format_by_its_setting() -> None:
    for name in NAMES:
        assert formats.of(RunSettings(action_format=name)).name == name  # type: ignore[arg-type]
    assert list(formats.registered()) == [formats.format_named(n) for n in NAMES]


def test_nothing_outside_the_formats_package_asks_which_format_a_run_has() -> None:
    asking = sorted(
        str(path.relative_to(ROOT))
        for folder in ("graphs", "nodes", "tools")
        for path in (ROOT / folder).rglob("*.py")
        if "formats" not in path.relative_to(ROOT).parts and ASKING.search(path.read_text())
    )
    assert asking == [], asking
