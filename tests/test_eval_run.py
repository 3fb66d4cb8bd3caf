"""``reactgraph eval`` end to end: HotpotQA questions searching only their own paragraphs, the
scripted model and the local OpenAI-compatible server, resuming without running a pair twice,
the summary adding up to the result lines, and one-line errors."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from reactgraph.app.eval import read_hotpotqa, summarize
from reactgraph.app.eval.run import read_results, run_eval
from tests.fakes import (
    FakeOpenAIServer,
    Fault,
    colour_model,
    colour_reply,
    scripted_recipe,
    seed_responder,
)
from tests.inprocess import run_main
from tests.test_cli import cli, one_line_error, popen

ROOT = Path(__file__).resolve().parents[1]
HOTPOT = ROOT / "tests" / "data" / "hotpot_mini.json"


def hotpot_eval(server: FakeOpenAIServer, variants: str, out: Path, *more: str) -> list[str]:
    """The arguments of ``reactgraph eval`` over the HotpotQA sample with these variants, on the
    test server, writing to ``out``; ``more`` after them."""
    return [
        "eval",
        str(HOTPOT),
        "--format",
        "hotpotqa",
        "--variants",
        variants,
        "--base-url",
        server.url,
        "--out",
        str(out),
        *more,
    ]


def test_hotpotqa_questions_search_only_their_own_paragraphs(tmp_path: Path) -> None:
    items, problems = read_hotpotqa(HOTPOT)
    assert len(items) == 3 and len(problems) == 1
    variants = ["transcript", "notes"]
    recipe = scripted_recipe(tmp_path / "runs.sqlite", colour_model)
    lines = list(run_eval(recipe, items, variants, tmp_path / "out", workers=1))
    assert len(lines) == 6
    by = {(line["id"], line["variant"]): line for line in lines}
    for variant in variants:
        assert by["5a8b57f25542995d1e6f1371", variant]["answer"] == "blue"
        assert by["5a8c7595554299585d9e36b6", variant]["answer"] == "red"
        # The third question's pages never mention a zorblat: the first question's page,
        # which says it is blue, is not in its search.
        assert by["5a85ea095542994775f606a8", variant]["answer"] == "unknown"
        assert all(by[i.id, variant]["em"] == 1.0 for i in items)
    assert read_results(tmp_path / "out") == lines


def test_the_summary_adds_up_to_the_result_lines(tmp_path: Path) -> None:
    items, _ = read_hotpotqa(HOTPOT)
    recipe = scripted_recipe(tmp_path / "runs.sqlite", colour_model)
    lines = list(run_eval(recipe, items, ["transcript"], tmp_path / "out", workers=1))
    (row,) = summarize(lines)
    assert row.n == 3 and row.em == sum(line["em"] for line in lines) / 3
    assert row.prompt_tokens == sum(line["prompt_tokens"] for line in lines)
    assert row.statuses["answered"] == 3


def test_over_the_local_server_with_workers(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = lambda body: colour_reply(
        [type("M", (), {"content": m["content"]})() for m in body["messages"]]  # type: ignore[misc]
    )
    out = tmp_path / "eval"
    settings = ("--workers", "2", "--model", "test-model", "--context-window", "32000")
    run = cli(*hotpot_eval(openai_server, "transcript,notes_compaction", out, *settings))
    assert run.returncode == 0, run.stderr
    assert "hotpot_mini.json: index 3" in run.stderr  # the broken entry, as a warning
    lines = read_results(out)
    assert (
        sorted((line["variant"], line["em"]) for line in lines)
        == [
            ("notes_compaction", 1.0),
        ]
        * 3
        + [("transcript", 1.0)] * 3
    )
    summary = (out / "summary.md").read_text()
    assert "| transcript |" in summary and "| notes_compaction |" in summary
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "transcript" in run.stdout and "EM" in run.stdout


@pytest.mark.kills
def test_an_interrupted_eval_resumes_without_running_a_pair_twice(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.latency_s = 0.3
    openai_server.responder = lambda body: colour_reply(
        [type("M", (), {"content": m["content"]})() for m in body["messages"]]  # type: ignore[misc]
    )
    out = tmp_path / "eval"
    args = hotpot_eval(
        openai_server, "transcript,notes", out, "--workers", "1", "--concurrency", "1"
    )
    first = popen(*args)
    deadline = time.time() + 60
    while len(read_results(out)) < 2 and time.time() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130, err
    done = {line["key"] for line in read_results(out)}
    assert 2 <= len(done) < 6
    second = cli(*args)
    assert second.returncode == 0, second.stderr
    assert f"{len(done)} pair(s) already done" in second.stdout
    keys = [line["key"] for line in read_results(out)]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == 6  # each pair once, none lost


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--bundled", "--variants", "transcript,nope"], "unknown variant(s) nope"),
        (["x.json", "--format", "csv"], "invalid choice: 'csv'"),
        (["/no/such/file.jsonl"], "/no/such/file.jsonl"),
        ([], "give a question file, or --bundled"),
    ],
)
def test_bad_eval_input_is_one_line(args: list[str], fragment: str) -> None:
    one_line_error(run_main("eval", *args, "--base-url", "http://127.0.0.1:9/v1"), fragment)


def test_the_bundled_set_runs_with_three_variants_and_writes_three_files(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    def responder(body: dict) -> str:
        seen = sum(str(m["content"]).startswith("Observation:") for m in body["messages"])
        question = str(body["messages"][0]["content"]).rsplit("Question:", 1)[-1].strip()
        if seen == 0:
            return f"Thought: search.\nAction: search[{question[:60]}]"
        return "Final Answer: 1889"

    openai_server.responder = responder
    out = tmp_path / "bundled"
    run = run_main(  # the files an eval writes are its own work: one worker, in-process
        "eval",
        "--workers",
        "1",
        "--bundled",
        "--variants",
        "transcript,notes,compaction",
        "--limit",
        "4",
        "--base-url",
        openai_server.url,
        "--context-window",
        "64000",
        "--out",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    assert {p.name for p in out.iterdir()} >= {"results.jsonl", "summary.md", "summary.png"}
    assert len(read_results(out)) == 12
    assert json.loads((out / "results.jsonl").read_text().splitlines()[0])["gold"]


def test_a_failed_pair_is_one_line_and_a_rerun_that_retries_it_exits_0(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Exit 1 says a pair ended in an error, and one line on stderr says how many and why; the
    pair's last line counts, so once a re-run has answered it the eval exits 0 (its old error
    line stays in the results file)."""
    broken = {"on": True}

    def responder(body: dict) -> object:
        asked = str(body["messages"][0]["content"])
        return Fault(500, "down for q1") if broken["on"] and "q1" in asked else seed_responder(body)

    openai_server.responder = responder  # type: ignore[assignment]
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        "".join(json.dumps({"id": i, "question": f"q{i}", "answer": "48"}) + "\n" for i in (0, 1))
    )
    args = ["eval", str(questions), "--out", str(tmp_path / "out"), "--variants", "transcript"]
    args += ["--base-url", openai_server.url, "--workers", "1", "--model-retries", "0"]
    first = run_main(*args)
    assert first.returncode == 1, first.stderr
    lines = first.stderr.strip().splitlines()
    assert len(lines) == 1 and "1 of 2 pair(s) ended in an error" in lines[0], lines
    assert "run the same command again" in lines[0]
    broken["on"] = False
    again = run_main(*args)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    shown = [(line["id"], bool(line.get("error"))) for line in read_results(tmp_path / "out")]
    assert sorted(shown) == [("0", False), ("1", False), ("1", True)]
