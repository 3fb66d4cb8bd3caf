"""The README and the docs say what the code does: the settings table is the registry's, the
exit-status table is the command line's, and every code block in README.md, docs/*.md,
CONTRIBUTING.md and bench/README.md is run or checked as written: a Python block runs (in a
folder of its own, beside the files it names), a command of a shell block parses with the
command line's own parser (a `make` target exists in the Makefile, a file it copies exists), a
JSON block is JSON. A block of another kind (a drawing in text) fails the test until the test
knows what to do with it."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from reactgraph.variants import settings_table
from tests.mcp_servers import stdio

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Pages made of another file (pymdownx.snippets: `--8<-- "FILE"`) are checked as that file.
SNIPPET = re.compile(r'^--8<-- "([^"]+)"$', re.M)
PAGES = [
    README,
    ROOT / "CONTRIBUTING.md",
    ROOT / "bench" / "README.md",
    *sorted(p for p in (ROOT / "docs").glob("*.md") if not SNIPPET.search(p.read_text("utf-8"))),
]
# Kinds of block that are not code: text drawings.
NOT_CODE = {"text"}
# Its examples call a served graph: tests/test_served_to_agents.py runs them against one.
SERVED = "docs/served-to-agents.md"


def code_blocks(page: Path) -> list[tuple[str, str, str]]:
    """Each fenced block of ``page``: (the heading it is under, its language, its code)."""
    found, heading = [], ""
    parts = re.split(r"(^```[\w-]*\n.*?^```$)", page.read_text("utf-8"), flags=re.S | re.M)
    for part in parts:
        if part.startswith("```"):
            language, code = part[3:].split("\n", 1)
            found.append((heading, language, code.removesuffix("```")))
        else:
            heading = next(
                (
                    line.lstrip("#").strip()
                    for line in reversed(part.splitlines())
                    if re.match(r"#{1,3} ", line)
                ),
                heading,
            )
    return found


BLOCKS = [
    (page.relative_to(ROOT).as_posix(), heading, language, code)
    for page in PAGES
    for heading, language, code in code_blocks(page)
]


def test_the_settings_table_is_generated_from_the_variant_specs() -> None:
    page = ROOT / "docs" / "getting-started.md"
    assert settings_table() in page.read_text("utf-8"), (
        "docs/getting-started.md's settings table is out of date; paste "
        "reactgraph.variants.settings_table()"
    )


def test_the_exit_status_table_is_the_command_lines() -> None:
    from reactgraph.app.cli import exit_codes_table

    assert exit_codes_table() in (ROOT / "docs" / "cli.md").read_text("utf-8"), (
        "docs/cli.md's exit-status table is out of date; paste "
        "reactgraph.app.cli.exit_codes_table()"
    )


def test_the_readme_is_read_in_five_minutes() -> None:
    text = README.read_text("utf-8")
    assert len(text.splitlines()) <= 200
    assert len(text.split()) <= 1500


def check_a_short_example(names: dict[str, Any]) -> None:
    out = names["out"]
    assert (out["answer"], out["status"], len(out["turns"])) == ("48", "answered", 4)


def check_use_it_from_python(names: dict[str, Any]) -> None:
    out = names["out"]
    assert out["answer"] == "48" and out["status"] == "answered"
    assert out["thread_id"] == "t1" and len(out["turns"]) == 4


def check_checkpoints(names: dict[str, Any]) -> None:
    assert Path("runs/reactgraph.sqlite").is_file()
    assert len(names["llm"].calls) == 4  # the resume ran nothing again


def check_mcp(names: dict[str, Any]) -> None:
    assert {t.name for t in names["tools"]} >= {"shout", "add", "pid"}
    assert names["graph"].name == "transcript"


def check_real_models(names: dict[str, Any]) -> None:
    assert names["llm"].openai_api_base == "http://localhost:11434/v1"
    assert names["graph"].name == "transcript"


def check_a_real_model(names: dict[str, Any]) -> None:
    assert names["llm"].openai_api_base == "http://localhost:11434/v1"
    assert names["graph"].name == "notes"


def check_approvals(names: dict[str, Any]) -> None:
    (asked,) = names["request"]["action_requests"]
    assert (asked["name"], asked["args"]) == ("calculator", {"expression": "1937-1889"})
    assert names["out"]["answer"] == "48"
    assert names["out"]["turns"][2]["approval"] == {"decision": "approve", "by": "ada"}


def check_native_tool_calls(names: dict[str, Any]) -> None:
    out = names["out"]
    assert (out["answer"], out["status"]) == ("48", "answered")
    assert [t["action"] for t in out["turns"]] == ["search", "search", "calculator", None]
    assert len(names["llm"].calls) == 4


CHECKS = {
    ("README.md", "A short example"): check_a_short_example,
    ("README.md", "A real model"): check_a_real_model,
    ("docs/getting-started.md", "A short example"): check_a_short_example,
    ("docs/getting-started.md", "Use it from Python"): check_use_it_from_python,
    (
        "docs/chat-clients.md",
        "A person approves each Action (human in the loop)",
    ): check_approvals,
    ("docs/cli.md", "Checkpoints and resuming"): check_checkpoints,
    ("docs/mcp.md", "MCP tools"): check_mcp,
    ("docs/models.md", "Real models"): check_real_models,
    ("docs/tool-calls.md", "Native tool calls"): check_native_tool_calls,
}


def test_every_checked_example_is_found() -> None:
    python = {(page, heading) for page, heading, language, _ in BLOCKS if language == "python"}
    assert python >= set(CHECKS)


def test_every_block_is_of_a_kind_the_tests_know() -> None:
    kinds = {language for _, _, language, _ in BLOCKS}
    assert kinds <= {"python", "bash", "json", *NOT_CODE}, kinds


@pytest.mark.parametrize(
    ("page", "heading", "code"),
    [
        # The MCP example starts the test MCP server (a subprocess), twice.
        pytest.param(
            p, h, c, marks=[pytest.mark.slow] if "servers.json" in c else [], id=f"{p}:{h}"
        )
        for p, h, language, c in BLOCKS
        if language == "python" and p != SERVED
    ],
)
def test_the_python_example_runs_as_written(
    page: str, heading: str, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")  # the examples build, never call, it
    if "servers.json" in code:
        Path("servers.json").write_text(json.dumps({"test": stdio()}))
    names: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code, f"{page} ({heading})", "exec"), names)  # our own docs, not input
    CHECKS.get((page, heading), lambda _names: None)(names)


def shell_commands(code: str) -> list[list[str]]:
    """The commands of a shell block: comments dropped, continued lines joined, each line's
    commands split at ``&&`` and a trailing ``&``."""
    joined = re.sub(r"\\\n\s*", " ", code)
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in [*words, "&&"]:
            if word in {"&&", "&", ";"}:
                if command:
                    commands.append(command)
                command = []
            else:
                command.append(word)
    return commands


def make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text("utf-8")
    return set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M))


def check_command(words: list[str]) -> None:
    """One command of a docs shell block, checked without running it: reactgraph's arguments
    parse (the usage block of the command-line page, with its [OPTIONS], is compared with
    --help by tests/test_cli_help.py instead); make's targets exist; a copied file exists."""
    from reactgraph.app.cli import make_parser

    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        words = words[1:]  # VAR=value before the command
    program = Path(words[0]).name
    if program == "reactgraph":
        if any(w.startswith("[") or w in {"...", "COMMAND"} for w in words):
            return
        for word in words:  # a JSON file a flag reads as it parses (--answer-schema): one there
            if word.endswith(".json") and "/" not in word and not Path(word).exists():
                Path(word).write_text('{"type": "object"}', "utf-8")
        try:
            make_parser().parse_args(words[1:])
        except SystemExit as error:
            raise AssertionError(f"{shlex.join(words)}: does not parse") from error
    elif program == "make":
        targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        assert set(targets) <= make_targets(), words
    elif program == "cp":
        assert (ROOT / words[1]).exists(), words


@pytest.mark.parametrize(
    ("page", "heading", "code"),
    [pytest.param(p, h, c, id=f"{p}:{h}") for p, h, language, c in BLOCKS if language == "bash"],
)
def test_the_shell_commands_are_the_tools_own(page: str, heading: str, code: str) -> None:
    commands = shell_commands(code)
    assert commands, f"{page} ({heading}): no command"
    for words in commands:
        check_command(words)


@pytest.mark.parametrize(
    ("page", "heading", "code"),
    [pytest.param(p, h, c, id=f"{p}:{h}") for p, h, language, c in BLOCKS if language == "json"],
)
def test_the_json_examples_are_json(page: str, heading: str, code: str) -> None:
    assert isinstance(json.loads(code), dict)


def test_the_pictures_are_there() -> None:
    """Every picture a page shows is in the repository (the docs site's build fails on a
    missing one too, but the README is read on its own)."""
    for page in PAGES:
        text = page.read_text("utf-8")
        for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text):
            assert (page.parent / target).is_file(), f"{page.name}: {target}"


def test_the_drawings_are_the_variants() -> None:
    from reactgraph import VARIANTS

    drawings = ROOT / "docs" / "images" / "drawings"
    assert {p.stem for p in drawings.glob("*.png")} == set(VARIANTS)
    assert all(
        f"images/drawings/{v}.png" in (ROOT / "docs" / "variants.md").read_text() for v in VARIANTS
    )


def test_the_changelog_links_nothing_the_docs_site_cannot_follow() -> None:
    """CHANGELOG.md is pasted into docs/changelog.md, where a link relative to the repository's
    top (``docs/x.md``) points nowhere and fails ``mkdocs build --strict``: the changelog names
    pages in plain text."""
    text = (ROOT / "CHANGELOG.md").read_text("utf-8")
    relative = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    assert relative == []
