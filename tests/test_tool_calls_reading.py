"""Reading native tool calls: one action per turn, every call id answered, malformed calls as
corrective Observations, and bounded cost for what a model may send
(``nodes.reading.toolcalls``)."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import InjectedToolCallId, tool

from reactgraph import build_graph
from reactgraph.nodes.calling.binding import parameters, tool_schemas
from reactgraph.nodes.calling.streaming import gather
from reactgraph.nodes.reading.toolcalls import MAX_CALLS, calls_of, input_text, read_tool_calls
from reactgraph.nodes.vocabulary import prompts
from reactgraph.tools import calculator, search_tools
from tests.fakes import (
    CONFIG,
    FakeChatModel,
    Runner,
    StreamingFakeChatModel,
    ToolLog,
    answer,
    bad_call,
    call,
    calls,
    fake_model,
)
from tests.test_tool_calls_graph import NATIVE, answered

PARAMS = {"search": ("query",), "calculator": ("expression",), "add": ("a", "b")}


def test_several_calls_the_first_runs_and_every_other_is_answered(run: Runner) -> None:
    log = ToolLog()
    search, _ = search_tools()
    reply = calls(
        ("search", {"query": "Eiffel Tower"}),
        ("calculator", {"expression": "1+1"}),
        ("search", {"query": "Golden Gate Bridge"}),
        thought="All three at once.",
    )
    model = fake_model(reply, answer("48"))
    tools = [log.wrap(search), log.wrap(calculator)]
    out = run(
        build_graph("transcript", model=model, tools=tools, **NATIVE), {"question": "q"}, CONFIG
    )
    assert log.calls == [("search", "Eiffel Tower")]  # one action per turn
    first = out["turns"][0]
    assert (first["action"], first["tool_call_id"], len(first["tool_calls"])) == (
        "search",
        "call-1",
        3,
    )
    prompt = model.calls[1]["messages"]
    answered(prompt)
    results = {m.tool_call_id: m.content for m in prompt if isinstance(m, ToolMessage)}
    assert "1889" in results["call-1"]
    assert results["call-2"] == prompts.ONE_ACTION_PER_TURN.format(name="calculator")
    assert results["call-3"] == prompts.ONE_ACTION_PER_TURN.format(name="search")
    resent = next(m for m in prompt if isinstance(m, AIMessage) and m.tool_calls)
    assert [c["id"] for c in resent.tool_calls] == ["call-1", "call-2", "call-3"]
    assert len([m for m in out["messages"] if isinstance(m, ToolMessage)]) == 1  # the chat view


def test_arguments_that_are_not_json_and_unknown_tools_are_corrected(run: Runner) -> None:
    replies = [
        bad_call("calculator", '{"expression": 1937-'),
        call("wikipedia", {"q": "x"}),
        call("calculator", {"expression": "1937-1889"}),
        answer("48"),
    ]
    model = fake_model(*replies)
    out = run(
        build_graph("notes", model=model, tools=[calculator], **NATIVE), {"question": "q"}, CONFIG
    )
    bad, unknown, good, _ = out["turns"]
    assert bad["kind"] == "invalid" and bad["observation"].startswith(
        "Error: the arguments of this calculator call could not be read"
    )
    assert "1937-" in bad["observation"]
    assert unknown["observation"] == prompts.UNKNOWN_TOOL.format(
        name="wikipedia", valid="calculator, update_notes"
    )
    assert good["observation"] == "48" and out["answer"] == "48"
    for prompt in (c["messages"] for c in model.calls):
        answered(prompt)  # the malformed call's id is answered too
    resent = [m for m in model.calls[1]["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert resent[0].tool_calls[0] == {
        "name": "calculator",
        "args": {},
        "id": "call-bad",
        "type": "tool_call",
    }


def test_different_unknown_calls_with_no_text_are_not_the_same_reply(run: Runner) -> None:
    replies = [call("a", {}), call("b", {}), call("c", {}), answer("ok")]
    out = run(
        build_graph("transcript", model=fake_model(*replies), tools=[calculator], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert out["status"] == "answered"
    replies = [call("a", {})] * 3 + [answer("never")]
    out = run(
        build_graph("transcript", model=fake_model(*replies), tools=[calculator], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert out["status"] == "stuck"


def test_thousands_of_calls_in_one_reply_keep_only_the_first_few(run: Runner) -> None:
    many = calls(*[("calculator", {"expression": f"{i}+1"}) for i in range(5000)])
    model = fake_model(many, answer("done"))
    out = run(
        build_graph("transcript", model=model, tools=[calculator], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert len(out["turns"][0]["tool_calls"]) == MAX_CALLS
    assert out["turns"][0]["observation"] == "1"
    prompt = model.calls[1]["messages"]
    answered(prompt)
    assert sum(isinstance(m, ToolMessage) for m in prompt) == MAX_CALLS


def test_calls_of_is_total_over_what_a_provider_hands_back() -> None:
    message = AIMessage(
        "",
        tool_calls=[
            {"name": "search", "args": {"query": "a\x00b"}, "id": "x"},
            {"name": "search", "args": {"query": "c"}, "id": "x"},  # the same id twice
            {"name": "", "args": {}, "id": None},
        ],
        invalid_tool_calls=[{"name": "add", "args": "{not json", "id": None, "error": "bad"}],
    )
    records = calls_of(message)
    assert [r["id"] for r in records] == ["x", "x-2", "call-3", "call-4"]
    assert records[0]["args"] == {"query": "a\ufffdb"}  # storable
    assert records[2]["name"] == "unnamed_call"
    assert records[3]["error"].startswith("bad: ") and "{not json" in records[3]["error"]
    deep: dict = {}
    inner = deep
    for _ in range(500):
        inner["x"] = {}
        inner = inner["x"]
    (record,) = calls_of(AIMessage("", tool_calls=[{"name": "add", "args": deep, "id": "d"}]))
    assert "nested" in record["error"]
    assert calls_of(AIMessage("plain")) == [] and calls_of(None) == []


@pytest.mark.parametrize(
    ("text", "records", "kind", "field", "value"),
    [
        (
            "Thought: look.",
            [{"name": "search", "args": {"query": "x"}, "id": "1"}],
            "action",
            "action_input",
            "x",
        ),
        ("", [{"name": "Search", "args": {"query": "x"}, "id": "1"}], "action", "action", "search"),
        (
            "",
            [{"name": "add", "args": {"a": 1, "b": 2}, "id": "1"}],
            "action",
            "action_input",
            '{"a": 1, "b": 2}',
        ),
        ("", [{"name": "add", "args": {}, "id": "1", "error": "bad"}], "invalid", "call_id", "1"),
        ("48", [], "answer", "answer", "48"),
        ("Thought: t\nFinal Answer: 48", [], "answer", "thought", "t"),
        (
            "   ",
            [],
            "invalid",
            "error",
            prompts.EMPTY_REPLY_TOOLS.format(valid="search, calculator, add"),
        ),
    ],
)
def test_read_tool_calls(text: str, records: list, kind: str, field: str, value: str) -> None:
    parsed = read_tool_calls(text, records, PARAMS)
    assert parsed["kind"] == kind and parsed[field] == value  # type: ignore[literal-required]
    assert set(parsed) >= {"kind", "thought", "action", "action_input", "answer", "error"}


def test_input_text_writes_what_the_text_format_writes() -> None:
    assert input_text(("query",), {"query": "Eiffel Tower"}) == "Eiffel Tower"
    assert input_text(("query",), {"input": "Eiffel Tower"}) == "Eiffel Tower"
    assert input_text(("n",), {"n": 21}) == "21"
    assert input_text(("a", "b"), {"a": 2, "b": 3}) == '{"a": 2, "b": 3}'
    assert input_text((), {}) == ""


def test_a_one_argument_tool_takes_its_value_under_another_name(run: Runner) -> None:
    model = fake_model(call("calculator", {"input": "1937-1889"}), answer("48"))
    out = run(
        build_graph("transcript", model=model, tools=[calculator], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert out["turns"][0]["observation"] == "48"


def test_the_bound_schemas_hide_injected_arguments_and_fill_the_notes_limit() -> None:
    @tool
    def probe(text: str, call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Probe."""
        return text

    assert parameters(probe) == {"text": {"title": "Text", "type": "string"}}
    schemas = tool_schemas(
        {"calculator": calculator}, {}, [("update_notes", prompts.UPDATE_NOTES_DESCRIPTION)], 123
    )
    assert [s["function"]["name"] for s in schemas] == ["calculator", "update_notes"]
    assert schemas[0]["function"]["parameters"]["required"] == ["expression"]
    assert "at most 123 characters" in schemas[1]["function"]["description"]


def test_streamed_tool_call_chunks_are_merged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merging chunk by chunk re-reads the arguments so far at every chunk, quadratic in their
    length: the gathered reply reads each character a bounded number of times."""
    from langchain_core.messages import ai

    reads = [0]  # characters of arguments parsed
    parse = ai.parse_partial_json

    def counted(text: str, *args: object, **kwargs: object) -> object:
        reads[0] += len(text)
        return parse(text, *args, **kwargs)

    monkeypatch.setattr(ai, "parse_partial_json", counted)
    text = "abcd" * 2000
    model = StreamingFakeChatModel(replies=[call("search", {"query": text})], piece=4)
    message = gather(model, [HumanMessage("q")], None, {}, threading.Event())
    assert message.tool_calls[0]["args"] == {"query": text}
    # Each chunk's piece is read once, and the whole once: not the whole at every chunk.
    assert reads[0] < 4 * len(text), reads[0]


class KeepsItsTools(FakeChatModel):
    """A double whose ``bind_tools`` returns itself (as many test fakes do)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


class Wrapped(FakeChatModel):
    """A model whose ``bind_tools`` returns another runnable than itself with arguments."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return RunnableLambda(lambda x: x)


def test_what_bind_tools_may_return(run: Runner) -> None:
    model = KeepsItsTools(replies=[call("calculator", {"expression": "1937-1889"}), answer("48")])
    out = run(
        build_graph("transcript", model=model, tools=[calculator], **NATIVE),
        {"question": "q"},
        CONFIG,
    )
    assert out["answer"] == "48" and out["turns"][0]["observation"] == "48"
    with pytest.raises(ValueError, match="returned RunnableLambda"):
        build_graph("transcript", model=Wrapped(), tools=[calculator], **NATIVE)
