"""``reactgraph eval --bench bfcl`` end to end, through the command line in a subprocess, against
the local OpenAI-compatible server replaying each task's ground truth (every arm scores 100%) or
wrong arguments (0%); the arms named with their grammar; a killed eval resumed without running
a task twice; one-line errors; the arms' names."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from reactgraph.app.eval.arms import arm, arms_of, with_grammar
from reactgraph.app.eval.bfcl_data import load_category
from reactgraph.app.eval.run import read_results
from reactgraph.app.flags import UsageError
from tests.fakes import BfclReplayer, FakeOpenAIServer
from tests.test_cli import cli, one_line_error, popen

pytestmark = pytest.mark.slow
CATEGORIES = ["simple_python", "multiple", "parallel", "irrelevance", "multi_turn_base"]
ARMS = ["transcript", "transcript+gbnf", "transcript:tool_calls", "prebuilt"]


def tasks(limit: int, categories: list[str] = CATEGORIES) -> list:
    return [task for category in categories for task in load_category(category, limit)]


def bench(server: FakeOpenAIServer, out: Path, limit: int, *more: str) -> list[str]:
    args = ["eval", "--bench", "bfcl", "--categories", ",".join(CATEGORIES)]
    args += ["--limit", str(limit), "--base-url", server.url, "--model", "replayer"]
    return [*args, "--out", str(out), "--workers", "1", *more]


def test_the_ground_truth_scores_100_in_every_arm_and_wrong_arguments_0(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = BfclReplayer(tasks(2))
    perfect = tmp_path / "perfect"
    run = cli(*bench(openai_server, perfect, 2, "--variants", ",".join(ARMS)))
    assert run.returncode == 0, run.stderr[-3000:]
    lines = read_results(perfect)
    assert len(lines) == 2 * len(CATEGORIES) * len(ARMS)
    assert {line["variant"] for line in lines} == set(ARMS)
    assert [line for line in lines if line["score"] != 1.0] == []
    assert all(line["calls"] for line in lines if line["category"] != "irrelevance")
    multi = [line for line in lines if line["category"] == "multi_turn_base"]
    assert all(len(line["calls"]) == len(json.loads(line["gold"][0])) for line in multi)
    assert any("grammar" in body for body in openai_server.requests)  # the +gbnf arm's
    summary = (perfect / "summary.md").read_text()
    for label in ARMS:
        assert f"| simple_python | {label} | 2 | 100.0 | 34.2\u2013100.0 |" in summary
    assert (perfect / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Parallel tool calls off (the default" in summary

    openai_server.responder = BfclReplayer(tasks(2), wrong=True)
    wrong = tmp_path / "wrong"
    run = cli(*bench(openai_server, wrong, 2, "--variants", "transcript:tool_calls,prebuilt"))
    assert run.returncode == 0, run.stderr[-3000:]
    lines = read_results(wrong)
    assert len(lines) == 2 * len(CATEGORIES) * 2
    assert [line for line in lines if line["score"] != 0.0] == []
    kinds = {line["category"]: line["failure"] for line in lines}
    assert kinds["simple_python"] == "wrong_argument"
    assert kinds["irrelevance"] == "called_irrelevant"
    assert kinds["multi_turn_base"] in {"wrong_state", "wrong_results"}
    assert "| 0.0 | 0.0\u201365.8 |" in (wrong / "summary.md").read_text()


def test_constrained_decoding_names_every_arm_with_its_grammar(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = BfclReplayer(tasks(1, ["simple_python"]))
    out = tmp_path / "eval"
    args = ["eval", "--bench", "bfcl", "--categories", "simple_python", "--limit", "1"]
    args += ["--variants", "transcript,prebuilt", "--constrained-decoding", "gbnf"]
    run = cli(*args, "--base-url", openai_server.url, "--out", str(out), "--workers", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(line["variant"] for line in read_results(out)) == ["prebuilt", "transcript+gbnf"]


def test_the_report_says_whether_the_calls_of_a_reply_ran_at_once(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = BfclReplayer(tasks(1, ["parallel"]))
    args = ["eval", "--bench", "bfcl", "--categories", "parallel", "--limit", "1"]
    args += ["--variants", "transcript:tool_calls", "--base-url", openai_server.url]
    for setting, said in (("off", "calls off (the default"), ("on", "calls on (up to 3 calls")):
        out = tmp_path / setting
        more = ["--parallel-tool-calls", setting, "--max-parallel-calls", "3"]
        run = cli(*args, *more, "--out", str(out), "--workers", "1")
        assert run.returncode == 0, run.stderr[-3000:]
        assert said in (out / "summary.md").read_text()
        assert [line["score"] for line in read_results(out)] == [1.0]


@pytest.mark.kills
def test_a_killed_eval_resumes_without_running_a_task_twice(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.latency_s = 0.2
    openai_server.responder = BfclReplayer(tasks(2))
    out = tmp_path / "eval"
    args = bench(openai_server, out, 2, "--variants", "transcript,transcript:tool_calls")
    first = popen(*args, group=True)
    deadline = time.time() + 300
    while len(read_results(out)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)  # the command and its worker, at once
    first.communicate(timeout=60)
    done = {line["key"] for line in read_results(out)}
    total = 2 * len(CATEGORIES) * 2
    assert 3 <= len(done) < total
    again = cli(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{len(done)} pair(s) already done" in again.stdout
    keys = [line["key"] for line in read_results(out)]
    assert sorted(keys) == sorted(set(keys)) and len(keys) == total  # each once, none lost
    assert all(line["score"] == 1.0 for line in read_results(out))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--categories", "simple_python,simple_java"], "unknown BFCL category simple_java"),
        (["--categories", ","], "unknown BFCL category (none given)"),
        (["--bundled"], "give no question file or --bundled"),
        (["--variants", "transcript+json"], "unknown grammar +json"),
    ],
)
def test_bad_bench_input_is_one_line(args: list[str], fragment: str) -> None:
    one_line_error(cli("eval", "--bench", "bfcl", *args), fragment)


def test_the_arms_names_say_their_grammar() -> None:
    assert arm("transcript+gbnf").grammar == "gbnf"
    assert arm("notes:tool_calls+gbnf").label == "notes:tool_calls+gbnf"
    assert arm("transcript").grammar is None
    named = with_grammar(arms_of("transcript,transcript+gbnf,prebuilt"), "off")
    assert [a.label for a in named] == ["transcript", "transcript+gbnf", "prebuilt"]
    assert [a.grammar for a in named] == ["off", "gbnf", None]
    named = with_grammar(arms_of("transcript,transcript:tool_calls,prebuilt"), "gbnf")
    assert [a.label for a in named] == ["transcript+gbnf", "transcript:tool_calls+gbnf", "prebuilt"]
    with pytest.raises(UsageError):
        arm("transcript+xml")
