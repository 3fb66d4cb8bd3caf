"""Every tool form a user brings, in every variant, under ``invoke`` and ``ainvoke``: the tool is
called with what the model wrote, and its result is the Observation.

One row per form (``FORMS``); a new form the loop accepts is one more row, and every form that
already worked keeps being checked with it. The MCP rows are the tools of a real MCP server as
``langchain-mcp-adapters``' ``MultiServerMCPClient.get_tools()`` returns them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import CallbackManagerForToolRun
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import (
    BaseTool,
    InjectedToolCallId,
    StructuredTool,
    Tool,
    ToolException,
    tool,
)
from langgraph.prebuilt import InjectedState
from pydantic import BaseModel, Field

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.calling.binding import parameters
from tests.fakes import Runner, action, answer, call, fake_model

Log = list[tuple[str, Any]]
SPAN = {
    "type": "object",
    "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
    "required": ["start", "end"],
}


@dataclass(frozen=True)
class Form:
    """A tool form: how to make one that records its calls in a log, what the model writes
    after ``Action: <name>[``, what the tool must be called with, and the Observation."""

    id: str
    make: Callable[[Log], BaseTool]
    writes: str
    called_with: Any
    observation: str
    artifact: Any = None


def finder(log: Log) -> Callable[[str], str]:
    def search(query: str) -> str:
        """Look up a fact."""
        log.append(("search", query))
        return f"found {query}"

    return search


def async_finder(log: Log) -> Callable[[str], Any]:
    async def search(query: str) -> str:
        log.append(("search", query))
        await asyncio.sleep(0)
        return f"found {query}"

    return search


def spanner(log: Log) -> Callable[..., str]:
    def years(start: int, end: int) -> str:
        log.append(("years", (start, end)))
        return f"{end - start} years"

    return years


class Query(BaseModel):
    query: str = Field(description="what to look up")


class Span(BaseModel):
    start: int
    end: int = Field(description="last year")


def decorated(log: Log) -> dict[str, BaseTool]:
    """The ``@tool`` forms, by name."""

    @tool
    def now() -> str:
        """The time."""
        log.append(("now", ()))
        return "noon"

    @tool
    def shout(text: str) -> str:
        """Upper-case the text."""
        log.append(("shout", text))
        return text.upper()

    @tool
    def double(n: int) -> int:
        """Double an integer."""
        log.append(("double", n))
        return 2 * n

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        log.append(("add", (a, b)))
        return a + b

    @tool
    async def ashout(text: str) -> str:
        """Upper-case the text, asynchronously."""
        log.append(("ashout", text))
        return text.upper()

    @tool(response_format="content_and_artifact")
    def fetch(url: str) -> tuple[str, dict[str, Any]]:
        """Fetch a page."""
        log.append(("fetch", url))
        return f"page {url}", {"url": url, "bytes": 12}

    @tool
    def probe(
        text: str,
        call_id: Annotated[str, InjectedToolCallId],
        question: Annotated[str, InjectedState("question")],
    ) -> str:
        """Probe what the graph gives a tool."""
        log.append(("probe", (text, call_id, question)))
        return f"{text} for {question} as {call_id}"

    @tool
    def fragile(text: str) -> str:
        """Fails on purpose."""
        log.append(("fragile", text))
        raise ToolException(f"cannot do {text}")

    return {t.name: t for t in (now, shout, double, add, ashout, fetch, probe, fragile)}


def handled(log: Log) -> BaseTool:
    fragile = decorated(log)["fragile"]
    fragile.handle_tool_error = True
    return fragile


class Subclassed(BaseTool):
    """The subclass form of older LangChain tools: no ``args_schema``, a typed ``_run``."""

    name: str = "search"
    description: str = "look up a fact"
    log: Any = None

    def _run(self, query: str, run_manager: CallbackManagerForToolRun | None = None) -> str:
        return finder(self.log)(query)


class SubclassedWithConfig(Subclassed):
    def _run(self, query: str, config: RunnableConfig) -> str:  # type: ignore[override]
        return finder(self.log)(query)


class Variadic(Subclassed):
    def _run(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        self.log.append(("search", args))
        return f"found {args[0]}"


def by(name: str) -> Callable[[Log], BaseTool]:
    return lambda log: decorated(log)[name]


FACT = "look up a fact"
SEARCHED = ("search", "Eiffel Tower")
FOUND = "found Eiffel Tower"
YEARS = '{"start": 1889, "end": 1937}'
FORMS = [
    Form("Tool", lambda log: Tool(name="search", func=finder(log), description=FACT),
         "Eiffel Tower", SEARCHED, FOUND),
    Form("Tool.from_function",
         lambda log: Tool.from_function(func=finder(log), name="search", description=FACT),
         "a [b], c", ("search", "a [b], c"), "found a [b], c"),
    Form("Tool-async-only",
         lambda log: Tool(name="search", func=None, coroutine=async_finder(log), description=FACT),
         "Eiffel Tower", SEARCHED, FOUND),
    Form("Tool-args_schema",
         lambda log: Tool(name="search", func=finder(log), description=FACT, args_schema=Query),
         "x y", ("search", "x y"), "found x y"),
    Form("StructuredTool.from_function-one-str",
         lambda log: StructuredTool.from_function(finder(log)),
         '{"q": 1}', ("search", '{"q": 1}'), 'found {"q": 1}'),
    Form("tool-0-args", by("now"), "anything", ("now", ()), "noon"),
    Form("tool-1-arg", by("shout"), "a, b: [c]", ("shout", "a, b: [c]"), "A, B: [C]"),
    Form("tool-1-int-arg", by("double"), "21", ("double", 21), "42"),
    Form("tool-several-args", by("add"), '{"a": 40, "b": 2}', ("add", (40, 2)), "42"),
    Form("pydantic-args_schema",
         lambda log: StructuredTool(name="years", description="Years", args_schema=Span,
                                    func=spanner(log)),
         YEARS, ("years", (1889, 1937)), "48 years"),
    Form("json-schema-args_schema",
         lambda log: StructuredTool(name="years", description="Years", args_schema=SPAN,
                                    func=spanner(log)),
         YEARS, ("years", (1889, 1937)), "48 years"),
    Form("async-only", by("ashout"), "hi", ("ashout", "hi"), "HI"),
    Form("content_and_artifact", by("fetch"), "a.html", ("fetch", "a.html"), "page a.html",
         artifact={"url": "a.html", "bytes": 12}),
    Form("InjectedToolCallId-InjectedState", by("probe"), "hello",
         ("probe", ("hello", "t1/1/1", "Q?")), "hello for Q? as t1/1/1"),
    Form("ToolException", by("fragile"), "x", ("fragile", "x"),
         "Error: fragile failed: cannot do x"),
    Form("ToolException-handle_tool_error", handled, "x", ("fragile", "x"), "cannot do x"),
    Form("BaseTool-subclass", lambda log: Subclassed(log=log), "Eiffel Tower", SEARCHED, FOUND),
    Form("BaseTool-subclass-config", lambda log: SubclassedWithConfig(log=log),
         "Eiffel Tower", SEARCHED, FOUND),
    Form("BaseTool-subclass-*args", lambda log: Variadic(log=log),
         "Eiffel Tower", ("search", ("Eiffel Tower",)), FOUND),
]  # fmt: skip
# The MCP server's tools as the adapters load them: (tool, what the model writes, Observation).
MCP_FORMS = [("pid", "", None), ("shout", "hi there", "HI THERE"), ("add", '{"a": 4, "b": 2}', "6")]


def run_one(run: Runner, variant: str, tools: list[BaseTool], name: str, writes: str) -> dict:
    """One Action of the tool ``name``, then a final answer: the Action's turn record."""
    model = fake_model(action(name, writes), answer("done"))
    graph = build_graph(variant, model=model, tools=tools)
    out = run(graph, {"question": "Q?"}, {"configurable": {"thread_id": "t1"}})
    assert out["status"] == "answered", out
    assert len(model.calls) == 2
    return out["turns"][0]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("form", FORMS, ids=[f.id for f in FORMS])
def test_the_tool_gets_what_the_model_wrote_and_its_result_is_the_observation(
    form: Form, variant: str, run: Runner
) -> None:
    log: Log = []
    made = form.make(log)
    turn = run_one(run, variant, [made], made.name, form.writes)
    assert log == [form.called_with]
    assert turn["action"] == made.name and turn["action_input"] == form.writes
    assert turn["observation"] == form.observation
    assert turn.get("artifact") == form.artifact


@pytest.fixture(scope="module")
def mcp_tools(http_server: Any) -> dict[str, BaseTool]:
    pytest.importorskip("langchain_mcp_adapters")
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient({"test": http_server.connection()})
    return {t.name: t for t in asyncio.run(client.get_tools())}


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("name", "writes", "observation"), MCP_FORMS, ids=["0", "1", "several"])
def test_mcp_tools_as_the_adapters_load_them(
    mcp_tools: dict[str, BaseTool],
    name: str,
    writes: str,
    observation: str | None,
    variant: str,
    run: Runner,
) -> None:
    turn = run_one(run, variant, list(mcp_tools.values()), name, writes)
    if observation is None:  # the server's pid: a number, not ours
        assert turn["observation"].isdigit()
    else:
        assert turn["observation"] == observation


def native_args(made: BaseTool, writes: str) -> dict[str, Any]:
    """The arguments a tool-calling model sends for what a text-format model writes: by the
    schema the tool is bound with (the one argument's value, typed; or the JSON object)."""
    params = parameters(made)
    if not params:
        return {}
    if len(params) > 1:
        return json.loads(writes)
    ((name, spec),) = params.items()
    return {name: writes if spec.get("type", "string") == "string" else json.loads(writes)}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("form", FORMS, ids=[f.id for f in FORMS])
def test_every_form_as_a_native_tool_call(form: Form, variant: str, run: Runner) -> None:
    log: Log = []
    made = form.make(log)
    args = native_args(made, form.writes)
    model = fake_model(call(made.name, args), answer("done"))
    graph = build_graph(variant, model=model, tools=[made], action_format="tool_calls")
    out = run(graph, {"question": "Q?"}, {"configurable": {"thread_id": "t1"}})
    assert out["status"] == "answered", out
    (schema,) = [
        s for s in model.calls[0]["options"]["tools"] if s["function"]["name"] == made.name
    ]
    assert set(schema["function"]["parameters"]["properties"]) == set(parameters(made))
    turn = out["turns"][0]
    assert log == [form.called_with]
    assert turn["args"] == args and turn["action_input"] == (form.writes if args else "")
    assert turn["observation"] == form.observation
    assert turn.get("artifact") == form.artifact
