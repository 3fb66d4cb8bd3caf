"""What chat clients send and do, against `langgraph dev` through the official SDK (no
browser), for every variant: a question in every message form, the chat view following the
loop as it runs, and forks (Regenerate, an edited first question, the state editor) after
which the thread still reads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reactgraph import VARIANTS
from tests.fakes import SEED, FakeOpenAIServer, seed_call_responder, seed_responder
from tests.langgraph_dev import CHAT_GRAPHS, LANGGRAPH, langgraph_dev
from tests.test_studio import chat_turns

# One pytest-xdist worker runs them all, so the module's server starts once.
pytestmark = [pytest.mark.slow, pytest.mark.servers, pytest.mark.xdist_group("chat-clients")]

QUESTION = "How many years apart?"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    workdir = tmp_path_factory.mktemp("chat")
    with langgraph_dev(workdir, CHAT_GRAPHS) as url:
        yield url


@pytest.fixture
def client(server: str) -> Any:
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=server)


def context(openai_server: FakeOpenAIServer) -> dict[str, Any]:
    openai_server.responder = seed_responder
    return {"model_name": "gpt-4o-mini", "base_url": openai_server.url}


ONE_RUN = ["h", "a+", "t", "a+", "t", "a+", "t", "a"]

FORMS = {
    "string": {"type": "human", "content": QUESTION},
    "one text block": {"type": "human", "content": [{"type": "text", "text": QUESTION}]},
    "text blocks": {
        "type": "human",
        "content": [
            {"type": "text", "text": "How many "},
            {"type": "text", "text": "years apart?"},
        ],
    },
    "openai role": {"role": "user", "content": QUESTION},
    "openai role, blocks": {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_message_form_is_a_question(
    client: Any, openai_server: FakeOpenAIServer, variant: str
) -> None:
    for form, message in FORMS.items():
        thread = client.threads.create()["thread_id"]
        values = client.runs.wait(
            thread, variant, input={"messages": [message]}, context=context(openai_server)
        )
        assert values["answer"] == "48", (form, values)
        assert values["question"] == QUESTION, form
        assert chat_turns(values["messages"]) == ONE_RUN, (form, chat_turns(values["messages"]))


@pytest.mark.parametrize("variant", VARIANTS)
def test_image_blocks_are_noted_and_a_question_without_text_is_refused(
    client: Any, openai_server: FakeOpenAIServer, variant: str
) -> None:
    image = {"type": "image", "source_type": "base64", "data": "iVBORw0K", "mime_type": "image/png"}
    thread = client.threads.create()["thread_id"]
    content = [{"type": "text", "text": QUESTION}, image]
    values = client.runs.wait(
        thread,
        variant,
        input={"messages": [{"type": "human", "content": content}]},
        context=context(openai_server),
    )
    assert values["answer"] == "48" and values["question"] == QUESTION
    note = values["messages"][1]
    assert note["type"] == "ai" and not note.get("tool_calls")
    assert (
        note["content"]
        == "Note: this loop reads only text, so an image block in the question went unread."
    )
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(
        thread, variant, input={"messages": [{"type": "human", "content": [image]}]}
    )
    client.runs.join(thread, run["run_id"])
    assert client.runs.get(thread, run["run_id"])["status"] == "error"
    assert not client.threads.get_state(thread)["values"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_values_show_each_tool_call_before_its_result_with_ids_that_merge(
    client: Any, openai_server: FakeOpenAIServer, variant: str
) -> None:
    thread = client.threads.create()["thread_id"]
    snapshots: list[list[dict]] = []
    streamed: dict[str, str] = {}
    for part in client.runs.stream(
        thread,
        variant,
        input={"messages": [{"type": "human", "content": [{"type": "text", "text": QUESTION}]}]},
        stream_mode=["values", "messages-tuple"],
        context=context(openai_server),
    ):
        if part.event == "values":
            snapshots.append(part.data.get("messages") or [])
        elif part.event == "messages":
            chunk, _ = part.data
            if chunk["type"].lower().startswith("ai"):
                streamed[chunk["id"]] = streamed.get(chunk["id"], "") + str(chunk["content"])
    stored = client.threads.get_state(thread)["values"]["messages"]
    assert chat_turns(stored) == ONE_RUN
    calls = [m for m in stored if m.get("tool_calls")]
    for message in calls:
        call_id = message["tool_calls"][0]["id"]
        early = [
            s
            for s in snapshots
            if any(m["id"] == message["id"] and m.get("tool_calls") for m in s)
            and not any(m.get("tool_call_id") == call_id for m in s)
        ]
        assert early, f"no values event held {call_id} before its result"
    # One message per turn: streamed tokens, values and the stored state share each AI id.
    ais = [m for m in stored if m["type"] == "ai"]
    assert [m["id"] for m in ais] == list(streamed)
    for m, reply in zip(ais, SEED, strict=True):
        assert streamed[m["id"]] == m["content"]  # what streams is what stays
        assert m["content"].replace("  \n", "\n") == reply  # line by line, the same text
    assert "Final Answer: 48" in ais[-1]["content"]
    for s in snapshots:  # an AI message, once shown, only ever gains its tool call
        for m in s:
            if m["type"] == "ai":
                assert m["content"] == next(a["content"] for a in ais if a["id"] == m["id"])


def first_seen_parent(history: list[dict], message_id: str) -> dict | None:
    """What Agent Chat UI's Regenerate and edit run from: the parent checkpoint of the first
    state holding the message (the SDK's ``getMessagesMetadata``)."""
    for state in reversed(history):  # history is newest first
        if any(m.get("id") == message_id for m in state["values"].get("messages") or []):
            return state["parent_checkpoint"]
    raise AssertionError(f"no state holds {message_id}")


def readable(client: Any, thread: str) -> dict:
    """The thread's state and history read as a client reads them (a 500 raises)."""
    client.threads.get_history(thread, limit=100)
    return client.threads.get_state(thread)["values"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_forks_regenerate_edit_and_the_state_editor_keep_the_thread_readable(
    client: Any, openai_server: FakeOpenAIServer, variant: str
) -> None:
    ctx = context(openai_server)
    thread = client.threads.create()["thread_id"]
    for question in (QUESTION, "And once more?"):
        message = {"type": "human", "content": [{"type": "text", "text": question}]}
        client.runs.wait(thread, variant, input={"messages": [message]}, context=ctx)
    messages = readable(client, thread)["messages"]
    assert chat_turns(messages) == ONE_RUN * 2
    # Regenerate the last answer: a run with no input from its first-seen parent checkpoint.
    history = client.threads.get_history(thread, limit=100)
    parent = first_seen_parent(history, messages[-1]["id"])
    client.runs.wait(thread, variant, input=None, checkpoint=parent, context=ctx)
    values = readable(client, thread)
    assert chat_turns(values["messages"]) == ONE_RUN * 2 and values["answer"] == "48"
    # Edit the first question: a new human message from the thread's first checkpoint.
    history = client.threads.get_history(thread, limit=100)
    parent = first_seen_parent(history, messages[0]["id"])
    edited = {"type": "human", "content": [{"type": "text", "text": "How many years, edited?"}]}
    client.runs.wait(thread, variant, input={"messages": [edited]}, checkpoint=parent, context=ctx)
    values = readable(client, thread)
    assert chat_turns(values["messages"]) == ONE_RUN, chat_turns(values["messages"])
    assert values["question"] == "How many years, edited?" and values["answer"] == "48"
    # The state editor: the whole messages list back, one message changed.
    changed = [*values["messages"][:-1], {**values["messages"][-1], "content": "forty-eight"}]
    client.threads.update_state(thread, {"messages": changed})
    values = readable(client, thread)
    assert chat_turns(values["messages"]) == ONE_RUN
    assert values["messages"][-1]["content"] == "forty-eight"
    # Studio's fork: the state editor at an earlier checkpoint, then a run from there.
    history = client.threads.get_history(thread, limit=100)
    earlier = history[len(history) // 2]
    forked = client.threads.update_state(
        thread, {"question": "forked"}, checkpoint=earlier["checkpoint"]
    )
    assert readable(client, thread) is not None
    client.runs.wait(
        thread,
        variant,
        input={"messages": [{"type": "human", "content": "Once more, forked?"}]},
        checkpoint=forked["checkpoint"],
        context=ctx,
    )
    values = readable(client, thread)
    assert values["answer"] == "48" and values["messages"][-1]["type"] == "ai"


def test_a_thread_reads_after_the_periodic_full_copy(
    client: Any, openai_server: FakeOpenAIServer
) -> None:
    """``messages`` is stored in full every SNAPSHOT_EVERY updates (every 3 on the test
    server's ``snapshots`` graph); the server decodes that copy to dicts, and the thread must
    still read, take the next question and fork."""
    ctx = context(openai_server)
    thread = client.threads.create()["thread_id"]
    for question in (QUESTION, "And once more?"):
        client.runs.wait(thread, "snapshots", input={"messages": [question]}, context=ctx)
        values = readable(client, thread)
        assert values["answer"] == "48"
    assert chat_turns(values["messages"]) == ONE_RUN * 2
    history = client.threads.get_history(thread, limit=100)
    parent = first_seen_parent(history, values["messages"][-1]["id"])
    client.runs.wait(thread, "snapshots", input=None, checkpoint=parent, context=ctx)
    assert chat_turns(readable(client, thread)["messages"]) == ONE_RUN * 2


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_follow_up_sees_the_conversation_and_an_edited_one_only_what_came_before(
    client: Any, openai_server: FakeOpenAIServer, variant: str, fmt: str
) -> None:
    """``history_runs``: the follow-up's prompt holds the first question and its answer (not
    its Observations); editing the follow-up (a fork from before it) sees the same, and
    editing the first question sees no earlier conversation at all."""
    ctx = {**context(openai_server), "action_format": fmt}
    if fmt == "tool_calls":
        openai_server.responder = seed_call_responder
    thread = client.threads.create()["thread_id"]

    def ask(text: str, **fork: Any) -> list[dict[str, Any]]:
        asked = len(openai_server.requests)
        message = {"type": "human", "content": text}
        values = client.runs.wait(
            thread, variant, input={"messages": [message]}, context=ctx, **fork
        )
        assert values["answer"] == "48" and values["status"] == "answered", values
        return openai_server.requests[asked]["messages"]  # the run's first prompt

    def said(sent: list[dict[str, Any]]) -> str:
        return "\n".join(str(m.get("content") or "") for m in sent)

    first = ask(QUESTION)
    assert "Earlier in this conversation" not in said(first)
    follow_up = ask("And in months?")
    block = f"Asked: {QUESTION}\nAnswered: 48\n\nQuestion: And in months?"
    assert block in said(follow_up)
    assert not [m for m in follow_up if m["role"] in ("tool", "assistant")]
    # Nothing else of the first run: without its block, the prompt is the first one's.
    head, _, tail = said(follow_up).partition("Earlier in this conversation")
    alone = head + tail.split("Answered: 48\n\n", 1)[1]
    assert alone == said(first).replace(QUESTION, "And in months?")
    messages = readable(client, thread)["messages"]
    assert [m["content"] for m in messages if m["type"] == "human"] == [QUESTION, "And in months?"]
    # Edit the follow-up: a fork from before it sees the first exchange, not the follow-up.
    history = client.threads.get_history(thread, limit=100)
    second = [m for m in messages if m["type"] == "human"][1]
    edited = ask("And in days?", checkpoint=first_seen_parent(history, second["id"]))
    assert f"Asked: {QUESTION}\nAnswered: 48\n\nQuestion: And in days?" in said(edited)
    assert "in months" not in said(edited)
    # Edit the first question: nothing came before it.
    history = client.threads.get_history(thread, limit=100)
    parent = first_seen_parent(history, messages[0]["id"])
    assert "Earlier in this conversation" not in said(ask("Edited?", checkpoint=parent))


@pytest.mark.parametrize("fmt", ["text", "tool_calls"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_an_edit_forked_as_agent_chat_ui_forks_it_replaces_the_question(
    client: Any, openai_server: FakeOpenAIServer, variant: str, fmt: str
) -> None:
    """Issue 58, 3: Agent Chat UI reads a thread's history with ``limit=10`` and forks an edit
    from the parent of the oldest state read that holds the message. Editing the only question,
    then the first of two (each run 14 checkpoints): the edited question replaces it and every
    later exchange, in the thread's messages and in the model's prompts."""
    ctx = {**context(openai_server), "action_format": fmt}
    if fmt == "tool_calls":
        openai_server.responder = seed_call_responder
    thread = client.threads.create()["thread_id"]

    def ask(text: str, earlier: bool = False, **fork: Any) -> dict[str, Any]:
        asked = len(openai_server.requests)
        message = {"type": "human", "content": [{"type": "text", "text": text}]}
        values = client.runs.wait(
            thread, variant, input={"messages": [message]}, context=ctx, **fork
        )
        assert values["answer"] == "48" and values["status"] == "answered", values
        sent = "\n".join(
            str(m.get("content") or "")
            for r in openai_server.requests[asked:]
            for m in r["messages"]
        )
        assert ("Earlier in this conversation" in sent) is earlier, sent
        assert "did not finish" not in sent
        return values

    def edit(index: int, text: str) -> dict[str, Any]:
        history = client.threads.get_history(thread, limit=10)  # as Agent Chat UI reads it
        humans = [m for m in history[0]["values"]["messages"] if m["type"] == "human"]
        return ask(text, checkpoint=first_seen_parent(history, humans[index]["id"]))

    def questions(values: dict[str, Any]) -> list[str]:
        return [m["content"][0]["text"] for m in values["messages"] if m["type"] == "human"]

    ask(QUESTION)
    values = edit(0, "Only, edited?")
    assert questions(values) == ["Only, edited?"] and chat_turns(values["messages"]) == ONE_RUN
    ask("Again?", earlier=True)
    values = edit(0, "First, edited?")
    assert questions(values) == ["First, edited?"] and chat_turns(values["messages"]) == ONE_RUN
    assert [r["question"] for r in values["earlier_runs"]] == ["First, edited?"]
    stored = readable(client, thread)["messages"]
    assert [(m["id"], m["content"]) for m in stored] == [
        (m["id"], m["content"]) for m in values["messages"]
    ]
