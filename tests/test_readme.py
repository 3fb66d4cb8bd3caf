"""The README says what the code does: its settings table is the registry's."""

from __future__ import annotations

from pathlib import Path

from reactgraph.variants import settings_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_settings_table_is_generated_from_the_variant_specs() -> None:
    assert settings_table() in README.read_text("utf-8"), (
        "README's settings table is out of date; paste reactgraph.variants.settings_table()"
    )
