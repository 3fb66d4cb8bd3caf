"""The small things a new user meets first: --version, defaults in --help, the docs' command
block matching --help, drawings to a bad path, --context-window, warnings said once and in one
line, the threads listing, and how to open the notebooks."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from reactgraph import REGISTRY, VARIANTS
from tests.fakes import FakeOpenAIServer, seed_responder
from tests.inprocess import run_main
from tests.test_cli import REPO, cli, one_line_error

# Subprocesses and servers: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow

FLAG = re.compile(r"(?<![\w-])(--?[a-z][a-z-]*)")


def test_version() -> None:
    result = run_main("--version")
    assert result.returncode == 0 and re.fullmatch(r"reactgraph \d+\.\d+\.\d+\S*\n", result.stdout)


def test_help_shows_the_defaults() -> None:
    text = " ".join(run_main("ask", "--help").stdout.split())
    assert "(default: transcript)" in text and "(default: runs/reactgraph.sqlite)" in text
    assert "(default: 10.0)" in text and "(default: 60.0)" in text
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "(default: 8)" in " ".join(run_main("batch", "--help").stdout.split())


def readme_commands() -> dict[str, str]:
    """Each command's text in the docs' command-line block (its line and continuations)."""
    readme = (REPO / "docs" / "cli.md").read_text("utf-8")
    section = readme.split("## The command line", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        line = line.split("  #", 1)[0]
        if line.startswith("reactgraph "):
            words = line.split()[1:]
            current = "" if words[0].startswith(("[", "-")) else words.pop(0)
            commands[current] = commands.get(current, "") + " " + " ".join(words)
        else:
            commands[current] += " " + line.strip()
    return commands


def help_flags(command: str) -> set[str]:
    text = run_main(*([command] if command else []), "--help").stdout
    options = text.split("options:", 1)[1]
    return set(FLAG.findall(options)) - {"-h", "--help"}


def test_the_readme_names_every_command_and_flag_that_help_has_and_no_other() -> None:
    commands = readme_commands()
    listed = run_main("--help").stdout.split("{", 1)[1].split("}", 1)[0].split(",")
    assert set(commands) == {"", *listed}
    for command, text in commands.items():
        assert set(FLAG.findall(text)) == help_flags(command), command
    variants = re.search(r"--variant ([\w|]+)", commands["ask"])
    assert variants is not None and variants.group(1).split("|") == list(VARIANTS)


def test_a_drawing_to_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "folder" / "x.png"
    one_line_error(run_main("graph", "notes", "--png", str(target)), f"cannot write {target}")


def window_variants() -> list[str]:
    return [name for name, spec in REGISTRY.items() if spec.setting("context_window")]


@pytest.mark.parametrize("command", ["ask", "batch"])
def test_context_window_only_for_variants_that_have_one(command: str, tmp_path: Path) -> None:
    other = next(name for name in VARIANTS if name not in window_variants())
    args = ["q"] if command == "ask" else [str(tmp_path / "q.jsonl"), "--out", "r.jsonl"]
    result = run_main(
        command,
        *args,
        "--variant",
        other,
        "--context-window",
        "32000",
        "--base-url",
        "http://127.0.0.1:9/v1",
    )
    one_line_error(result, f"--context-window does not apply to the {other} variant")
    assert ", ".join(window_variants()) in result.stderr


def test_context_window_is_used_and_reading_threads_warns_of_nothing(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    db = str(tmp_path / "runs.sqlite")
    for variant in window_variants():
        run = run_main(
            "ask",
            "How many years?",
            "--variant",
            variant,
            "--model",
            "local-model",
            "--context-window",
            "32000",
            "--base-url",
            openai_server.url,
            "--db",
            db,
        )
        assert run.returncode == 0, run.stderr
        assert "context window" not in run.stderr
    questions = tmp_path / "q.jsonl"
    questions.write_text('"How many years?"\n')
    batch = run_main(
        "batch",
        str(questions),
        "--out",
        str(tmp_path / "r.jsonl"),
        "--variant",
        window_variants()[0],
        "--model",
        "my-local-model",
        "--context-window",
        "32000",
        "--base-url",
        openai_server.url,
    )
    assert batch.returncode == 0 and "context window" not in batch.stderr, batch.stderr
    threads = run_main("threads", "--db", db)
    assert threads.returncode == 0 and threads.stderr == ""
    assert threads.stdout.count("answered") == len(window_variants())


def test_tiktoken_offline_is_one_warning_line(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """No encoding cached and no network (a proxy that refuses): one line, then estimates."""
    openai_server.responder = seed_responder
    offline = {
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    variant = window_variants()[0]
    run = cli(
        "ask",
        "How many years?",
        "--variant",
        variant,
        "--base-url",
        openai_server.url,
        "--db",
        str(tmp_path / "runs.sqlite"),
        env=offline,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "o200k_base: cannot download it" in lines[0]
    assert "cl100k_base" in lines[0] and "estimated" in lines[0]
    assert "HTTPSConnectionPool" not in run.stderr


def test_the_threads_listing_cuts_a_long_question_at_a_word(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    db = str(tmp_path / "runs.sqlite")
    question = "How many years after the Eiffel Tower was completed " * 3 + "did it open?"
    run = run_main("ask", question, "--base-url", openai_server.url, "--db", db)
    assert run.returncode == 0, run.stderr
    listing = run_main("threads", "--db", db).stdout.splitlines()
    row = next(line for line in listing if "How" in line)
    shown = row.split("answered", 1)[1].split(None, 1)[1].rstrip()
    assert shown.endswith("…")
    assert question.startswith(shown[:-1]) and question[len(shown) - 1] == " "


def test_clip() -> None:
    from reactgraph.app.console import clip

    assert clip("short", 10) == "short"
    assert clip("one two three four", 12) == "one two…"
    assert clip("a\nmulti-line\ttext here", 40) == "a multi-line text here"
    assert clip("x" * 30, 10) == "x" * 9 + "…"


def test_make_notebooks_opens_jupyterlab() -> None:
    dry = subprocess.run(
        ["make", "-n", "notebooks"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert dry.returncode == 0 and ".venv/bin/jupyter lab notebooks/" in dry.stdout
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    extras = pyproject["project"]["optional-dependencies"]
    assert any(requirement.startswith("jupyterlab") for requirement in extras["notebooks"])
    # Not among the test tools: its jsonschema plugins cost every MCP server and Ray process
    # seconds of CPU at import (see bench/README.md).
    assert not any(requirement.startswith("jupyterlab") for requirement in extras["dev"])
    assert "make notebooks" in (REPO / "docs" / "getting-started.md").read_text("utf-8")
    jupyter = REPO / ".venv" / "bin" / "jupyter"
    if (REPO / ".venv" / "bin" / "jupyter-lab").exists():  # `jupyter` alone comes with nbclient
        lab = subprocess.run([str(jupyter), "lab", "--version"], capture_output=True, text=True)
        assert lab.returncode == 0, lab.stderr
