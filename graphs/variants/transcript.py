"""transcript: the plain loop over the whole transcript, with a forced last answer at the cap."""

from __future__ import annotations

from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.spec import Variant

TRANSCRIPT = Variant(
    name="transcript",
    summary="The plain loop: the model sees the whole transcript; a forced answer at the cap.",
    settings_type=RunSettings,
    defaults={"max_turns": 10},
    at_cap="force_answer",
)
