"""The command line starts at once: ``--version`` and every ``--help`` import neither LangGraph
nor LangChain nor the OpenAI client, and ``threads``/``show`` only what reading needs. Checked by
the modules a fresh interpreter holds afterwards (no timing here; bench/ measures it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reactgraph.app import cli

# Subprocesses: `make test` runs them, `make test-quick` leaves them out.
pytestmark = pytest.mark.slow

HEAVY = ("langgraph", "langchain", "langchain_core", "langchain_openai", "openai", "tiktoken")
# Reading a run needs the graph (LangGraph, langchain-core) and SQLite, never these.
NOT_FOR_READING = (
    "openai",
    "langchain_openai",
    "psycopg",
    "mcp",
    "langchain_mcp_adapters",
    "reactgraph.app.recipe",
    "reactgraph.app.pool",
    "reactgraph.app.options",
    "reactgraph.tools.mcp",
)

PROBE = """
import json, sys
from reactgraph.app.cli import main
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def modules_after(*argvs: list[str], cwd: Path | None = None) -> set[str]:
    """The modules a fresh interpreter has imported after running these command lines."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    return set(json.loads(result.stderr.strip().splitlines()[-1]))


def tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def commands() -> list[str]:
    parser = cli.make_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return list(sub.choices)


def test_version_and_every_help_import_no_langgraph_or_langchain() -> None:
    argvs = [["--version"], ["--help"], *([name, "--help"] for name in commands())]
    loaded = modules_after(*argvs)
    assert not tops(loaded) & set(HEAVY), sorted(tops(loaded) & set(HEAVY))
    assert "reactgraph.app.cli" in loaded and "reactgraph.app.flags" in loaded


def test_the_parser_and_the_registry_import_no_langgraph() -> None:
    probe = "import sys, reactgraph.app.cli, reactgraph.variants, reactgraph.storage.address\n"
    probe += "print(sorted({m.split('.')[0] for m in sys.modules}))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert not {name for name in HEAVY if f"'{name}'" in result.stdout}, result.stdout


def test_threads_and_show_import_only_what_reading_needs(tmp_path: Path) -> None:
    from tests.fakes import demo_db

    db = demo_db(tmp_path)
    loaded = modules_after(["threads", "--db", db], ["show", "t1", "--db", db], cwd=tmp_path)
    assert "reactgraph.app.viewing" in loaded and "langgraph" in tops(loaded)
    assert not {m for m in NOT_FOR_READING if m in loaded or m in tops(loaded)}


def test_threads_and_show_without_a_database_import_no_langgraph(tmp_path: Path) -> None:
    """Pointed at a database that does not exist, ``threads`` and ``show`` say so before
    anything of LangGraph or LangChain loads (it was 4.6 s to say it)."""
    missing = str(tmp_path / "none.sqlite")
    loaded = modules_after(["threads", "--db", missing], ["show", "t1", "--db", missing])
    assert "reactgraph.app.viewing" in loaded and "reactgraph.app.console" in loaded
    assert not tops(loaded) & set(HEAVY), sorted(tops(loaded) & set(HEAVY))
    assert not (tmp_path / "none.sqlite").exists()


def test_the_metadata_keys_are_the_builds_own() -> None:
    from reactgraph import build, variants

    assert (build.VARIANT_KEY, build.MODEL_KEY) == (variants.VARIANT_KEY, variants.MODEL_KEY)


def test_the_console_scripts_version_loads_neither_the_parser_nor_the_registry() -> None:
    """``reactgraph --version`` (the console script, ``reactgraph.app.entry``) answers from the
    package's metadata before the parser, the registry or ``importlib.metadata`` loads."""
    probe = "import json, sys\nsys.argv = ['reactgraph', '--version']\n"
    probe += "from reactgraph.app.entry import main\nmain()\n"
    probe += "print(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"reactgraph {cli.package_version()}\n"
    loaded = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert "reactgraph.app.entry" in loaded
    heavy = {"reactgraph.app.cli", "reactgraph.variants", "reactgraph.settings", "email"}
    assert not {m for m in loaded if m in heavy or m.split(".")[0] in heavy} | (
        tops(loaded) & set(HEAVY)
    )
