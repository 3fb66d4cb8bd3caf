"""The one LangGraph internal reactgraph sets: how far a read may have to replay deltas.

A channel stored as deltas (``reactgraph.nodes.vocabulary.reducers``) is rebuilt by walking back to
its last snapshot. A channel written rarely (the notes, the summary) would make that walk reach back
to its last write, thousands of steps. LangGraph bounds the walk by forcing a snapshot every
``DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT`` steps (5,000 by default, from the environment variable
of that name, read once at import). reactgraph lowers it to ``MAX_STEPS_BETWEEN_SNAPSHOTS``
unless the variable is set. ``tests/test_delta_contract.py`` fails if the name moves.
"""

from __future__ import annotations

import os

from langgraph.pregel import _checkpoint

ENV = "LANGGRAPH_DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT"
# Three steps a turn: a snapshot of every delta channel at least every 500 turns.
MAX_STEPS_BETWEEN_SNAPSHOTS = 1500


def bound_replay() -> int:
    """Lower LangGraph's bound to ours, unless the environment chose one; the bound in force."""
    if ENV not in os.environ:
        current = _checkpoint.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT
        _checkpoint.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT = min(current, MAX_STEPS_BETWEEN_SNAPSHOTS)
    return _checkpoint.DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT
