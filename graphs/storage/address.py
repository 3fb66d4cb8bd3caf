"""Where the runs are by default. No imports, so the command line's parser can show the default
without loading storage (``reactgraph.storage.backends`` says which backend an address is)."""

from __future__ import annotations

DEFAULT_DB = "runs/reactgraph.sqlite"
