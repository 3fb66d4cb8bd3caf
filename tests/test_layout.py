"""The layout's one rule, checked: imports flow app -> graphs -> nodes -> tools, with storage beside
the app. A module that imports against the flow (at any depth) fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each room, and the rooms it may import from (besides itself).
ROOMS = {
    "tools": {"tools"},
    "nodes": {"nodes", "tools"},
    "storage": {"storage", "nodes", "tools"},
    "graphs": {"graphs", "nodes", "tools"},
    "app": {"app", "graphs", "storage", "nodes", "tools"},
}
# The one import against the flow, and why: the Python batch API's ``run_processes`` runs on the
# app's worker pool, and imports it only when it is called.
ALLOWED = {("graphs/batch.py", "app")}


def room_of_file(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    if parts[0] == "graphs" and len(parts) > 2 and parts[1] in ("app", "storage"):
        return parts[1]
    return parts[0]


def room_of_module(name: str) -> str | None:
    if name != "reactgraph" and not name.startswith("reactgraph."):
        return None
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in ("app", "storage", "nodes", "tools"):
        return parts[1]
    return "graphs"


def imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules() -> list[Path]:
    return sorted(
        path for folder in ("graphs", "nodes", "tools") for path in (ROOT / folder).rglob("*.py")
    )


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_flow_one_way(path: Path) -> None:
    room = room_of_file(path)
    wrong = set()
    for name in imported(ast.parse(path.read_text())):
        target = room_of_module(name)
        if name.startswith("reactgraph.") and name.split(".")[1] in ("app", "storage", "nodes"):
            target = name.split(".")[1]
        if target is None or target in ROOMS[room]:
            continue
        if (str(path.relative_to(ROOT)), target) in ALLOWED:
            continue
        wrong.add(name)
    if room == "tools":
        wrong |= {n for n in imported(ast.parse(path.read_text())) if n.startswith("langgraph")}
    assert not wrong, f"{path.relative_to(ROOT)} ({room}) imports {sorted(wrong)}"


def test_the_rooms_hold_what_the_readme_says() -> None:
    assert (ROOT / "graphs/app/cli.py").exists()
    assert (ROOT / "graphs/storage/database.py").exists()
    top = {p.name for p in (ROOT / "graphs").glob("*.py")}
    assert top <= {
        "__init__.py",
        "assembly.py",
        "batch.py",
        "build.py",
        "eventstream.py",
        "graph.py",
        "models.py",
        "scripted.py",
        "settings.py",
        "spec.py",
        "studio.py",
        "transport.py",
    }, top


# nodes/ is grouped by concern: each room a subpackage, no module left loose beside them.
NODE_ROOMS = {"loop", "reading", "calling", "running", "features", "chatview", "formats"}


def test_nodes_are_grouped_in_rooms() -> None:
    loose = {p.name for p in (ROOT / "nodes").glob("*.py")}
    assert loose == {"__init__.py"}, loose
    rooms = {p.name for p in (ROOT / "nodes").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms == NODE_ROOMS, rooms
    for room in rooms:
        assert (ROOT / "nodes" / room / "__init__.py").exists(), room


def test_a_room_shares_its_name_with_no_module() -> None:
    names = {
        p.stem for folder in ("graphs", "nodes", "tools") for p in (ROOT / folder).rglob("*.py")
    }
    rooms = {p.name for p in (ROOT / "nodes").iterdir() if (p / "__init__.py").exists()}
    assert not rooms & names, rooms & names


def test_the_rooms_are_installed() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    for room in (p.name for p in (ROOT / "nodes").iterdir() if (p / "__init__.py").exists()):
        assert f'"reactgraph.nodes.{room}"' in text, room


def test_every_path_the_architecture_map_names_exists() -> None:
    """ARCHITECTURE.md kept true: each file or folder it names in backticks (a path with a
    slash, not a pattern such as ``<name>`` or ``*``) is in the tree."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    named = {
        token.split(" ")[0]
        for token in re.findall(r"`([^`\s]+/[^`]*)`", text)
        if not set(token) & set("<*") and not token.startswith(("http", "reactgraph"))
    }
    assert len(named) > 50, named
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, missing
