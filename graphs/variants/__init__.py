"""The registry of variants: everything that lists the variants (``build_graph``, the command
line, Studio, the notebooks, the benchmark) reads it from here.

Adding a variant: write its spec module in this folder (a ``Variant`` value; see
``reactgraph.spec``), add it to ``REGISTRY`` below, add its line to ``langgraph.json`` (a test
checks it), run ``make drawings``, and write its tests (its shape in
``tests/test_graph_shapes.py``, its behaviour in a test module of its own). No other file
changes: the assembly, the settings, the CLI and Studio follow from the spec.
"""

from __future__ import annotations

from reactgraph.settings import Setting
from reactgraph.spec import Variant
from reactgraph.variants.compaction import COMPACTION
from reactgraph.variants.notes import NOTES
from reactgraph.variants.notes_compaction import NOTES_COMPACTION
from reactgraph.variants.transcript import TRANSCRIPT

VARIANT_KEY = "reactgraph_variant"
"""The checkpoint metadata key naming the variant whose graph wrote the checkpoint."""
MODEL_KEY = "reactgraph_model"
"""The checkpoint metadata key naming the model the graph was built with."""

REGISTRY: dict[str, Variant] = {
    v.name: v for v in (TRANSCRIPT, NOTES, COMPACTION, NOTES_COMPACTION)
}
VARIANTS: tuple[str, ...] = tuple(REGISTRY)


def variant(name: str) -> Variant:
    """The variant of that name; ValueError listing the variants otherwise."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown variant {name!r}; choose one of: {', '.join(VARIANTS)}"
        ) from None


def settings_table() -> str:
    """Every variant's settings and defaults as a Markdown table (the README shows it; a test
    checks the two agree)."""
    names = list(REGISTRY)
    seen: dict[str, Setting] = {}
    for spec in REGISTRY.values():
        for setting in spec.settings:
            seen.setdefault(setting.name, setting)
    rows = [
        "| setting | " + " | ".join(names) + " | build_graph | per run | meaning |",
        "| --- |" + " --- |" * (len(names) + 3),
    ]
    for name, setting in seen.items():
        cells = []
        for spec in REGISTRY.values():
            own = spec.setting(name)
            cells.append("-" if own is None else _shown(own))
        where = ["yes" if setting.knob.build else "no", "yes" if setting.knob.per_run else "no"]
        rows.append(
            f"| `{name}` | " + " | ".join([*cells, *where, setting.knob.description]) + " |"
        )
    return "\n".join(rows)


def _shown(setting: Setting) -> str:
    return f"({setting.knob.unset})" if setting.default is None else f"`{setting.shown()}`"
