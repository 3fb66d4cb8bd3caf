"""The progress bar's column of runs in flight (``reactgraph.app.console.progress``)."""

from __future__ import annotations

from typing import Any

from rich.progress import ProgressColumn, Task
from rich.text import Text


class FlightColumn(ProgressColumn):
    """How many runs are in flight now (read from the engine's ``Flight`` at each refresh), and
    how many have failed (the task's ``failed`` field)."""

    def __init__(self, flight: Any) -> None:
        super().__init__()
        self.flight = flight

    def render(self, task: Task) -> Text:
        failed = task.fields.get("failed", 0)
        style = "red" if failed else "dim"
        return Text(f"{self.flight.running} in flight, {failed} failed", style=style)
