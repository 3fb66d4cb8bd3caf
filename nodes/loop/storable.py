"""Text every checkpointer can store.

PostgreSQL rejects NUL characters in text and JSON, and no backend can encode a lone surrogate
as UTF-8; one such character in a reply or an Observation would make every later write of the
thread fail. Text from models and tools is therefore cleaned as it enters the state, visibly:
each offending character becomes U+FFFD. A question is the caller's own input: it is refused
instead (see ``reactgraph.graph``).
"""

from __future__ import annotations

import re

REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, text)


def unstorable(text: str) -> str | None:
    """A description of the first character no backend can store, or None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return f"character U+{ord(found.group()):04X} at position {found.start()}"
