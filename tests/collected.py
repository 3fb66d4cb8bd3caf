"""What the suite collected, kept for the tests about the suite itself (``test_targets``)."""

from __future__ import annotations

import pytest

MARKERS = pytest.StashKey[dict[str, frozenset[str]]]()
"""Every collected test's marker names, before ``-m`` deselects any (``tests/conftest.py``)."""
