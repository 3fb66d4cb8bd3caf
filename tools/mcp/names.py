"""Tool names a model can write: an MCP server may name a tool anything (``my tool``,
``new\\nline``, 10,000 characters), but a ReAct reply calls a tool by writing its name, and the
parser reads a name as an ASCII letter followed by ASCII letters, digits, ``_``, ``.`` and
``-`` (not ending in ``.`` or ``-``): what ``build_graph`` takes
(``reactgraph.nodes.loop.deps.TOOL_NAME``; a test checks the two agree).

A name outside that is mended: each run of other characters becomes one ``_``, the ends lose
their ``_``, ``.`` and ``-``, and a leading digit gets ``tool_`` before it (a leading ``_``
the parser would take for markup). A name with no letter
or digit left, or longer than ``MAX_NAME_CHARS``, cannot be mended and is refused at load. The
tool is still called on its server by the name the server gave it.
"""

from __future__ import annotations

import re

__all__ = ["MAX_NAME_CHARS", "callable_name", "clash_key"]

MAX_NAME_CHARS = 64
"""The longest tool name kept (OpenAI's limit for a function name, too)."""

_OTHER = re.compile(r"[^A-Za-z0-9_.\-]+")
_WRITABLE = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]*")


def callable_name(name: str) -> str | None:
    """``name`` as a model can write it (itself when it already is), or None if it cannot be
    mended."""
    if _WRITABLE.fullmatch(name) and not name.endswith((".", "-")) and len(name) <= MAX_NAME_CHARS:
        return name
    if len(name) > 4 * MAX_NAME_CHARS:
        return None  # not worth mending: it would be cut anyway
    mended = _OTHER.sub("_", name.strip()).strip("_.-")
    if mended[:1].isdigit():
        mended = f"tool_{mended}"
    if not _WRITABLE.fullmatch(mended) or len(mended) > MAX_NAME_CHARS:
        return None
    return mended


def clash_key(name: str) -> str:
    """What the reply parser compares: names differing only in case, hyphens or spaces
    are one name to it."""
    return re.sub(r"[\s\-]+", "_", name).lower()
