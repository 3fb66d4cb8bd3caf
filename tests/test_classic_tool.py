"""The classic ``Tool`` (one string in, the form of most ReAct tutorials) end to end: the seed's
scenario in every variant, from Python, from the command line (``--tools``) and from the
LangGraph server (``REACTGRAPH_TOOLS``); and a tool the loop cannot call, which must break
nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import StructuredTool, Tool
from pydantic import BaseModel, ConfigDict

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.vocabulary import prompts
from reactgraph.scripted import DEMO_REPLIES
from reactgraph.tools.loading import load_tools, tools_address, tools_from_env
from tests.fakes import (
    SEED_TOOL_CALLS,
    FakeOpenAIServer,
    Runner,
    action,
    answer,
    classic_seed_tools,
    fake_model,
)

ROOT = Path(__file__).resolve().parents[1]
CLASSIC = ("--tools", "tests.fakes:classic_seed_tools", "--no-default-tools")


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_seed_scenario_with_classic_tools(variant: str, run: Runner) -> None:
    log: list[tuple[str, str]] = []
    model = fake_model(*DEMO_REPLIES)
    graph = build_graph(variant, model=model, tools=classic_seed_tools(log))
    out = run(graph, {"question": "How many years apart?"}, {"configurable": {"thread_id": "t"}})
    assert len(model.calls) == 4
    assert log == SEED_TOOL_CALLS
    assert out["answer"] == "48" and out["status"] == "answered"
    observations = [t["observation"] for t in out["turns"][:3]]
    assert "1889" in observations[0] and "1937" in observations[1]
    assert observations[2] == "48"


class Opaque:
    """A type pydantic has no JSON schema for."""


class OpaqueArgs(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque


def called_then_search(
    run: Runner, variant: str, name: str, description: str, args_schema: Any
) -> tuple[dict[str, Any], Any, list[tuple[str, str]]]:
    """A run of ``variant`` whose model calls a tool ``name`` of this schema (with "x"), then the
    seed's search, then answers: the run's output, the model, and the calls either tool ran."""
    log: list[tuple[str, str]] = []
    tool = StructuredTool(
        name=name,
        description=description,
        args_schema=args_schema,
        func=lambda **kwargs: log.append((name, str(kwargs))),
    )
    model = fake_model(action(name, "x"), action("search", "Eiffel Tower"), answer("done"))
    graph = build_graph(variant, model=model, tools=[tool, *classic_seed_tools(log)])
    return run(graph, {"question": "Q?"}, {"configurable": {"thread_id": "t1"}}), model, log


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_tool_the_loop_cannot_call_is_one_observation_and_nothing_else_breaks(
    variant: str, run: Runner
) -> None:
    out, model, log = called_then_search(
        run, variant, "opaque", "Takes a Python object.", OpaqueArgs
    )
    first, second = out["turns"][0]["observation"], out["turns"][1]["observation"]
    assert first == prompts.TOOL_UNCALLABLE.format(
        name="opaque",
        expects="thing: Opaque",
        why="Cannot generate a JsonSchema for core_schema.IsInstanceSchema "
        f"(<class '{Opaque.__module__}.Opaque'>)",
    )
    assert "Eiffel Tower" in second
    assert log == [("search", "Eiffel Tower")]
    assert "opaque[input]: Takes a Python object." in model.prompts[0]
    assert out["status"] == "answered"


@pytest.mark.parametrize("properties", [5, ["a"], "a"])
def test_a_json_schema_whose_properties_are_not_an_object_is_one_observation(
    properties: Any, run: Runner
) -> None:
    schema = {"type": "object", "properties": properties}
    out, _, log = called_then_search(run, "transcript", "broken", "Its schema is broken.", schema)
    first = out["turns"][0]["observation"]
    assert (
        first.startswith("Error: broken cannot be called from an Action")
        and "not an object" in first
    )
    assert log == [("search", "Eiffel Tower")] and out["status"] == "answered"


def test_a_classic_tool_whose_function_takes_two_arguments_is_one_observation(
    run: Runner,
) -> None:
    """A classic ``Tool`` passes its function one string: a function of two would fail on
    every call, so its Observation says what it expects instead of Python's TypeError."""
    log: list[tuple[str, str]] = []
    two = Tool(name="two", func=lambda a, b: log.append(("two", a)), description="Two things.")
    hooked = Tool(name="hooked", func=lambda q, callbacks=None: q.upper(), description="Shout.")
    model = fake_model(action("two", "x"), action("hooked", "hi"), answer("done"))
    graph = build_graph("transcript", model=model, tools=[two, hooked])
    out = run(graph, {"question": "Q?"}, {"configurable": {"thread_id": "t1"}})
    first, second = out["turns"][0]["observation"], out["turns"][1]["observation"]
    assert first == prompts.TOOL_UNCALLABLE.format(
        name="two", expects="a, b", why="a classic Tool passes its function one string"
    )
    assert second == "HI" and log == [] and out["status"] == "answered"


def test_the_classic_tool_is_described_as_taking_one_string() -> None:
    model = fake_model(answer("done"))
    classic = Tool(name="search", func=str.upper, description="look up a fact")
    build_graph("transcript", model=model, tools=[classic]).invoke({"question": "Q?"})
    assert "search[input]: look up a fact\n" in model.prompts[0]


def test_tools_are_loaded_from_a_module_or_a_file(tmp_path: Path) -> None:
    names = [t.name for t in load_tools("tests.fakes:classic_seed_tools")]
    assert names == ["search", "calculator"]
    file = tmp_path / "mine.py"
    file.write_text(
        "from langchain_core.tools import Tool\n"
        "one = Tool(name='echo', func=lambda q: q, description='echo')\n"
        "both = [one, Tool(name='twice', func=lambda q: q * 2, description='twice')]\n"
    )
    assert [t.name for t in load_tools(f"{file}:one")] == ["echo"]
    assert [t.name for t in load_tools(f"{file}:both")] == ["echo", "twice"]
    assert tools_address(f"{file.name}:one") == f"{Path.cwd() / file.name}:one"
    assert tools_address("pkg.mod:name") == "pkg.mod:name"
    assert [t.name for t in tools_from_env({"REACTGRAPH_TOOLS": f"{file}:one {file}:both"})] == [
        "echo",
        "echo",
        "twice",
    ]


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("no_colon", "write module:attribute or path/to/file.py:attribute"),
        ("tests.fakes:", "write module:attribute"),
        ("missing/file.py:x", "missing/file.py: no such file"),
        ("no_such_module_here:x", "cannot import no_such_module_here (ModuleNotFoundError"),
        ("tests.fakes:nothing_here", "tests.fakes has no attribute 'nothing_here'"),
        ("tests.fakes:SEED", "is a list, not a langchain-core BaseTool"),
    ],
)
def test_a_bad_tools_address_is_one_line(address: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"^tools ") as caught:
        load_tools(address)
    assert says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_the_command_line_runs_the_seed_with_classic_tools(
    seed_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """``ask``, then a ``batch`` whose worker process loads them again."""
    from tests.test_cli import cli

    env = {"PYTHONPATH": str(ROOT)}
    db = str(tmp_path / "runs.sqlite")
    run = cli(
        "ask", "How many years apart?", "--base-url", seed_server.url, "--db", db, *CLASSIC, env=env
    )
    assert run.returncode == 0, run.stderr
    assert "Answer: 48\nStatus: answered" in run.stdout, run.stdout
    # The prompt lists the classic tools' own descriptions, not the bundled ones.
    first = json.dumps(seed_server.requests[0]["messages"])
    assert "Evaluate arithmetic, e.g. 2*(3+4)." in first
    assert "Observation: 48" in json.dumps(seed_server.requests[3]["messages"])
    questions, results = tmp_path / "q.jsonl", tmp_path / "out.jsonl"
    questions.write_text('{"id": "a", "question": "How many years apart?"}\n')
    run = cli(
        "batch", str(questions), "--out", str(results), "--base-url", seed_server.url,
        "--db", db, "--workers", "1", *CLASSIC, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (line,) = [json.loads(text) for text in results.read_text().splitlines()]
    assert line["answer"] == "48" and line["status"] == "answered", line
    assert "Evaluate arithmetic" in json.dumps(seed_server.requests[-1]["messages"])


@pytest.mark.slow
def test_a_bad_tools_flag_is_one_line_and_exit_2() -> None:
    from tests.inprocess import run_main

    run = run_main("ask", "q", "--base-url", "http://127.0.0.1:9/v1", "--tools", "nowhere.py:x")
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.endswith("tools nowhere.py: no such file"), run.stderr


@pytest.mark.slow
def test_a_tool_named_so_no_model_could_call_it_is_one_line_and_exit_2(tmp_path: Path) -> None:
    from tests.inprocess import run_main

    module = tmp_path / "weather.py"
    module.write_text(
        "from langchain_core.tools import Tool\n"
        "tools = [Tool(name='get weather', func=str, description='The weather.')]\n"
    )
    db = str(tmp_path / "runs.sqlite")
    base = ["--base-url", "http://127.0.0.1:9/v1", "--db", db, "--tools", f"{module}:tools"]
    run = run_main("ask", "q", *base)
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert "tool 'get weather' cannot be called by that name" in line, line
    assert "rename it (e.g. 'get_weather')" in line
