"""Every notebook runs top to bottom, offline, and is committed without outputs."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from reactgraph import VARIANTS

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
# What each notebook's text says its cells show.
CLAIMS = {
    "quickstart.ipynb": [
        *(f"{variant:17} answer='48' status=answered" for variant in VARIANTS),
        "48 answered finished",  # the interrupted run, resumed
        # The chat view ends with the answer's reply, as it streamed, line by line.
        "ai    'Thought: I now have enough information.  \\nFinal Answer: 48'",
    ],
    "long_run.ipynb": ["notes stays under a quarter of the transcript: True"],
}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_offline(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    notebook = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")
    client = NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute(env={**os.environ})
    text = "\n".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )
    for claim in CLAIMS[path.name]:
        assert claim in text, f"{path.name} no longer shows {claim!r}"


def test_there_are_notebooks() -> None:
    assert {p.name for p in NOTEBOOKS} == set(CLAIMS)
