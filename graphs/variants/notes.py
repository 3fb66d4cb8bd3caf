"""notes: a long loop whose plan lives in external notes (``update_notes[text]``); the model sees
the notes and only the last turns, and at the cap the run stops with its notes saved."""

from __future__ import annotations

from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.run_settings import NotesSettings
from reactgraph.nodes.vocabulary.view import View
from reactgraph.spec import Action, Step, Variant

LOAD_NOTES = Step("load_notes", "reactgraph.nodes.loop.notes", every_turn=False)
UPDATE_NOTES = Action(
    "update_notes", prompts.UPDATE_NOTES_DESCRIPTION, "reactgraph.nodes.loop.notes"
)

NOTES = Variant(
    name="notes",
    summary="A long loop whose plan lives in notes; the model sees them and the last turns.",
    settings_type=NotesSettings,
    defaults={"max_turns": 40},
    before_model=(LOAD_NOTES,),
    actions=(UPDATE_NOTES,),
    view=View(notes=True, window=True),
    at_cap="stop_run",
    objects=frozenset({"store"}),
)
