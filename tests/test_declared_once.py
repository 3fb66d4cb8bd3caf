"""Things declared once: the default tool list, the durability, what a PostgreSQL URL is."""

from __future__ import annotations

import re
from pathlib import Path

from reactgraph.tools import default_tools

ROOT = Path(__file__).resolve().parents[1]
CODE = [p for folder in ("graphs", "nodes", "tools") for p in (ROOT / folder).rglob("*.py")]


def where(pattern: str) -> list[str]:
    """The modules of the package whose text matches ``pattern``."""
    regex = re.compile(pattern)
    return sorted(str(p.relative_to(ROOT)) for p in CODE if regex.search(p.read_text()))


def test_default_tools_are_search_lookup_and_the_calculator() -> None:
    assert [t.name for t in default_tools()] == ["search", "lookup", "calculator"]
    own = default_tools(pages={"Alpha": ["Alpha is a bridge built in 1901."]})
    assert "Alpha" in own[0].invoke("bridge")
    folder = default_tools(ROOT / "tools" / "corpus")
    assert [t.name for t in folder] == ["search", "lookup", "calculator"]


def test_the_default_tool_list_is_written_once() -> None:
    assert where(r"search_tools\([^)]*\),\s*calculator") == ["tools/__init__.py"]


def test_durability_and_the_backend_choice_are_defined_once() -> None:
    assert where(r"(?m)^DURABILITY\s*=") == ["graphs/graph.py"]
    assert where(r"def _?is_postgres\(") == []
    assert where(r"def database_backend\(") == ["graphs/storage/backends/__init__.py"]
    assert where(r"""startswith\(\(["']postgresql://""") == ["graphs/storage/backends/postgres.py"]


def test_every_step_and_action_names_a_node_body_that_exists() -> None:
    from reactgraph.nodes.loop import notes
    from reactgraph.variants import REGISTRY

    for spec in REGISTRY.values():
        for part in (*spec.before_model, *spec.actions):
            assert callable(part.body) and part.body.__name__ == part.name, (spec.name, part)
    assert REGISTRY["notes"].actions[0].name == notes.UPDATE_NOTES
