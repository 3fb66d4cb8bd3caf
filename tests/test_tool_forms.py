"""Any ``BaseTool`` as it comes, through ``build_graph`` under ``invoke`` and ``ainvoke``: pydantic
and JSON-schema arguments, zero, one and several of them; injected arguments filled as LangGraph's
``ToolNode`` fills them and never shown to the model; artifacts kept; a ``Command`` refused."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.tools import (
    BaseTool,
    InjectedToolArg,
    InjectedToolCallId,
    StructuredTool,
    tool,
)
from langgraph.prebuilt import InjectedState, InjectedStore, ToolRuntime
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from reactgraph import build_graph
from reactgraph.nodes.loop.deps import TOOL_NAME, check_tool_name
from reactgraph.nodes.vocabulary import prompts
from tests.fakes import Runner, action, answer, call, fake_model, prompt_text


def ask(run: Runner, tools: list[BaseTool], *replies: str, variant: str = "transcript", **kw: Any):
    model = fake_model(*replies, answer("done"))
    graph = build_graph(variant, model=model, tools=tools, **kw)
    return run(graph, {"question": "Q?"}, {"configurable": {"thread_id": "t1"}}), model


def observations(result: dict[str, Any]) -> list[str | None]:
    return [turn["observation"] for turn in result["turns"] if turn["kind"] != "answer"]


def json_tool(name: str, properties: dict[str, Any], body: Any, *, sync: bool) -> StructuredTool:
    """A tool whose args_schema is a JSON-schema dict, as MCP adapters make them."""
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    if sync:
        return StructuredTool(name=name, description=f"{name} it", args_schema=schema, func=body)

    async def coroutine(**kwargs: Any) -> Any:
        return body(**kwargs)

    return StructuredTool(
        name=name, description=f"{name} it", args_schema=schema, coroutine=coroutine
    )


@pytest.mark.parametrize("sync", [True, False], ids=["sync_body", "async_body"])
def test_json_schema_tools_with_zero_one_and_several_arguments(run: Runner, sync: bool) -> None:
    tools = [
        json_tool("now", {}, lambda: "noon", sync=sync),
        json_tool("shout", {"text": {"type": "string"}}, lambda text: text.upper(), sync=sync),
        json_tool("wait", {"seconds": {"type": "number"}}, lambda seconds: seconds * 2, sync=sync),
        json_tool(
            "add",
            {"a": {"type": "integer"}, "b": {"type": "integer"}},
            lambda a, b: a + b,
            sync=sync,
        ),
    ]
    result, _ = ask(
        run,
        tools,
        action("now", ""),
        action("now", "ignored input"),
        action("shout", '{"text": "kept as typed"}'),
        action("wait", "1.5"),
        action("add", '{"a": 2, "b": 3}'),
        action("add", "2 3"),
    )
    got = observations(result)
    assert got[:5] == ["noon", "noon", '{"TEXT": "KEPT AS TYPED"}', "3.0", "5"]
    assert got[5].startswith("Error: add expects a JSON object with its arguments")
    assert '{"a": integer, "b": integer}' in got[5]
    assert result["status"] == "answered"


def test_pydantic_tools_with_zero_one_and_several_arguments(run: Runner) -> None:
    @tool
    def now() -> str:
        """The time."""
        return "noon"

    @tool
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    result, model = ask(
        run,
        [now, shout, add],
        action("now", "whatever"),
        action("shout", "a, b: [c]"),
        action("add", '{"a": 40, "b": 2}'),
    )
    assert observations(result) == ["noon", "A, B: [C]", "42"]
    # A tool of several arguments says how to write them; the others do not need to.
    first = prompt_text(model.calls[0]["messages"])
    assert 'add[input]: Add two integers. Input: a JSON object {"a": integer, "b": integer}.' in (
        first
    )
    assert "shout[input]: Upper-case the text.\n" in first


def test_injected_arguments_are_filled_like_tool_node_and_never_shown(run: Runner) -> None:
    seen: dict[str, Any] = {}

    @tool
    def probe(
        text: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        whole: Annotated[dict, InjectedState],
        question: Annotated[str, InjectedState("question")],
        runtime: ToolRuntime,
        secret_flag: Annotated[str, InjectedToolArg] = "default-secret",
    ) -> str:
        """Probe what the graph gives a tool."""
        seen.update(
            text=text,
            id=tool_call_id,
            whole=sorted(whole),
            question=question,
            runtime_id=runtime.tool_call_id,
            runtime_state=runtime.state["question"],
            runtime_config=runtime.config["configurable"]["idempotency_key"],
            secret=secret_flag,
        )
        return "probed"

    @tool
    def pair(
        a: int, b: int, call_id: Annotated[str, InjectedToolCallId], runtime: ToolRuntime
    ) -> str:
        """Pair two integers."""
        return f"{a},{b},{call_id == runtime.tool_call_id}"

    result, model = ask(
        run,
        [probe, pair],
        action("probe", "hello"),
        action("pair", '{"a": 1, "b": 2, "secret_flag": "forged", "call_id": "forged"}'),
    )
    assert observations(result) == ["probed", "1,2,True"]
    assert seen["text"] == "hello"
    assert seen["id"] == seen["runtime_id"] == seen["runtime_config"] == "t1/1/1"
    assert {"question", "settings", "turns"} <= set(seen["whole"])
    assert seen["question"] == seen["runtime_state"] == "Q?"
    assert seen["secret"] == "default-secret"
    opening = model.prompts[0]  # the tool descriptions, before any reply of the model
    for hidden in ("tool_call_id", "whole", "runtime", "secret_flag", "call_id"):
        assert hidden not in opening
    assert 'Input: a JSON object {"a": integer, "b": integer}.' in model.prompts[0]


def test_injected_store_is_the_graphs_store(run: Runner) -> None:
    store = InMemoryStore()

    @tool
    def remember(text: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
        """Remember the text."""
        store.put(("memory",), "last", {"text": text})
        return "remembered"

    result, _ = ask(run, [remember], action("remember", "x1"), variant="notes", store=store)
    assert observations(result) == ["remembered"]
    item = store.get(("memory",), "last")
    assert item is not None
    assert item.value == {"text": "x1"}


def test_an_injected_store_without_a_store_is_an_observation(run: Runner) -> None:
    @tool
    def remember(text: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
        """Remember the text."""
        return "never"

    result, _ = ask(run, [remember], action("remember", "x"))
    (observation,) = observations(result)
    assert observation is not None
    assert observation.startswith("Error: remember failed:")
    assert "store" in observation


def test_an_injected_argument_nothing_can_fill_is_refused_at_build() -> None:
    @tool
    def needs(text: str, key: Annotated[str, InjectedToolArg]) -> str:
        """Needs a key nobody gives."""
        return key

    with pytest.raises(ValueError, match="'key' is an InjectedToolArg without a default"):
        build_graph("transcript", model=fake_model(), tools=[needs])


def test_content_and_artifact_keeps_the_artifact_in_the_turn(run: Runner) -> None:
    @tool(response_format="content_and_artifact")
    def fetch(url: str) -> tuple[str, dict[str, Any]]:
        """Fetch a page."""
        return f"page {url}", {"url": url, "bytes": 1234, "raw": "\x00nul"}

    result, _ = ask(run, [fetch], action("fetch", "a.html"))
    first = result["turns"][0]
    assert first["observation"] == "page a.html"
    assert first["artifact"] == {"url": "a.html", "bytes": 1234, "raw": "\ufffdnul"}
    assert "artifact" not in result["turns"][1]


def test_a_tool_returning_a_command_gets_an_observation_saying_so(run: Runner) -> None:
    @tool
    def jump(text: str) -> Command:
        """Jump somewhere."""
        return Command(goto="elsewhere", update={"answer": "hijacked"})

    result, _ = ask(run, [jump], action("jump", "x"))
    assert observations(result) == [prompts.TOOL_COMMAND.format(name="jump")]
    assert result["answer"] == "done"


def test_an_input_nested_too_deep_to_read_is_an_observation(run: Runner) -> None:
    """A few KB of brackets nest past what the JSON decoder reads (its RecursionError): the
    input is not JSON to the loop, never a crash the thread's every resume would replay."""

    @tool
    def add(a: int, b: int) -> int:
        """Add a and b."""
        return a + b

    @tool
    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    deep = "[" * 5000 + "]" * 5000
    out, _model = ask(run, [add, double], action("add", deep), action("double", deep))
    first, second = observations(out)
    assert first is not None and "not valid JSON" in first
    assert second is not None and second.startswith("Error: double")
    assert out["status"] == "answered"


UNCALLABLE = [
    "get weather",  # a space ends the name an Action line gives
    'say"hi',
    "back\\slash",
    "météo",  # non-ASCII: OpenAI refuses it as a function name
    "tool中",
    "tab\tname",
    "_private",  # the parser takes a leading _ for markup around the name
    "3d",
    "end.",
    "x" * 65,  # OpenAI's limit for a function name is 64
]


def echo_named(name: str) -> BaseTool:
    return StructuredTool.from_function(func=lambda text: text, name=name, description="Echo.")


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("name", UNCALLABLE)
def test_a_tool_name_the_model_could_not_call_is_refused_at_build_time(
    name: str, action_format: str
) -> None:
    """Such a tool was taken and then could never be called in the text format, and the
    grammar left it out, with no warning: now a ValueError naming it and what a name holds."""
    with pytest.raises(ValueError) as refused:
        build_graph(
            "transcript",
            model=fake_model(answer("x")),
            tools=[echo_named(name)],
            action_format=action_format,
        )
    message = str(refused.value)
    assert message.startswith(f"tool {name[:80]!r} cannot be called by that name: ")
    assert "an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'" in message


CALLABLE = ["geo.lookup-v2_X", "A", "x_", "a-b.c", "x" * 64]


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("name", CALLABLE)
def test_every_name_the_graph_takes_is_called_in_every_format_and_the_grammar(
    name: str, action_format: str, run: Runner
) -> None:
    from reactgraph.nodes.calling.grammar import callable_names

    reply = (
        action(name, "hello")
        if action_format == "text"
        else call(name, {"text": "hello"}, "I should echo.")
    )
    out, _ = ask(run, [echo_named(name)], reply, action_format=action_format)
    assert out["turns"][0]["action"] == name and observations(out) == ["hello"]
    assert callable_names({name: {"text": {"type": "string"}}}) == [name]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=70) | st.from_regex(TOOL_NAME, fullmatch=True))
def test_the_name_rule_is_the_parsers_the_grammars_and_mcps(name: str) -> None:
    """A name ``build_graph`` takes is read back from an Action line and offered by the
    grammar; an MCP tool's name is kept exactly when ``build_graph`` would take it."""
    from reactgraph.nodes.calling.grammar import callable_names
    from reactgraph.nodes.reading.textparser import parse_react
    from reactgraph.tools.mcp.names import callable_name

    try:
        check_tool_name(name)
        taken = True
    except ValueError:
        taken = False
    assert (callable_name(name) == name) == taken
    if taken:
        parsed = parse_react(f"Thought: t\nAction: {name}[x]", [name])
        assert (parsed["kind"], parsed["action"], parsed["action_input"]) == ("action", name, "x")
        assert callable_names({name: {"q": {"type": "string"}}}) == [name]
    mended = callable_name(name)
    if mended is not None:
        check_tool_name(mended)  # what MCP loading makes of a name, build_graph takes
