"""The README says what the code does: its settings table is the registry's, and every Python
example in it runs as written (in a folder of its own, beside the files it names)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from reactgraph.variants import settings_table
from tests.mcp_servers import stdio

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_settings_table_is_generated_from_the_variant_specs() -> None:
    assert settings_table() in README.read_text("utf-8"), (
        "README's settings table is out of date; paste reactgraph.variants.settings_table()"
    )


def python_examples() -> list[tuple[str, str]]:
    """Each ```python block of the README with the heading it is under."""
    found, heading = [], ""
    for part in re.split(r"(^```python\n.*?^```$)", README.read_text("utf-8"), flags=re.S | re.M):
        if part.startswith("```python"):
            found.append((heading, part.removeprefix("```python\n").removesuffix("```")))
        else:
            heading = next(
                (line[3:] for line in reversed(part.splitlines()) if line.startswith("## ")),
                heading,
            )
    return found


EXAMPLES = python_examples()


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
    "A short example": check_a_short_example,
    "Use it from Python": check_use_it_from_python,
    "A person approves each Action (human in the loop)": check_approvals,
    "Checkpoints and resuming": check_checkpoints,
    "MCP tools": check_mcp,
    "Real models": check_real_models,
    "Models that call tools natively": check_native_tool_calls,
}


def test_every_example_is_found() -> None:
    assert {heading for heading, _ in EXAMPLES} >= set(CHECKS)


@pytest.mark.parametrize(
    ("heading", "code"),
    [
        # The MCP example starts the test MCP server (a subprocess), twice.
        pytest.param(h, c, marks=[pytest.mark.slow] if "servers.json" in c else [], id=h)
        for h, c in EXAMPLES
    ],
)
def test_the_python_example_runs_as_written(
    heading: str, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")  # the examples build, never call, it
    if "servers.json" in code:
        Path("servers.json").write_text(json.dumps({"test": stdio()}))
    names: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(code, f"README.md ({heading})", "exec"), names)  # our own README, not input
    CHECKS.get(heading, lambda _names: None)(names)
