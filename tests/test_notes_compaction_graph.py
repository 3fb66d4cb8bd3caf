"""The notes_compaction variant: notes and a window, plus summaries when even the windowed prompt
nears the context window. Its exits, resuming from notes, and a run that does both."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import BaseMessage

from reactgraph import build_graph
from tests.fakes import Runner, ToolLog, action, answer, fake_model, prompt_text

SUMMARY = "## Goal\nFind B.\n## Facts found\n- A is 1 (echo[1])"


def graph(model, folder: Path, counter=None, summarizer=None, **settings):
    return build_graph(
        "notes_compaction",
        model=model,
        tools=[ToolLog().echo()],
        notes_dir=str(folder),
        context_window=10_000,
        token_counter=counter,
        summarizer=summarizer,
        **settings,
    )


def config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def over_when(needle: str, tokens: int = 9_000):
    """A counter over the threshold while ``needle`` is in an uncompacted prompt."""

    def count(messages: Sequence[BaseMessage]) -> int:
        text = prompt_text(messages)
        return tokens if needle in text and "Progress so far" not in text else 100

    return count


def test_answered_with_notes_in_view(tmp_path: Path, run: Runner) -> None:
    model = fake_model("Action: update_notes[- [ ] find B]", answer("B"))
    out = run(graph(model, tmp_path), {"question": "q"}, config("a"))
    assert (out["status"], out["answer"], out["notes"]) == ("answered", "B", "- [ ] find B")
    assert "- [ ] find B" in model.prompts[1] and "Your notes" in model.prompts[1]


def test_the_cap_stops_early_without_a_forced_call_and_a_new_run_resumes_from_the_notes(
    tmp_path: Path, run: Runner
) -> None:
    model = fake_model("Action: update_notes[- [x] A is 1]", action("echo", "2"))
    out = run(graph(model, tmp_path, max_turns=2), {"question": "q"}, config("cap"))
    assert out["status"] == "stopped_early" and out["answer"] is None
    assert len(model.calls) == 2
    again = fake_model(answer("done"))
    out = run(graph(again, tmp_path), {"question": "q"}, config("cap"))
    assert "- [x] A is 1" in again.prompts[0] and "earlier run on this thread" in again.prompts[0]
    assert out["status"] == "answered"


def test_stuck(tmp_path: Path, run: Runner) -> None:
    model = fake_model(*[action("echo", "same")] * 3)
    out = run(graph(model, tmp_path), {"question": "q"}, config("s"))
    assert out["status"] == "stuck"


def test_a_run_that_saves_notes_and_compacts(tmp_path: Path, run: Runner) -> None:
    replies = [
        "Action: update_notes[- [x] A is 1 (echo[1])]",
        *[action("echo", str(i)) for i in range(2, 6)],
        answer("B"),
    ]
    model = fake_model(*replies)
    summarizer = fake_model(SUMMARY)
    built = graph(model, tmp_path, over_when("echo: 4"), summarizer, window_turns=3, keep_turns=1)
    out = run(built, {"question": "q"}, config("both"))
    assert out["status"] == "answered" and out["notes"] == "- [x] A is 1 (echo[1])"
    (record,) = out["compactions"]
    assert record["summary"] == SUMMARY and record["turn"] == 4
    after = model.prompts[4]  # the call after the compaction
    assert SUMMARY in after and "- [x] A is 1 (echo[1])" in after
    assert "echo: 3" not in after and "echo: 4" in after  # one kept turn, verbatim
    # The summarizer saw only the window's turns, not those already out of view.
    assert "update_notes" not in summarizer.prompts[0]
    assert len(out["turns"]) == 6 and record["prompt_tokens"] > 0


def test_context_exhausted_when_even_a_fresh_window_does_not_fit(
    tmp_path: Path, run: Runner
) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(1, 6)], answer("x"))
    summarizer = fake_model(SUMMARY)
    counter = lambda messages: 9_500 if "echo: 3" in prompt_text(messages) else 100  # noqa: E731
    built = graph(model, tmp_path, counter, summarizer, keep_turns=1)
    out = run(built, {"question": "q"}, config("x"))
    assert out["status"] == "context_exhausted" and out["summary"] == SUMMARY
    assert out["answer"] is None and len(summarizer.calls) == 1
