"""The registry of variants: everything that lists the variants (``build_graph``, the command
line, Studio, the notebooks, the benchmark) reads it from here.

Adding a variant: write its spec module in this folder (a ``Variant`` value; see
``reactgraph.spec``), add it to ``REGISTRY`` below, add its line to ``langgraph.json`` (a test
checks it), run ``make drawings``, and write its tests (its shape in
``tests/test_graph_shapes.py``, its behaviour in a test module of its own). No other file
changes: the assembly, the settings, the CLI and Studio follow from the spec.
"""

from __future__ import annotations

from reactgraph.spec import Variant
from reactgraph.variants.compaction import COMPACTION
from reactgraph.variants.notes import NOTES
from reactgraph.variants.notes_compaction import NOTES_COMPACTION
from reactgraph.variants.transcript import TRANSCRIPT

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
