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
        "context.py",
        "forks.py",
        "graph.py",
        "models.py",
        "scripted.py",
        "settings.py",
        "spec.py",
        "state_edits.py",
        "studio.py",
    }, top


# nodes/ is grouped by concern: each room a subpackage, no module left loose beside them, and
# the rooms layered bottom to top: a room imports only the rooms below it (and itself).
NODE_ROOMS = (
    "vocabulary",  # the state, the settings, the prompts, the effects: imports no other room
    "reading",  # reading a reply: pure
    "running",  # running a tool
    "calling",  # calling the model, all of it
    "chatview",  # the chat view of the turns
    "loop",  # the loop: its action formats, its middleware, its nodes and their routing
)
# The loop's room in parts, bottom to top: a part imports only the parts below it (and itself).
# Its own modules (``nodes/loop/*.py``: the shell, the node bodies, the routers) are the top.
LOOP_PARTS = (
    "formats",  # the action formats
    "middleware",  # the extension seam and the features that join the loop through it
    "",  # the loop's own modules
)


def node_room(name: str) -> str | None:
    """The room of a ``reactgraph.nodes.<room>...`` module name (None: not a room's)."""
    parts = name.split(".")
    if parts[:2] == ["reactgraph", "nodes"] and len(parts) > 2 and parts[2] in NODE_ROOMS:
        return parts[2]
    return None


def test_nodes_are_grouped_in_rooms() -> None:
    loose = {p.name for p in (ROOT / "nodes").glob("*.py")}
    assert loose == {"__init__.py"}, loose
    rooms = {p.name for p in (ROOT / "nodes").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms == set(NODE_ROOMS), rooms
    for room in rooms:
        assert (ROOT / "nodes" / room / "__init__.py").exists(), room


def back_pointing() -> list[tuple[str, str]]:
    """Every import from a room to a room above it: (the importing file, the module)."""
    found = []
    for path in sorted((ROOT / "nodes").rglob("*.py")):
        room = path.relative_to(ROOT / "nodes").parts[0]
        if room not in NODE_ROOMS:
            continue
        for name in imported(ast.parse(path.read_text())):
            target = node_room(name)
            if target is not None and NODE_ROOMS.index(target) > NODE_ROOMS.index(room):
                found.append((str(path.relative_to(ROOT)), name))
    # ``from reactgraph.nodes.loop import formats`` names the formats room as a module
    return sorted(set(found))


def test_the_rooms_import_downward_only() -> None:
    assert back_pointing() == []


def loop_part(name: str) -> str | None:
    """The part of the loop's room a ``reactgraph.nodes.loop...`` module name is in (None:
    not the loop's)."""
    parts = name.split(".")
    if parts[:3] != ["reactgraph", "nodes", "loop"] or len(parts) == 3:
        return None  # ``from reactgraph.nodes.loop import formats`` names the part as a module
    return parts[3] if parts[3] in LOOP_PARTS else ""


def test_the_loop_parts_import_downward_only() -> None:
    """The action formats know nothing of the middleware or the nodes, the middleware nothing
    of the nodes: a model call goes from a node through the middleware to the model calling room
    without a move back up."""
    found = []
    for path in sorted((ROOT / "nodes" / "loop").rglob("*.py")):
        parts = path.relative_to(ROOT / "nodes" / "loop").parts
        part = parts[0] if len(parts) > 1 else ""
        for name in imported(ast.parse(path.read_text())):
            target = loop_part(name)
            if target is not None and LOOP_PARTS.index(target) > LOOP_PARTS.index(part):
                found.append((str(path.relative_to(ROOT)), name))
    assert sorted(set(found)) == []
    assert {p.name for p in (ROOT / "nodes" / "loop").iterdir() if p.is_dir()} - {
        "__pycache__"
    } == {part for part in LOOP_PARTS if part}


def test_a_room_shares_its_name_with_no_module() -> None:
    names = {
        p.stem for folder in ("graphs", "nodes", "tools") for p in (ROOT / folder).rglob("*.py")
    }
    rooms = {p.parent.name for p in (ROOT / "nodes").rglob("*/__init__.py")}
    assert not rooms & names, rooms & names


def test_the_rooms_are_installed() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    for init in (ROOT / "nodes").rglob("*/__init__.py"):
        room = ".".join(init.parent.relative_to(ROOT / "nodes").parts)
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


# The loop's features join it through the middleware seam: the loop's own modules (the node
# bodies, the shell, the prompt) know the seam, never a feature. The one exception, the routers,
# reads where the approval gate's node goes next.
SEAM = {"reactgraph.nodes.loop.middleware.seam", "reactgraph.nodes.loop.middleware.scope"}
KNOWS_A_FEATURE = {"nodes/loop/routing.py": {"reactgraph.nodes.loop.middleware.approval"}}


@pytest.mark.parametrize("path", sorted((ROOT / "nodes/loop").glob("*.py")), ids=lambda p: p.name)
def test_no_node_body_names_a_feature(path: Path) -> None:
    allowed = SEAM | KNOWS_A_FEATURE.get(str(path.relative_to(ROOT)), set())
    modules = {
        ".".join(name.split(".")[:5])
        for name in imported(ast.parse(path.read_text()))
        if name.startswith("reactgraph.nodes.loop.middleware.")
    }
    assert modules <= allowed, sorted(modules - allowed)


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for folder in ("graphs", "nodes", "tools")
        for path in (ROOT / folder).rglob("*.py")
        if (n := len(path.read_text().splitlines())) > 400
    }
    assert not long, long
