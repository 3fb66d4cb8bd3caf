"""Ctrl-C at every moment of a ``batch`` or ``eval`` start-up, and as it ends: exit 130 and the
hint (or the command's own code once it has ended), never a traceback or a death by the signal,
and no process of the command's group alive when it has exited: no worker, no starting worker,
no resource tracker, no MCP server. A re-run then answers every question once.

The moments that can be seen are reached by markers: SIGINT sent before the interpreter runs a
line of ours, the database made, an MCP server up, a worker process starting, the first model
call. Between them, Ctrl-Cs are spaced in time across the start-up as measured in this very
test (the marker run), and each moment they land on is accepted: what is asserted holds at any.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeOpenAIServer, seed_responder
from tests.test_cli import cli, lines_of, popen
from tests.test_interrupts import (
    WITHIN_S,
    alive_in_group,
    held_from,
    holding_tool,
    interrupted_many,
    many,
    rerun_does_the_rest,
    until,
)

# Real processes interrupted at start-up: `make test-kills` runs them, `make test` does not.
pytestmark = [pytest.mark.slow, pytest.mark.kills]

SPACED = 3  # Ctrl-Cs spaced in time across the measured start-up, besides the markers
LAST_LINE = {"batch": "questions ", "eval": "wrote "}  # the progress bar; the report's files


def marker(
    moment: str, process: Any, database: Path, mcp_tag: str, called: Callable[[], bool]
) -> Callable[[], bool]:
    """Whether the start-up of ``process`` has come to ``moment``."""
    from tests.mcp_servers import processes
    from tests.test_pool import workers_of

    return {
        "the database made": database.exists,
        "an MCP server up": lambda: bool(processes(mcp_tag)),
        "a worker starting": lambda: bool(workers_of(process.pid)),
        "first call": called,
    }[moment]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("command", ["batch", "eval"])
def test_a_ctrl_c_at_any_moment_of_the_start_up(
    openai_server: FakeOpenAIServer, tmp_path: Path, workers: int, command: str
) -> None:
    pytest.importorskip("langchain_mcp_adapters")
    from tests.mcp_servers import stdio

    gate = held_from(1)  # no run gets past its first model call: all there is, is start-up
    openai_server.responder = gate
    tag = f"start-{tmp_path.parent.name}-{tmp_path.name}"  # unique across workers
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"local": stdio(tag)}}))
    args, lines = many(openai_server, tmp_path, command, workers)
    args += ["--mcp", str(servers)]
    database = tmp_path / "r.sqlite" if command == "batch" else lines.parent / "runs.sqlite"

    def stopped(process: subprocess.Popen[str], moment: str) -> None:
        # 130, the hint, no survivor; no run got past its first call, so none is kept.
        assert interrupted_many(process, lines) == 0, moment

    stopped(popen(*args, held=True, group=True), "before the first line")
    # Each marker in a run of its own (the database first: it exists from then on); the last
    # one, the first model call, measures the whole start-up.
    start_up = 0.0
    for moment in ["the database made", "an MCP server up", "a worker starting", "first call"]:
        if moment == "a worker starting" and workers == 1:
            continue  # one worker runs in the command's own process
        before, began = len(gate.held), time.monotonic()
        process = popen(*args, group=True)
        called = functools.partial(lambda n: len(gate.held) > n, before)
        until(marker(moment, process, database, tag, called), process)
        start_up = time.monotonic() - began
        stopped(process, moment)
    for n in range(SPACED):  # the moments between, spaced across the start-up measured
        process = popen(*args, group=True)
        time.sleep(start_up * (n + 0.5) / SPACED)  # where the Ctrl-C lands, not a wait for work
        stopped(process, f"{n + 0.5}/{SPACED} of the start-up")

    gate.open()
    rerun_does_the_rest(args, lines, timeout=600)  # a bound against a hang: slow when loaded


def test_the_mcp_servers_of_a_batch_end_with_it(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Mid-run, the servers the workers started for a tool call are gone at the exit too."""
    from tests.mcp_servers import processes

    tag = f"held-{tmp_path.parent.name}-{tmp_path.name}"
    marks, servers = holding_tool(openai_server, tmp_path, tag)
    args, lines = many(openai_server, tmp_path, "batch", 2)
    args += ["--mcp", str(servers), "--tool-timeout", "600"]
    process = popen(*args, group=True)
    until((marks / "entered").exists, process)  # a worker's server is in its tool call
    interrupted_many(process, lines)
    assert not processes(tag)
    (marks / "release").touch()
    rerun_does_the_rest(args, lines, timeout=600)  # a bound against a hang: slow when loaded


@pytest.mark.parametrize("command", ["batch", "eval"])
def test_a_ctrl_c_as_the_command_ends_is_never_a_death_by_the_signal(
    openai_server: FakeOpenAIServer, tmp_path: Path, command: str
) -> None:
    """Python tears down its modules after setting SIGINT back to the default (seconds on a
    loaded machine): a Ctrl-C then killed the process silently, or was lost in a finalizer
    (exit 0). One sent when the command's last line comes lands in that end (or just before
    it): it is 130 and the hint, or the command's own 0 if the process had ended already."""
    openai_server.responder = seed_responder
    args, lines = many(openai_server, tmp_path, command, 1)
    assert cli(*args).returncode == 0  # every question done: a re-run only starts and ends
    for _ in range(3):
        process = popen(*args, group=True)
        assert process.stdout is not None
        for line in process.stdout:  # its last line, written as it ends
            if LAST_LINE[command] in line:
                break
        running = ctrl_c_frozen(process)
        out, err = process.communicate(timeout=WITHIN_S)
        assert "Traceback" not in err and "Exception" not in err, err
        if running:  # it had not ended: the Ctrl-C is its to take
            assert process.returncode == 130, (process.returncode, out, err)
            assert "run the same command again" in err, err
        else:
            assert (process.returncode, err) == (0, ""), (process.returncode, out, err)
        assert not alive_in_group(process.pid)
    assert sorted(str(line["id"]) for line in lines_of(lines)) == ["0", "1", "2", "3"]


def ctrl_c_frozen(process: subprocess.Popen[str]) -> bool:
    """A terminal's Ctrl-C to the command's group, which may have ended already; whether it
    had not. The group is stopped first (SIGSTOP), so what its state says still holds when the
    SIGINT comes (taken once it goes on, SIGCONT)."""
    stat = Path(f"/proc/{process.pid}/stat")
    os.killpg(process.pid, signal.SIGSTOP)
    until(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] in "TtZ")  # stopped, or ended
    state = stat.read_text().rsplit(")", 1)[1].split()[0]
    os.killpg(process.pid, signal.SIGINT)
    os.killpg(process.pid, signal.SIGCONT)
    return state != "Z"
