"""notes: a long loop whose plan lives in external notes (``update_notes[text]``); the model sees
the notes and only the last turns, and at the cap the run stops with its notes saved."""

from __future__ import annotations

from reactgraph.nodes import prompts
from reactgraph.nodes.view import View
from reactgraph.settings import Setting
from reactgraph.spec import Action, Step, Variant
from reactgraph.variants.common import common

WINDOW_TURNS = Setting(
    "window_turns", int, 8, "How many recent turns the model sees besides its notes.", minimum=1
)
MAX_NOTES_CHARS = Setting(
    "max_notes_chars", int, 4000, "Longest notes text update_notes accepts.", minimum=1
)
NOTES_DIR = Setting(
    "notes_dir",
    str,
    "runs/notes",
    "Folder of the notes files, one per thread (unless a store is given).",
    per_run=False,  # a path: never chosen by whoever starts a run
)
NOTES_SETTINGS = (WINDOW_TURNS, MAX_NOTES_CHARS, NOTES_DIR)

LOAD_NOTES = Step("load_notes", "reactgraph.nodes.notes", every_turn=False)
UPDATE_NOTES = Action("update_notes", prompts.UPDATE_NOTES_DESCRIPTION, "reactgraph.nodes.notes")

NOTES = Variant(
    name="notes",
    summary="A long loop whose plan lives in notes; the model sees them and the last turns.",
    settings=(*common(max_turns=40), *NOTES_SETTINGS),
    statuses=("answered", "stopped_early", "stuck", "awaiting_approval"),
    before_model=(LOAD_NOTES,),
    actions=(UPDATE_NOTES,),
    view=View(notes=True, window=True),
    at_cap="stop_run",
    objects=frozenset({"store"}),
)
