"""The agent served to other agents: `langgraph dev` mounts an MCP endpoint (``/mcp``: each
graph a tool) and an A2A endpoint per assistant (``/a2a/{assistant_id}``) for the graphs it
serves. reactgraph's graphs (``langgraph.json``'s, as a user serves them) are called through
them with real clients: langchain-mcp-adapters' MCP client and the A2A SDK's client, the model
the local OpenAI-compatible test server answering the seed script (48, in four turns)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reactgraph import VARIANTS
from tests.fakes import FakeOpenAIServer
from tests.langgraph_dev import LANGGRAPH, langgraph_dev

# One pytest-xdist worker runs them all, so the module's servers start once.
pytestmark = [pytest.mark.slow, pytest.mark.servers, pytest.mark.xdist_group("served-to-agents")]

QUESTION = "How many years apart were the Eiffel Tower and the Golden Gate Bridge completed?"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, seed_model_server: FakeOpenAIServer
) -> Iterator[str]:
    yield from served(tmp_path_factory.mktemp("served"), seed_model_server, {})


def served(workdir: Path, model: FakeOpenAIServer, env: dict[str, str]) -> Iterator[str]:
    """The graphs served by ``langgraph dev`` in ``workdir`` on ``model`` (``env`` added)."""
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli is not installed")
    env = {"OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "not-needed", **env}
    with langgraph_dev(workdir, env=env) as url:
        yield url


def mcp_tools(server: str) -> list[Any]:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient(
        {"reactgraph": {"url": f"{server}/mcp", "transport": "streamable_http"}}
    )
    return asyncio.run(client.get_tools())


def test_mcp_lists_every_variant_as_a_tool_asking_for_a_question(server: str) -> None:
    tools = {tool.name: tool for tool in mcp_tools(server)}
    assert set(tools) == set(VARIANTS)
    for tool in tools.values():
        schema = tool.args_schema if isinstance(tool.args_schema, dict) else {}
        properties = schema.get("properties", {})
        # A question, or chat messages (simplified by the server to a text the agent gets).
        assert properties.get("question", {}).get("type") == "string", schema
        assert properties.get("messages", {}).get("type") == "string", schema
        assert not schema.get("required"), schema


@pytest.mark.parametrize("variant", VARIANTS)
def test_mcp_calls_a_variant_and_gets_its_answer(server: str, variant: str) -> None:
    tool = next(tool for tool in mcp_tools(server) if tool.name == variant)
    result = asyncio.run(tool.ainvoke({"question": QUESTION}))
    # The server answers the run's final state as Python's repr, in one text block.
    (block,) = result if isinstance(result, list) else [{"type": "text", "text": result}]
    text = block["text"]
    assert "'answer': '48'" in text and "'status': 'answered'" in text, text[-2000:]
    assert f"'question': {QUESTION!r}" in text


def a2a_send(server: str, assistant_id: str, text: str) -> list[Any]:
    """One message to the assistant through the A2A SDK's client (protocol 1.0, JSON-RPC, as
    the server's card offers); what it answers (``StreamResponse``s)."""
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, Role, SendMessageRequest

    async def send() -> list[Any]:
        async with httpx.AsyncClient(timeout=120) as http:
            config = ClientConfig(httpx_client=http, streaming=False)
            client = await create_client(f"{server}/a2a/{assistant_id}", client_config=config)
            message = Message(
                role=Role.ROLE_USER, parts=[Part(text=text)], message_id=str(uuid.uuid4())
            )
            request = SendMessageRequest(message=message)
            return [event async for event in client.send_message(request)]

    return asyncio.run(send())


def assistant_of(server: str, graph: str) -> str:
    from langgraph_sdk import get_sync_client

    found = get_sync_client(url=server).assistants.search(graph_id=graph, limit=1)
    return found[0]["assistant_id"]


def texts_of(responses: list[Any]) -> list[str]:
    """Every text part the answers carry: a task's artifacts and status message, a message."""
    texts: list[str] = []
    for response in responses:
        parts: list[Any] = []
        if response.HasField("task"):
            for artifact in response.task.artifacts:
                parts += artifact.parts
            parts += response.task.status.message.parts
        if response.HasField("message"):
            parts += response.message.parts
        texts += [part.text for part in parts if part.text]
    return texts


def test_the_a2a_card_names_the_graph(server: str) -> None:
    assistant = assistant_of(server, "transcript")
    card = httpx.get(f"{server}/a2a/{assistant}/.well-known/agent-card.json", timeout=60)
    assert card.status_code == 200, card.text
    assert card.json()["url"].endswith(f"/a2a/{assistant}"), card.json()


@pytest.mark.parametrize("variant", VARIANTS)
def test_a2a_asks_a_variant_and_gets_its_answer(server: str, variant: str) -> None:
    from a2a.types import TaskState

    responses = a2a_send(server, assistant_of(server, variant), QUESTION)
    tasks = [r.task for r in responses if r.HasField("task")]
    assert tasks and tasks[-1].status.state == TaskState.TASK_STATE_COMPLETED, responses
    # The reply is the chat's last message: the model's final step, its Thought and its answer.
    (text,) = texts_of(responses)
    assert text.startswith("Thought: ") and text.endswith("\nFinal Answer: 48"), text


@pytest.fixture(scope="module")
def approving_server(
    tmp_path_factory: pytest.TempPathFactory, seed_model_server: FakeOpenAIServer
) -> Iterator[str]:
    """The same graphs, served with every Action waiting for a person (``REACTGRAPH_APPROVE``)."""
    workdir = tmp_path_factory.mktemp("approving")
    yield from served(workdir, seed_model_server, {"REACTGRAPH_APPROVE": "all"})


def test_an_action_waiting_for_approval_stops_the_mcp_call_with_its_request(
    approving_server: str,
) -> None:
    """MCP has no way to give the decision: the call ends at the first Action, unanswered, and
    its text carries the approval request (what would run)."""
    tool = next(tool for tool in mcp_tools(approving_server) if tool.name == "transcript")
    (block,) = asyncio.run(tool.ainvoke({"question": QUESTION}))
    text = block["text"]
    assert "'__interrupt__'" in text and "'action_request': {'action': 'search'" in text, text
    assert "'answer': '48'" not in text and "'status': 'answered'" not in text


def test_an_action_waiting_for_approval_makes_the_a2a_task_ask_for_input(
    approving_server: str,
) -> None:
    from a2a.types import TaskState

    responses = a2a_send(approving_server, assistant_of(approving_server, "transcript"), QUESTION)
    tasks = [r.task for r in responses if r.HasField("task")]
    assert tasks and tasks[-1].status.state == TaskState.TASK_STATE_INPUT_REQUIRED, responses
    assert not any("Final Answer" in text for text in texts_of(responses))


def test_the_docs_examples_run_against_a_served_graph(server: str) -> None:
    """docs/served-to-agents.md's Python blocks as written, the server's address (and the
    assistant's id) put in for the docs' ``http://127.0.0.1:2024``."""
    from tests.test_readme import BLOCKS, SERVED

    blocks = [code for page, _, language, code in BLOCKS if page == SERVED and language == "python"]
    assert len(blocks) == 2
    for code in blocks:
        code = code.replace("http://127.0.0.1:2024", server)
        code = code.replace("ASSISTANT_ID", assistant_of(server, "transcript"))
        printed: list[str] = []
        names: dict[str, Any] = {"__name__": "docs_example", "print": printed.append}
        exec(compile(code, SERVED, "exec"), names)  # our own docs, not input
        assert printed and "Final Answer: 48" in str(printed[0]), printed
