"""The chat view in process: every human message form is a question, the ``messages`` reducer
takes what a server hands it (dicts, snapshots, removals) as ``add_messages`` does, and the
view follows the loop a step at a time (through invoke and ainvoke)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.chatview.questions import content_parts
from reactgraph.nodes.vocabulary.reducers import added_messages
from reactgraph.tools import calculator, search_tools
from tests.fakes import SEED, Runner, fake_model

QUESTION = "How many years apart?"
IMAGE = {"type": "image", "source_type": "url", "url": "http://127.0.0.1/x.png"}


def graph(variant: str = "transcript", **options: Any) -> Any:
    tools = [*search_tools(), calculator]
    return build_graph(variant, model=fake_model(*SEED, *SEED), tools=tools, **options)


FORMS = [
    QUESTION,
    HumanMessage(QUESTION),
    HumanMessage([{"type": "text", "text": QUESTION}]),
    HumanMessage([{"type": "text", "text": "How many "}, {"type": "text", "text": "years apart?"}]),
    {"type": "human", "content": QUESTION},
    {"type": "human", "content": [{"type": "text", "text": QUESTION}]},
    {"role": "user", "content": QUESTION},
    {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
    ("human", QUESTION),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("form", FORMS, ids=range(len(FORMS)))
def test_every_human_message_form_is_a_question(run: Runner, variant: str, form: Any) -> None:
    out = run(graph(variant), {"messages": [form]})
    assert out["question"] == QUESTION and out["answer"] == "48"


def test_text_blocks_join_as_written_and_other_blocks_are_named() -> None:
    blocks = [{"type": "text", "text": "a "}, IMAGE, "b", {"type": "file"}, {"type": "image"}]
    assert content_parts(blocks) == ("a b", ["image", "file"])
    assert content_parts("plain") == ("plain", [])


def test_a_question_with_an_image_is_answered_from_its_text_with_a_note(run: Runner) -> None:
    content = [{"type": "text", "text": QUESTION}, IMAGE]
    out = run(graph(), {"messages": [HumanMessage(content)]})
    assert out["answer"] == "48" and out["question"] == QUESTION
    assert out["messages"][1].content == (
        "Note: this loop reads only text, so an image block in the question went unread."
    )


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (
            [HumanMessage([IMAGE, {"type": "file", "file_id": "f"}])],
            "the question has no text to answer: the last human message holds only image and "
            "file blocks, and this loop reads only text",
        ),
        ([HumanMessage([{"type": "text", "text": "  "}])], "the question is empty"),
        ([AIMessage("hi")], "the input needs a question: 'messages' holds no human message"),
        ([{"type": "nonsense"}], "'messages' is not a list of chat messages"),
    ],
)
def test_a_question_without_text_is_refused_clearly(messages: list, error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("(", r"\(")):
        graph().invoke({"messages": messages})


def test_the_reducer_takes_a_snapshot_decoded_to_dicts_and_dict_writes() -> None:
    held = [
        HumanMessage(QUESTION, id="h1"),
        AIMessage("x", id="a1", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        ToolMessage("obs", tool_call_id="c1", id="t1"),
    ]
    snapshot = [m.model_dump() for m in held]  # what the server's JSON decoding hands back
    out = added_messages(snapshot, [[{"type": "ai", "content": "y", "id": "a2"}]])  # type: ignore[arg-type]
    assert [type(m) for m in out] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert out[1].tool_calls[0]["id"] == "c1"
    # A tuple that came back as a list of dicts, and a fork's whole copy: no duplicates.
    again = added_messages(out, [({**snapshot[0], "id": "h2"},)])
    assert [(type(m), m.id) for m in again][-1] == (HumanMessage, "h2")
    copied = added_messages(out, [[m.model_dump() for m in out]])
    assert [m.id for m in copied] == ["h1", "a1", "t1", "a2"]


def test_the_reducer_removes_messages_as_add_messages_does() -> None:
    held = [HumanMessage("q", id="h"), AIMessage("a", id="a")]
    assert [m.id for m in added_messages(held, [[RemoveMessage(id="h")]])] == ["a"]
    assert added_messages(held, [[RemoveMessage(id=REMOVE_ALL_MESSAGES)]]) == []
    with pytest.raises(ValueError, match="no message with id 'x'"):
        added_messages(held, [[RemoveMessage(id="x")]])


def test_a_periodic_full_copy_reads_back_as_messages() -> None:
    """The channel's snapshot (every SNAPSHOT_EVERY updates; every 2 here) read back through a
    checkpointer: two runs on one thread, every checkpoint readable."""
    saver = InMemorySaver()
    built = graph(checkpointer=saver)
    built.channels["messages"].snapshot_frequency = 2
    config = {"configurable": {"thread_id": "t"}}
    built.invoke({"messages": [QUESTION]}, config)
    built.invoke({"messages": ["And once more?"]}, config)
    assert len(built.get_state(config).values["messages"]) == 16
    for state in built.get_state_history(config):
        assert all(not isinstance(m, dict) for m in state.values.get("messages") or [])


def test_each_step_shows_the_loop_so_far(run: Runner) -> None:
    """The AI message with its text after call_model, its tool call after parse_reply, the
    tool message after the tool; the final reply as the model wrote it, line by line."""
    built = graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "steps"}}
    run(built, {"messages": [QUESTION]}, config)
    history = list(built.get_state_history(config))[::-1]
    views = [
        ([m.type for m in s.values.get("messages") or []], s.next)
        for s in history
        if s.values.get("messages")
    ]
    assert (["human", "ai"], ("parse_reply",)) in views
    parsed = next(s for s in history if s.next == ("run_tool",))
    last = parsed.values["messages"][-1]
    assert last.type == "ai" and last.tool_calls[0]["name"] == "search"
    assert (
        last.content
        == "Thought: I need the Eiffel Tower's completion.  \nAction: search[Eiffel Tower]"
    )
    final = history[-1].values["messages"][-1]
    assert final.content == "Thought: I now have enough information.  \nFinal Answer: 48"
    assert final.id == history[-1].values["turns"][-1]["message_id"]
