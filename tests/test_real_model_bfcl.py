"""``reactgraph eval --bench bfcl`` on the real SmolLM2-135M behind llama.cpp's server with
``--chat_format chatml-function-calling`` (``make test-real-model``, ``REACTGRAPH_REAL_MODEL=1``;
skipped elsewhere): a few tasks of each single-turn category in the text format with and without
the grammar, the tool_calls format and the prebuilt agent, every task scored by the leaderboard's
rules. The model's figures are not asserted (docs/benchmarks.md has them): what is asserted is
that every task ends scored, with its calls, tokens and time, and the report says so."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactgraph.app.eval.bfcl_run import FAILURE_KINDS
from reactgraph.app.eval.run import read_results
from tests.llama_server import ALIAS, LlamaServer, available
from tests.test_cli import cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("REACTGRAPH_REAL_MODEL") != "1" or available() is not None,
        reason=available() or "set REACTGRAPH_REAL_MODEL=1 (make test-real-model)",
    ),
]
CATEGORIES = ["simple_python", "multiple", "parallel", "irrelevance"]
ARMS = ["transcript", "transcript+gbnf", "transcript:tool_calls", "prebuilt"]
# The prebuilt agent sends its tool calls back with null content, which this server refuses.
NULL_CONTENT = "Input should be a valid string"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama-bfcl") / "server.log"
    running = LlamaServer(log, threads=2, chat_format="chatml-function-calling").start()
    yield running
    running.stop()


def test_a_sample_of_every_single_turn_category_in_every_arm(
    server: LlamaServer, tmp_path: Path
) -> None:
    out = tmp_path / "bfcl"
    args = ["eval", "--bench", "bfcl", "--categories", ",".join(CATEGORIES), "--limit", "2"]
    args += ["--variants", ",".join(ARMS), "--max-turns", "3", "--max-completion-tokens", "96"]
    args += ["--timeout", "600", "--model-retries", "1", "--workers", "1", "--concurrency", "1"]
    args += ["--base-url", server.url, "--model", ALIAS, "--out", str(out)]
    environment = {"LANGCHAIN_OPENAI_STREAM_CHUNK_TIMEOUT_S": "3600"}
    run = cli(*args, env=environment, cwd=tmp_path, timeout=7200)
    lines = read_results(out)
    assert len(lines) == 2 * len(CATEGORIES) * len(ARMS), run.stderr[-3000:]
    for line in lines:
        assert line["score"] in (0.0, 1.0)
        assert line["failure"] is None or line["failure"] in FAILURE_KINDS
        assert (line["failure"] is None) == (line["score"] == 1.0)
        assert isinstance(line["calls"], list)
        if line["error"] is not None:
            assert line["variant"] == "prebuilt" and NULL_CONTENT in line["error"], line
        else:
            assert line["total_tokens"] > 0 and line["seconds"] > 0
    summary = (out / "summary.md").read_text()
    for arm in ARMS:
        assert f"| simple_python | {arm} | 2 |" in summary
    print("\n".join(re.findall(r"^\|.*\|$", summary, re.M)))
