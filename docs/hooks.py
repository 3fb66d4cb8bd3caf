"""MkDocs hook: the package as it installs, for mkdocstrings. The repository keeps the import
name ``reactgraph`` in ``graphs/`` with ``nodes/`` and ``tools/`` beside it (setuptools maps
them), which griffe cannot follow; so, as ``make typecheck`` does for mypy, a tree of links
in ``build/docs-api/reactgraph`` stands for the installed package."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "docs-api"


def on_startup(command: str, dirty: bool) -> None:
    package = TREE / "reactgraph"
    if package.exists():
        shutil.rmtree(TREE)
    package.mkdir(parents=True)
    for entry in (ROOT / "graphs").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name in ("nodes", "tools"):
        (package / name).symlink_to(ROOT / name)
