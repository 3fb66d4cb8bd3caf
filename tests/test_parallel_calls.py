"""Parallel tool calls (``parallel_tool_calls``, ``max_parallel_calls``): the parser, the
native calls' reading, the effect that runs several bodies at once, and whole graphs in every
variant and both formats, through ``invoke`` and ``ainvoke``, approvals and limits included."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reactgraph import build_graph
from reactgraph.nodes.reading.textparser import parse_react
from reactgraph.nodes.reading.toolcalls import read_tool_calls
from reactgraph.nodes.running.decisions import Malformed, read_decisions
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.effects import Together, adrive, drive
from reactgraph.scripted import DEMO_QUESTION
from tests.fakes import FakeChatModel, calls, classic_seed_tools

VARIANTS = ("transcript", "notes", "compaction", "notes_compaction")
NAMES = ["search", "calculator"]
BOTH_TEXT = "Thought: both years.\nAction: search[Eiffel Tower]\nAction: search[Golden Gate Bridge]"
BOTH_CALLS = calls(
    ("search", {"query": "Eiffel Tower"}),
    ("search", {"query": "Golden Gate Bridge"}),
    thought="both years",
)
SCRIPTS = {
    "text": [BOTH_TEXT, "Thought: so.\nAction: calculator[1937-1889]", "Final Answer: 48"],
    "tool_calls": [
        BOTH_CALLS,
        calls(("calculator", {"expression": "1937-1889"})),
        "Final Answer: 48",
    ],
}


# The parser: pure, several Action lines read when the cap allows.


def test_the_default_parser_still_refuses_two_actions() -> None:
    parsed = parse_react(BOTH_TEXT, NAMES)
    assert parsed["kind"] == "invalid"
    assert parsed["error"] is not None and "more than one action" in parsed["error"]
    assert "actions" not in parsed


def test_several_action_lines_are_read_in_order() -> None:
    parsed = parse_react(BOTH_TEXT + "\nAction: calculator[2*3]", NAMES, max_calls=8)
    assert parsed["kind"] == "action"
    assert (parsed["action"], parsed["action_input"]) == ("search", "Eiffel Tower")
    got = [(c["action"], c["action_input"], c["error"]) for c in parsed["actions"]]
    assert got == [
        ("search", "Eiffel Tower", None),
        ("search", "Golden Gate Bridge", None),
        ("calculator", "2*3", None),
    ]


def test_calls_past_the_cap_an_unknown_tool_and_finish_get_their_corrections() -> None:
    text = "Action: search[a]\nAction: nope[b]\nAction: Finish[48]\nAction: search[c]"
    parsed = parse_react(text, NAMES, max_calls=3)
    errors = [c["error"] for c in parsed["actions"]]
    assert errors[0] is None
    assert errors[1] is not None and errors[1].startswith("Unknown action")
    assert errors[2] == prompts.ANSWER_AMONG_CALLS  # a final answer among calls: not taken
    assert errors[3] is not None and errors[3].startswith("Not run: at most 3")


def test_a_final_answer_beside_calls_is_not_taken() -> None:
    parsed = parse_react("Action: search[a]\nFinal Answer: 48", NAMES, max_calls=4)
    assert parsed["kind"] == "action" and parsed["action"] == "search"
    assert parse_react("Action: search[a]\nFinal Answer: 48", NAMES)["kind"] == "answer"


def test_one_action_reads_as_before_with_the_setting_on() -> None:
    assert parse_react("Action: search[a]", NAMES, max_calls=8) == parse_react(
        "Action: search[a]", NAMES
    )


def test_the_parser_stays_linear_on_many_action_lines() -> None:
    text = "Action: search[x]\n" * 50_000  # the same call: one distinct call
    parsed = parse_react(text, NAMES, max_calls=8)
    assert parsed["kind"] == "action" and "actions" not in parsed
    many = "".join(f"Action: search[{i}]\n" for i in range(5_000))
    parsed = parse_react(many, NAMES, max_calls=8)
    assert len(parsed["actions"]) <= 100  # the scan keeps a bounded number of calls
    assert sum(c["error"] is None for c in parsed["actions"]) == 8


def test_native_calls_are_read_each_on_its_own() -> None:
    params = {"search": ("query",), "calculator": ("expression",)}
    records: list[Any] = [
        {"name": "search", "args": {"query": "a"}, "id": "c1"},
        {"name": "nope", "args": {}, "id": "c2"},
        {"name": "calculator", "args": {}, "id": "c3", "error": "not JSON"},
        {"name": "search", "args": {"query": "b"}, "id": "c4"},
    ]
    parsed = read_tool_calls("", records, params, max_calls=3)
    got = [(c["action"], c["call_id"], c["error"] is None) for c in parsed["actions"]]
    assert got == [
        ("search", "c1", True),
        (None, "c2", False),
        (None, "c3", False),
        (None, "c4", False),
    ]
    assert read_tool_calls("", records, params)["call_id"] == "c1"  # off: the first, alone
    assert "actions" not in read_tool_calls("", records, params)


# The effect: bodies at once, results in order.


def _waits(barrier: threading.Barrier | None, value: int) -> Any:
    class Wait:
        def run(self) -> int:
            if barrier is not None:
                barrier.wait(timeout=30)
            return value

        async def arun(self) -> int:
            await asyncio.sleep(0)
            return value

    got = yield Wait()
    return got * 10


def test_together_runs_every_body_at_once_in_order() -> None:
    barrier = threading.Barrier(3)  # would never open if the bodies ran one at a time

    def body() -> Any:
        return (yield Together(tuple(_waits(barrier, v) for v in (1, 2, 3))))

    assert drive(body()) == [10, 20, 30]

    def abody() -> Any:
        return (yield Together(tuple(_waits(None, v) for v in (1, 2, 3))))

    assert asyncio.run(adrive(abody())) == [10, 20, 30]


# Decisions on several calls.


def test_decisions_on_several_calls() -> None:
    found = read_decisions({"decisions": [{"type": "approve"}, {"type": "reject"}]}, 2)
    assert [d.decision for d in found] == ["approve", "reject"]
    assert [d.decision for d in read_decisions("yes", 3)] == ["approve"] * 3
    with pytest.raises(Malformed):
        read_decisions({"decisions": [{"type": "approve"}] * 3}, 2)
    # A client that showed one call and answered it approves no other (attack round 7).
    with pytest.raises(Malformed, match="3 decisions were asked for"):
        read_decisions({"decisions": [{"type": "approve"}]}, 3)
    assert [d.decision for d in read_decisions({"type": "approve"}, 2)] == ["approve"] * 2


# Whole graphs.


def _run(graph: Any, mode: str, value: Any, config: Any) -> Any:
    if mode == "invoke":
        return graph.invoke(value, config)
    return asyncio.run(graph.ainvoke(value, config))


def _parallel(
    model: Any,
    action_format: str = "text",
    log: list[tuple[str, str]] | None = None,
    variant: str = "transcript",
    **settings: Any,
) -> Any:
    """A ``variant`` graph over the classic seed tools (calls appended to ``log``) with
    ``parallel_tool_calls`` on, plus ``settings``."""
    return build_graph(
        variant,
        model=model,
        tools=classic_seed_tools(log),
        action_format=action_format,
        parallel_tool_calls=True,
        **settings,
    )


def _approving_graph(
    action_format: str, text: str, native: Any, answer: str, log: list[tuple[str, str]]
) -> tuple[Any, FakeChatModel]:
    """A transcript graph running parallel calls with calculator calls waiting for approval;
    the model replies ``text`` or ``native`` (by ``action_format``), then ``answer``."""
    model = FakeChatModel(replies=[text if action_format == "text" else native, answer])
    graph = _parallel(
        model, action_format, log, approve=["calculator"], checkpointer=InMemorySaver()
    )
    return graph, model


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_both_searches_run_and_the_next_prompt_holds_both_facts(
    variant: str, action_format: str, mode: str
) -> None:
    log: list[tuple[str, str]] = []
    model = FakeChatModel(replies=list(SCRIPTS[action_format]))
    graph = _parallel(
        model,
        action_format,
        log,
        variant,
        context_window=100_000 if "compaction" in variant else None,
        checkpointer=InMemorySaver(),
    )
    out = _run(graph, mode, {"question": DEMO_QUESTION}, {"configurable": {"thread_id": "p"}})
    assert out["status"] == "answered" and out["answer"] == "48"
    # Both ran (at once: in either order); their Observations come in the calls' order.
    assert sorted(log[:2]) == [("search", "Eiffel Tower"), ("search", "Golden Gate Bridge")]
    assert "1889" in model.prompts[1] and "1937" in model.prompts[1]
    first = out["turns"][0]
    assert [a["action_input"] for a in first["actions"]] == ["Eiffel Tower", "Golden Gate Bridge"]
    assert "actions" not in out["turns"][1]  # a one-call turn keeps the single-action fields
    assert out["turns"][1]["action"] == "calculator"
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 3  # one per call
    if action_format == "text":
        assert "Observation 1 (search[Eiffel Tower])" in model.prompts[1]
        assert "Observation 2 (search[Golden Gate Bridge])" in model.prompts[1]
    else:
        sent = model.calls[1]["messages"]
        answered = {m.tool_call_id for m in sent if isinstance(m, ToolMessage)}
        assert answered == {"call-1", "call-2"}


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_the_default_still_runs_one(action_format: str) -> None:
    log: list[tuple[str, str]] = []
    first = SCRIPTS[action_format][0]
    model = FakeChatModel(replies=[first, "Final Answer: 48"])
    graph = build_graph(
        "transcript", model=model, tools=classic_seed_tools(log), action_format=action_format
    )
    out = graph.invoke({"question": DEMO_QUESTION})
    assert len(log) == (0 if action_format == "text" else 1)  # text: TWO_ACTIONS, as before
    assert "actions" not in out["turns"][0]
    assert "up to 8" not in model.prompts[0]


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_the_rules_say_so_only_when_on(action_format: str) -> None:
    model = FakeChatModel(replies=["Final Answer: 1"])
    graph = _parallel(model, action_format, max_parallel_calls=3)
    graph.invoke({"question": "q"})
    assert "up to 3" in model.prompts[0]
    assert "One action per turn" not in model.prompts[0]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_calls_past_the_cap_are_answered_not_run(action_format: str, mode: str) -> None:
    log: list[tuple[str, str]] = []
    model = FakeChatModel(replies=[SCRIPTS[action_format][0], "Final Answer: 48"])
    graph = _parallel(model, action_format, log, max_parallel_calls=1)
    out = _run(graph, mode, {"question": DEMO_QUESTION}, None)
    assert log == [("search", "Eiffel Tower")]
    assert out["turns"][0]["actions"][1]["observation"].startswith("Not run: at most 1")


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_a_limit_of_one_search_lets_exactly_one_run(action_format: str, mode: str) -> None:
    log: list[tuple[str, str]] = []
    model = FakeChatModel(replies=[SCRIPTS[action_format][0], "Final Answer: 48"])
    graph = _parallel(model, action_format, log, tool_call_limits={"search": 1})
    out = _run(graph, mode, {"question": DEMO_QUESTION}, None)
    assert log == [("search", "Eiffel Tower")]
    second = out["turns"][0]["actions"][1]["observation"]
    assert second.startswith("Not run: search may be called at most 1")
    assert out["usage"]["tool_calls"] == {"search": 1}


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_an_approval_beside_a_search_waits_then_runs_the_calculator_once(
    action_format: str, mode: str
) -> None:
    text = "Action: search[Eiffel Tower]\nAction: calculator[1937-1889]\nAction: calculator[2*3]"
    native = calls(
        ("search", {"query": "Eiffel Tower"}),
        ("calculator", {"expression": "1937-1889"}),
        ("calculator", {"expression": "2*3"}),
    )
    log: list[tuple[str, str]] = []
    graph, _ = _approving_graph(action_format, text, native, "Final Answer: 48", log)
    config = {"configurable": {"thread_id": "a"}}
    out = _run(graph, mode, {"question": DEMO_QUESTION}, config)
    (waiting,) = out["__interrupt__"]  # one interrupt, listing both calls that wait
    assert [r["description"] for r in waiting.value["action_requests"]] == [
        "calculator[1937-1889]",
        "calculator[2*3]",
    ]
    assert log == []
    decisions = {"decisions": [{"type": "approve"}, {"type": "reject", "message": "no"}]}
    out = _run(graph, mode, Command(resume=decisions), config)
    assert out["answer"] == "48"
    assert sorted(log) == [("calculator", "1937-1889"), ("search", "Eiffel Tower")]
    records = out["turns"][0]["actions"]
    assert [r.get("approval", {}).get("decision") for r in records] == [None, "approve", "reject"]
    assert records[2]["observation"] == prompts.ACTION_REJECTED_WHY.format(reason="no")


def test_sync_tools_of_one_reply_run_at_once() -> None:
    barrier = threading.Barrier(3)

    def meet(text: str) -> str:
        barrier.wait(timeout=30)  # only opens when all three are in flight together
        return f"met {text}"

    tool = StructuredTool.from_function(meet, name="meet", description="meet")
    reply = "Action: meet[a]\nAction: meet[b]\nAction: meet[c]"
    model = FakeChatModel(replies=[reply, "Final Answer: ok"])
    graph = build_graph("transcript", model=model, tools=[tool], parallel_tool_calls=True)
    out = graph.invoke({"question": "q"})
    assert [a["observation"] for a in out["turns"][0]["actions"]] == ["met a", "met b", "met c"]


def test_the_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        build_graph("transcript", model=FakeChatModel(replies=[]), tools=[], max_parallel_calls=0)
    with pytest.raises(TypeError):
        build_graph("transcript", model=FakeChatModel(replies=[]), tools=[], parallel_tool_calls=3)


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_the_stuck_rule_compares_the_set_of_calls(action_format: str) -> None:
    if action_format == "text":
        one = "Action: search[Eiffel Tower]\nAction: search[Golden Gate Bridge]"
        other = "Action: search[Golden Gate Bridge]\nAction: search[Eiffel Tower]"
    else:
        one = BOTH_CALLS
        other = calls(
            ("search", {"query": "Golden Gate Bridge"}), ("search", {"query": "Eiffel Tower"})
        )
    model = FakeChatModel(replies=[one, other, one, "Final Answer: 48"])
    graph = _parallel(model, action_format)
    out = graph.invoke({"question": DEMO_QUESTION})
    assert out["status"] == "stuck"  # the same two calls three times, in any order
    assert len(out["turns"]) == 3


def test_another_set_of_calls_is_not_a_repeat() -> None:
    other = "Action: search[Eiffel Tower]\nAction: search[Paris]"
    model = FakeChatModel(replies=[BOTH_TEXT, other, BOTH_TEXT, "Final Answer: 48"])
    graph = build_graph(
        "transcript", model=model, tools=classic_seed_tools(), parallel_tool_calls=True
    )
    assert graph.invoke({"question": DEMO_QUESTION})["status"] == "answered"


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_is_asked_for_parallel_calls_and_each_streamed_call_kept(
    openai_server: Any, stream: bool
) -> None:
    from reactgraph.models import chat_model
    from tests.fakes import Call, Calls

    openai_server.script.extend(
        [
            Calls(
                [
                    Call("search", {"query": "Eiffel Tower"}, id="call-a"),
                    Call("search", {"query": "Golden Gate Bridge"}, id="call-b"),
                ]
            ),
            "Final Answer: 48",
        ]
    )
    log: list[tuple[str, str]] = []
    model = chat_model("gpt-4o-mini", base_url=openai_server.url, stream=stream)
    graph = _parallel(model, "tool_calls", log)
    out = graph.invoke({"question": DEMO_QUESTION})
    assert out["answer"] == "48"
    assert openai_server.requests[0]["parallel_tool_calls"] is True
    assert sorted(log) == [("search", "Eiffel Tower"), ("search", "Golden Gate Bridge")]
    second = openai_server.requests[1]["messages"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == ["call-a", "call-b"]


def test_the_default_request_is_unchanged(openai_server: Any) -> None:
    from reactgraph.models import chat_model

    openai_server.script.extend(["Final Answer: 48"])
    model = chat_model("gpt-4o-mini", base_url=openai_server.url, stream=False)
    graph = build_graph(
        "transcript", model=model, tools=classic_seed_tools(), action_format="tool_calls"
    )
    graph.invoke({"question": DEMO_QUESTION})
    assert "parallel_tool_calls" not in openai_server.requests[0]


def test_the_terminal_asks_about_each_waiting_call_in_order() -> None:
    from reactgraph.app.approving import decide

    request = {
        "action_requests": [
            {"name": "calculator", "args": {}, "description": "calculator[1+1]"},
            {"name": "calculator", "args": {}, "description": "calculator[2+2]"},
        ]
    }
    answers = iter(["y", "e", "3+3"])
    value = decide(request, {}, lambda _: next(answers))
    assert value is not None
    assert value["decisions"] == [
        {"type": "approve"},
        {"type": "edit", "edited_action": {"name": "calculator", "args": "3+3"}},
    ]
    found = read_decisions(value, 2)
    assert [d.decision for d in found] == ["approve", "edit"]


def _answered_in_order(messages: list[Any]) -> None:
    """Every tool call of an AI message is answered by the tool messages right after it."""
    for index, message in enumerate(messages):
        ids = [c["id"] for c in getattr(message, "tool_calls", None) or []]
        if ids:
            after = messages[index + 1 : index + 1 + len(ids)]
            assert [getattr(m, "tool_call_id", None) for m in after] == ids


@pytest.mark.parametrize("variant", ["compaction", "notes", "notes_compaction"])
def test_compaction_and_the_window_never_split_calls_from_their_results(variant: str) -> None:
    asked = [0]

    def script(messages: list[Any]) -> Any:
        text = str(messages[0].content)
        if text.startswith("You are compacting"):
            return "Summary: searched a lot."
        asked[0] += 1
        if asked[0] > 7:
            return "Final Answer: 48"
        turn = asked[0]
        return calls(
            ("search", {"query": f"Eiffel Tower {turn}"}),
            ("search", {"query": f"Golden Gate Bridge {turn}"}),
            ("calculator", {"expression": f"{turn}+1"}),
        )

    model = FakeChatModel(replies=[script] * 40)
    extra: dict[str, Any] = {}
    if "compaction" in variant:
        extra.update(token_counter=lambda m: 100 * len(m), context_window=3000)
    if variant == "notes":
        extra["window_turns"] = 2
    graph = _parallel(model, "tool_calls", None, variant, max_turns=12, **extra)
    out = graph.invoke({"question": DEMO_QUESTION})
    assert out["status"] == "answered", out["status"]
    assert len(out["turns"]) == 8
    if "compaction" in variant:
        assert out.get("compactions"), "the run never compacted"
    for sent in model.calls:
        _answered_in_order(sent["messages"])


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_a_typed_answer_after_parallel_calls_and_at_the_cap_as_today(
    action_format: str, mode: str
) -> None:
    schema = {
        "type": "object",
        "properties": {"years": {"type": "integer"}},
        "required": ["years"],
    }
    answer_text = 'Final Answer: {"years": 48}'
    model = FakeChatModel(replies=[SCRIPTS[action_format][0], answer_text])
    graph = _parallel(model, action_format, answer_schema=schema)
    out = _run(graph, mode, {"question": DEMO_QUESTION}, None)
    assert out["structured_answer"] == {"years": 48}
    # At the turn cap the forced answer is asked for and read as without the setting.
    capped = FakeChatModel(replies=[SCRIPTS[action_format][0], answer_text])
    graph = _parallel(capped, action_format, answer_schema=schema, max_turns=1)
    out = _run(graph, mode, {"question": DEMO_QUESTION}, None)
    assert out["turns"][-1]["kind"] == "forced"
    assert out["structured_answer"] == {"years": 48}


def test_update_notes_among_other_calls_is_told_to_run_alone() -> None:
    reply = "Action: update_notes[plan]\nAction: search[Eiffel Tower]"
    model = FakeChatModel(replies=[reply, "Final Answer: 48"])
    graph = build_graph("notes", model=model, tools=classic_seed_tools(), parallel_tool_calls=True)
    out = graph.invoke({"question": DEMO_QUESTION})
    first = out["turns"][0]["actions"]
    assert first[0]["observation"] == prompts.RUNS_ALONE.format(name="update_notes")
    assert first[1]["observation"].startswith("[Eiffel Tower]")


@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_an_edit_and_a_response_among_several_calls(action_format: str) -> None:
    text = "Action: calculator[1+1]\nAction: calculator[2+2]"
    native = calls(("calculator", {"expression": "1+1"}), ("calculator", {"expression": "2+2"}))
    log: list[tuple[str, str]] = []
    graph, model = _approving_graph(action_format, text, native, "Final Answer: 6", log)
    config = {"configurable": {"thread_id": "e"}}
    graph.invoke({"question": "q"}, config)
    decisions = [
        {"type": "edit", "edited_action": {"name": "calculator", "args": {"expression": "3+3"}}},
        {"type": "respond", "message": "it is 4"},
    ]
    out = graph.invoke(Command(resume={"decisions": decisions}), config)
    assert log == [("calculator", "3+3")]
    first, second = out["turns"][0]["actions"]
    assert (first["action_input"], first["observation"]) == ("3+3", "6")
    assert first["approval"]["proposed_input"] == "1+1"
    assert (second["observation"], second["approval"]["decision"]) == ("it is 4", "respond")
    assert "a person changed" in model.prompts[1]
