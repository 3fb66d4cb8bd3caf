"""The notes variant end to end: notes in the prompt, the window, the cap, resuming, limits,
history, unsafe thread ids, crashes, and the store-backed notes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from reactgraph import build_graph
from reactgraph.nodes.loop.notes import FileNotes, StoreNotes, safe_name
from tests.fakes import Runner, ToolLog, action, answer, fake_model

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["file", "store"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> dict:
    """Build arguments and a reader for each notes backend; both must behave the same."""
    if request.param == "file":
        return {
            "build": {"notes_dir": str(tmp_path / "notes")},
            "notes": FileNotes(tmp_path / "notes"),
        }
    store = InMemoryStore()
    return {"build": {"store": store}, "notes": StoreNotes(store)}


def notes_graph(model, backend: dict, **kwargs):
    return build_graph("notes", model=model, tools=[ToolLog().echo()], **backend["build"], **kwargs)


def config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def test_seed_notes_stay_in_view_when_turn_one_drops_out(backend: dict, run: Runner) -> None:
    first = "Thought: plan the work first.\nAction: update_notes['[x] A [ ] B']"
    steps = [action("echo", str(i), thought=f"step {i}") for i in range(2, 10)]
    model = fake_model(first, *steps, answer("done"))
    out = run(notes_graph(model, backend, window_turns=8), {"question": "q"}, config("t1"))
    assert out["status"] == "answered" and out["answer"] == "done"
    assert out["notes"] == "[x] A [ ] B"
    turn_ten = model.prompts[9]
    assert "[x] A [ ] B" in turn_ten
    assert "plan the work first" not in turn_ten
    assert "update_notes['[x] A [ ] B']" not in turn_ten
    assert "step 2" in turn_ten and "step 9" in turn_ten
    assert "plan the work first" in model.prompts[8]  # turn 9 still sees turn 1
    assert len(out["turns"]) == 10  # the state keeps the whole transcript
    assert out["turns"][0]["observation"] == "notes saved"


def test_update_notes_is_described_with_its_limit(backend: dict, run: Runner) -> None:
    model = fake_model(answer("x"))
    run(notes_graph(model, backend, max_notes_chars=123), {"question": "q"}, config("t"))
    assert (
        "update_notes[input]:" in model.prompts[0] and "at most 123 characters" in model.prompts[0]
    )
    assert "Your notes" in model.prompts[0] and "(empty)" in model.prompts[0]


def test_cap_stops_early_and_a_new_run_resumes_from_the_notes(backend: dict, run: Runner) -> None:
    replies = [
        "Action: update_notes[- [x] found A\n- [ ] find B]",
        action("echo", "1"),
        action("echo", "2"),
    ]
    model = fake_model(*replies)
    out = run(notes_graph(model, backend, max_turns=3), {"question": "q"}, config("t2"))
    assert out["status"] == "stopped_early"
    assert out["answer"] is None
    assert out["notes"] == "- [x] found A\n- [ ] find B"
    assert len(model.calls) == 3  # no forced call
    again = fake_model(answer("B"))
    out = run(notes_graph(again, backend), {"question": "q"}, config("t2"))
    assert "- [x] found A" in again.prompts[0]
    assert "earlier run on this thread" in again.prompts[0]
    assert out["notes"] == "- [x] found A\n- [ ] find B"
    fresh = fake_model(answer("x"))
    run(notes_graph(fresh, backend), {"question": "q"}, config("other"))
    assert "earlier run" not in fresh.prompts[0]


def test_oversize_update_is_rejected_and_the_old_notes_stay(backend: dict, run: Runner) -> None:
    model = fake_model(
        "Action: update_notes[short]", f"Action: update_notes[{'y' * 50}]", answer("ok")
    )
    out = run(notes_graph(model, backend, max_notes_chars=20), {"question": "q"}, config("t3"))
    observation = out["turns"][1]["observation"]
    assert "50 characters" in observation and "limit of 20" in observation
    assert out["notes"] == "short"
    assert backend["notes"].read("t3") == "short"


def test_every_revision_is_kept_with_its_turn(backend: dict, run: Runner) -> None:
    model = fake_model(
        "Action: update_notes[one]", action("echo", "x"), "Action: update_notes[two]", answer("ok")
    )
    run(notes_graph(model, backend), {"question": "q"}, config("t4"))
    history = backend["notes"].history("t4")
    assert [(h["turn"], h["text"]) for h in history] == [(0, ""), (1, "one"), (3, "two")]
    assert all(isinstance(h["time"], float) for h in history)


def test_a_run_without_thread_id_gets_one(backend: dict, run: Runner) -> None:
    out = run(
        notes_graph(fake_model("Action: update_notes[n]", answer("a")), backend), {"question": "q"}
    )
    assert out["thread_id"] and backend["notes"].read(out["thread_id"]) == "n"


@pytest.mark.parametrize(
    "thread",
    ["../x", "../../etc/passwd", "a/b", "/abs", ".", "..", "a\tb", "C:\\x", "~root", "x" * 300],
)
def test_unsafe_thread_ids_stay_inside_notes_dir(tmp_path: Path, thread: str, run: Runner) -> None:
    folder = tmp_path / "notes"
    model = fake_model("Action: update_notes[secret]", answer("ok"))
    run(
        build_graph("notes", model=model, tools=[], notes_dir=str(folder)),
        {"question": "q"},
        config(thread),
    )
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(p.parent == folder for p in written)
    assert FileNotes(folder).read(thread) == "secret"
    assert "/" not in safe_name(thread) and not safe_name(thread).startswith(".")


def test_distinct_ids_never_share_a_file() -> None:
    assert safe_name("a/b") != safe_name("a_b")
    assert safe_name("plain-id_1.x") == "plain-id_1.x"
    # A crafted id equal to another id's file name gets a name of its own.
    assert safe_name(safe_name("team/alpha")) != safe_name("team/alpha")
    # Ids that differ only in case never share a file, even on a case-insensitive disk.
    assert safe_name("Alpha").lower() != safe_name("alpha").lower()


def test_a_crafted_thread_id_cannot_read_another_threads_notes(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    writer = fake_model("Action: update_notes[the secret plan]", answer("ok"))
    build_graph("notes", model=writer, tools=[], notes_dir=str(folder)).invoke(
        {"question": "q"}, config("team/alpha")
    )
    crafted = safe_name("team/alpha")
    reader = fake_model(answer("ok"))
    build_graph("notes", model=reader, tools=[], notes_dir=str(folder)).invoke(
        {"question": "q"}, config(crafted)
    )
    assert "the secret plan" not in reader.prompts[0]
    assert FileNotes(folder).read(crafted) == ""


def test_a_torn_history_line_is_skipped_and_never_spoils_the_next(tmp_path: Path) -> None:
    notes = FileNotes(tmp_path)
    notes.write("t", "one", 1)
    history = tmp_path / "t.history.jsonl"
    with history.open("ab") as torn:  # what a kill in the middle of an append leaves
        torn.write(b'{"turn": 2, "time": 1.0, "text": "half a revis')
    notes.write("t", "three", 3)
    assert [(h["turn"], h["text"]) for h in notes.history("t")] == [(1, "one"), (3, "three")]


def test_temporary_files_of_killed_writes_are_swept(tmp_path: Path) -> None:
    notes = FileNotes(tmp_path)
    stale = tmp_path / ".t.abc123.tmp"
    stale.write_text("left by a killed write")
    os.utime(stale, (0, 0))
    fresh = tmp_path / ".t.def456.tmp"
    fresh.write_text("a write in progress elsewhere")
    notes.write("t", "new", 1)
    assert not stale.exists() and fresh.exists()


def test_notes_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = FileNotes(tmp_path)
    notes.write("t", "old", 1)

    def crash(*args: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        notes.write("t", "new", 2)
    assert notes.read("t") == "old"
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


CRASHING_RUN = textwrap.dedent(
    """
    import os, signal, sys
    from reactgraph import build_graph
    from tests.fakes import fake_model, ToolLog

    def die(messages):
        os.kill(os.getpid(), signal.SIGKILL)

    model = fake_model("Action: update_notes[- [x] A\\n- [ ] B]", die)
    graph = build_graph("notes", model=model, tools=[ToolLog().echo()], notes_dir=sys.argv[1])
    graph.invoke({"question": "q"}, {"configurable": {"thread_id": "crash"}})
    """
)


def test_sigkill_right_after_a_notes_update_leaves_notes_a_new_run_resumes(
    tmp_path: Path, run: Runner
) -> None:
    folder = tmp_path / "notes"
    result = subprocess.run(
        [sys.executable, "-c", CRASHING_RUN, str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == -9, result.stderr
    assert FileNotes(folder).read("crash") == "- [x] A\n- [ ] B"
    lines = (folder / "crash.history.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["text"] == "- [x] A\n- [ ] B"
    model = fake_model(answer("B done"))
    out = run(
        build_graph("notes", model=model, tools=[], notes_dir=str(folder)),
        {"question": "q"},
        config("crash"),
    )
    assert "- [x] A\n- [ ] B" in model.prompts[0] and "earlier run" in model.prompts[0]
    assert out["status"] == "answered"


def test_stuck_and_truncation_behave_as_in_the_transcript_variant(
    backend: dict, run: Runner
) -> None:
    model = fake_model(*[action("echo", "same")] * 3)
    out = run(notes_graph(model, backend), {"question": "q"}, config("t5"))
    assert out["status"] == "stuck"
    model = fake_model(action("echo", "z" * 500), answer("ok"))
    out = run(
        notes_graph(model, backend, max_observation_chars=50), {"question": "q"}, config("t6")
    )
    assert "characters cut" in out["turns"][0]["observation"]


@pytest.mark.parametrize(
    "kwargs",
    [{"window_turns": 4}, {"notes_dir": "x"}, {"max_notes_chars": 9}, {"store": InMemoryStore()}],
)
def test_notes_settings_are_rejected_by_the_transcript_variant(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="not apply to the"):
        build_graph("transcript", model=fake_model(), tools=[], **kwargs)


def test_notes_misuse_raises(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        build_graph("notes", model=fake_model(), tools=[], window_turns=0)
    with pytest.raises(TypeError):
        build_graph("notes", model=fake_model(), tools=[], store="sqlite.db")


def test_saved_notes_are_not_repeated_in_the_window(backend: dict, run: Runner) -> None:
    notes = "- [x] found that the tower opened in 1889 (search[Eiffel Tower])"
    model = fake_model(f"Thought: save.\nAction: update_notes[{notes}]", answer("ok"))
    out = run(notes_graph(model, backend), {"question": "q"}, config("t7"))
    assert model.prompts[1].count(notes) == 1
    assert "Thought: save." in model.prompts[1]
    assert notes in out["turns"][0]["reply"]  # the record keeps the raw reply


def test_a_runs_context_changes_the_notes_limit_and_its_description(
    backend: dict, run: Runner
) -> None:
    from reactgraph import RunContext

    model = fake_model("Action: update_notes[" + "n" * 30 + "]", answer("ok"))
    out = run(
        notes_graph(model, backend, max_notes_chars=100),
        {"question": "q"},
        config("t8"),
        context=RunContext(max_notes_chars=20),
    )
    assert "at most 20 characters" in model.prompts[0]
    assert "limit of 20" in out["turns"][0]["observation"]
