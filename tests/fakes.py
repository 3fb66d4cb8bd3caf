"""The test doubles, all in one place: a recording scripted model and misbehaving tools."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.tools import BaseTool, StructuredTool, Tool, tool
from pydantic import BaseModel, Field

from reactgraph.nodes.calling.tokens import message_text
from reactgraph.scripted import Reply, ScriptedChatModel, tool_call_reply


class Runner(Protocol):
    """Runs a graph through ``invoke`` or ``ainvoke`` (the ``run`` fixture's two params)."""

    mode: str

    def __call__(self, graph: Any, input: Any, config: Any = None, **kwargs: Any) -> Any: ...


def runner(mode: str) -> Runner:
    """A ``Runner`` that uses ``graph.invoke`` (mode "invoke") or ``graph.ainvoke``."""

    def run(graph: Any, input: Any, config: Any = None, **kwargs: Any) -> Any:
        if mode == "invoke":
            return graph.invoke(input, config, **kwargs)
        return asyncio.run(graph.ainvoke(input, config, **kwargs))

    run.mode = mode  # type: ignore[attr-defined]
    return run  # type: ignore[return-value]


class FakeChatModel(ScriptedChatModel):
    """The scripted model with helpers to read back what it was sent."""

    @property
    def prompts(self) -> list[str]:
        """Each call's prompt as one text."""
        return [prompt_text(call["messages"]) for call in self.calls]

    @property
    def stops(self) -> list[list[str] | None]:
        """The ``stop`` argument of each call."""
        return [call["stop"] for call in self.calls]

    @property
    def caps(self) -> list[int | None]:
        """The reply cap (``max_tokens``) each call was sent with, None for none."""
        return [call["options"].get("max_tokens") for call in self.calls]

    @property
    def bound(self) -> list[list[str]]:
        """The names of the tools each call was sent with (``bind_tools``), [] for none."""
        return [
            [t["function"]["name"] for t in c["options"].get("tools") or []] for c in self.calls
        ]


class StreamingFakeChatModel(FakeChatModel):
    """The fake as a streaming model (LangChain calls the token callbacks): text in pieces of a
    few characters, each tool call's arguments in pieces too (``tool_call_chunks``, as providers
    stream them), then a last chunk with the finish reason (and the usage, with
    ``report_usage``)."""

    piece: int = 4

    def _chunks(self, result: ChatResult) -> Iterator[ChatGenerationChunk]:
        message = result.generations[0].message
        text = str(message.content)
        for start in range(0, len(text), self.piece):
            yield ChatGenerationChunk(message=AIMessageChunk(text[start : start + self.piece]))
        calls = [
            (c["name"], json.dumps(c["args"]), c["id"]) for c in getattr(message, "tool_calls", [])
        ] + [(c["name"], c["args"] or "", c["id"]) for c in message.invalid_tool_calls]
        for index, (name, args, call_id) in enumerate(calls):
            pieces = [args[i : i + self.piece] for i in range(0, len(args), self.piece)] or [""]
            for number, part in enumerate(pieces):
                head = {"name": name, "id": call_id} if number == 0 else {"name": None, "id": None}
                chunk = tool_call_chunk(args=part, index=index, **head)
                yield ChatGenerationChunk(message=AIMessageChunk("", tool_call_chunks=[chunk]))
        last = AIMessageChunk("", response_metadata=message.response_metadata)
        last.usage_metadata = message.usage_metadata
        yield ChatGenerationChunk(message=last)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        yield from self._chunks(self._generate(messages, stop, None, **kwargs))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._chunks(await self._agenerate(messages, stop, None, **kwargs)):
            yield chunk


class TextOnlyModel(FakeChatModel):
    """A chat model that cannot call tools natively (``bind_tools`` is not implemented)."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        raise NotImplementedError


def prompt_text(messages: Sequence[BaseMessage]) -> str:
    """Messages joined into one text, for containment checks."""
    return "\n".join(message_text(m) for m in messages)


# The thread a test's checkpointed runs go on.
CONFIG = {"configurable": {"thread_id": "t1"}}

SEED = [
    "Thought: I need the Eiffel Tower's completion.\nAction: search[Eiffel Tower]",
    "Thought: Now the Golden Gate.\nAction: search[Golden Gate Bridge]",
    "Thought: Subtract.\nAction: calculator[1937-1889]",
    "Thought: I now have enough information.\nFinal Answer: 48",
]
# The seed's tool calls, (name, input) as a ``ToolLog`` records them.
SEED_TOOL_CALLS = [
    ("search", "Eiffel Tower"),
    ("search", "Golden Gate Bridge"),
    ("calculator", "1937-1889"),
]


def call(name: str, args: dict[str, Any], thought: str = "", call_id: str = "") -> AIMessage:
    """A reply that calls one tool natively (the tool_calls format)."""
    return tool_call_reply(name, args, thought, call_id)


def calls(*named: tuple[str, dict[str, Any]], thought: str = "") -> AIMessage:
    """A reply that calls several tools at once, ids ``call-1``, ``call-2``..."""
    found = [
        {"name": n, "args": a, "id": f"call-{i}", "type": "tool_call"}
        for i, (n, a) in enumerate(named, 1)
    ]
    return AIMessage(thought, tool_calls=found)


def bad_call(name: str, raw_args: str, thought: str = "") -> AIMessage:
    """A reply whose one tool call's arguments are not JSON (LangChain's ``invalid_tool_calls``)."""
    invalid = [
        {
            "name": name,
            "args": raw_args,
            "id": "call-bad",
            "error": None,
            "type": "invalid_tool_call",
        }
    ]
    return AIMessage(thought, invalid_tool_calls=invalid)


# The seed as native tool calls: search, search, calculator, then the answer.
SEED_CALLS = [
    call("search", {"query": "Eiffel Tower"}, "I need the Eiffel Tower's completion.", "call-a"),
    call("search", {"query": "Golden Gate Bridge"}, "Now the Golden Gate.", "call-b"),
    call("calculator", {"expression": "1937-1889"}, "Subtract.", "call-c"),
    AIMessage("Thought: I now have enough information.\nFinal Answer: 48"),
]


def seed_call_responder(request: dict[str, Any]) -> ServerReply:
    """The seed for the test server as tool calls, per conversation (its tool results count the
    turns); a request without tools, or that refuses them (``tool_choice="none"``, the forced
    answer), gets the text seed."""
    if not request.get("tools") or request.get("tool_choice") == "none":
        return seed_responder(request)
    done = sum(m["role"] == "tool" for m in request["messages"])
    steps = [
        Call("search", {"query": "Eiffel Tower"}, id="call-a"),
        Call("search", {"query": "Golden Gate Bridge"}, id="call-b"),
        Call("calculator", {"expression": "1937-1889"}, id="call-c"),
    ]
    return (
        steps[done]
        if done < len(steps)
        else "Thought: I now have enough information.\nFinal Answer: 48"
    )


def seed_responder(request: dict[str, Any]) -> str:
    """The seed script for the test server, per conversation: any number of runs at once."""
    done = sum(str(m["content"]).startswith("Observation:") for m in request["messages"])
    return SEED[min(done, len(SEED) - 1)]


def colour_reply(messages: Sequence[BaseMessage]) -> str:
    """A scripted model for the eval tests' colour questions: search the creature, then answer
    the colour the Observation states (or "unknown")."""
    question = message_text(messages[0]).rsplit("Question:", 1)[-1]
    observations = [m for m in messages if message_text(m).startswith("Observation:")]
    if not observations:
        found = re.search(r"What colour is the (.+?) (?:that|in)\b", question)
        return f"Thought: look it up.\nAction: search[{found.group(1) if found else question}]"
    colour = re.search(r"\bis (\w+)\.", message_text(observations[-1]))
    return f"Final Answer: {colour.group(1) if colour else 'unknown'}"


def _colour_of(question: str, results: Sequence[str]) -> str | dict[str, Any]:
    """The colour in the last result, or the search arguments for the creature asked about."""
    if not results:
        found = re.search(r"What colour is the (.+?) (?:that|in)\b", question)
        return {"query": found.group(1) if found else question}
    colour = re.search(r"\bis (\w+)\.", results[-1])
    return colour.group(1) if colour else "unknown"


def colour_call_reply(messages: Sequence[BaseMessage]) -> str | AIMessage:
    """``colour_reply`` for every arm of an eval: a text-format prompt gets its text; a
    tool-calling one (the question in a message of its own: the tool_calls format, the prebuilt
    agent) searches with a native call, then answers the colour with no tool call."""
    texts = [message_text(m) for m in messages]
    if "Available actions:" in texts[0]:
        return colour_reply(messages)
    question = next((t for t in texts if "What colour" in t), texts[-1])
    results = [message_text(m) for m in messages if m.type == "tool"]
    found = _colour_of(question, results)
    return AIMessage(found) if isinstance(found, str) else call("search", found, "Look it up.")


def colour_call_model() -> ScriptedChatModel:
    """A fresh model answering with ``colour_call_reply`` (picklable, for worker processes)."""
    return ScriptedChatModel(replies=[colour_call_reply] * 1000)


def colour_call_responder(body: dict[str, Any]) -> ServerReply:
    """``colour_call_reply`` for the test server: text requests as ``colour_reply``, requests
    with tools by tool calls."""
    messages = body["messages"]
    if not body.get("tools"):
        return colour_reply([_Said(str(m.get("content") or "")) for m in messages])
    question = next(
        (str(m["content"]) for m in messages if "What colour" in str(m.get("content"))), ""
    )
    found = _colour_of(question, [str(m["content"]) for m in messages if m["role"] == "tool"])
    return found if isinstance(found, str) else Call("search", found, id=f"call-{len(messages)}")


@dataclass
class _Said:
    """A message as ``colour_reply`` reads it: its content."""

    content: str


def colour_model() -> ScriptedChatModel:
    """A fresh model answering with ``colour_reply`` (picklable, for worker processes)."""
    return ScriptedChatModel(replies=[colour_reply] * 1000)


def echo_question_reply(messages: Sequence[BaseMessage]) -> str:
    """Answer with the question's own text: a result shows which question it answered."""
    question = message_text(messages[0]).rsplit("Question:", 1)[-1].strip()
    return f"Final Answer: {question}"


def echo_question_model() -> ScriptedChatModel:
    """A fresh model answering ``echo_question_reply`` (picklable, for worker processes)."""
    return ScriptedChatModel(replies=[echo_question_reply] * 1000)


def scripted_recipe(
    db: str | os.PathLike[str], model_factory: Callable[[], Any] = echo_question_model
) -> Any:
    """A worker's ``Recipe`` (``reactgraph.app.recipe``) for the transcript variant on ``db``,
    its model made by ``model_factory`` (module-level, so that it crosses into workers)."""
    from reactgraph.app.recipe import Recipe

    return Recipe(
        variant="transcript",
        model="scripted",
        base_url=None,
        timeout=10.0,
        corpus=None,
        settings={"tool_timeout": 10.0},
        db=str(db),
        model_factory=model_factory,
    )


def fake_model(*replies: Reply, **options: Any) -> FakeChatModel:
    """A FakeChatModel with these replies."""
    return FakeChatModel(replies=list(replies), **options)


def action(name: str, tool_input: str, thought: str = "I should look.") -> str:
    """A well-formed action reply."""
    return f"Thought: {thought}\nAction: {name}[{tool_input}]"


def answer(text: str) -> str:
    """A well-formed final answer reply."""
    return f"Thought: I now have enough information.\nFinal Answer: {text}"


def three_turns(messages: Sequence[BaseMessage]) -> str:
    """A reply that follows from the Observations in view: echo 1, echo 2, then "done". A
    resumed run (in a new process, say) goes on where the killed one stopped."""
    done = sum(message_text(m).startswith("Observation:") for m in messages)
    return action("echo", str(done + 1)) if done < 2 else answer("done")


def three_turn_model() -> FakeChatModel:
    """A model for 3-turn runs that can be resumed at any step (``three_turns``)."""
    return fake_model(*[three_turns] * 6)


class ToolLog:
    """Records tool calls in order, across tools."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def echo(self, name: str = "echo") -> BaseTool:
        """A tool that returns its input, recorded."""

        def run(text: str) -> str:
            self.calls.append((name, text))
            return f"echo: {text}"

        return StructuredTool.from_function(run, name=name, description=f"{name} the input")

    def wrap(self, inner: BaseTool) -> BaseTool:
        """The same tool, its calls recorded."""

        def run(text: str) -> str:
            self.calls.append((inner.name, text))
            return inner.invoke(text)

        return StructuredTool.from_function(run, name=inner.name, description=inner.description)


def stop_process(process: Any, grace_s: float) -> None:
    """End a server process the test started: terminated, killed after ``grace_s`` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def per_message_counter(messages: Any) -> int:
    """100 tokens a message: compaction thresholds in whole messages."""
    return 100 * len(messages)


def echo_graph(
    variant: str, action_format: str, model: Any, **settings: Any
) -> tuple[Any, ToolLog]:
    """A graph of ``variant`` in ``action_format`` over ``model`` and an echo tool (its calls in
    the returned log). A variant that compacts counts 100 tokens a message, in a
    100,000-token window unless ``settings`` give one."""
    from reactgraph import build_graph
    from reactgraph.variants import REGISTRY

    log = ToolLog()
    if "token_counter" in REGISTRY[variant].objects:
        settings.setdefault("token_counter", per_message_counter)
        settings.setdefault("context_window", 100_000)
    graph = build_graph(
        variant, model=model, tools=[log.echo()], action_format=action_format, **settings
    )
    return graph, log


def classic_seed_tools(log: list[tuple[str, str]] | None = None) -> list[BaseTool]:
    """The seed's search and calculator as classic ``Tool`` objects (one string in), the form
    of most ReAct tutorials: over the bundled corpus, each call appended to ``log``. The
    command line (``--tools tests.fakes:classic_seed_tools``) and the LangGraph server
    (``REACTGRAPH_TOOLS``) load them too."""
    from reactgraph.tools import LocalCorpus
    from reactgraph.tools.calculator import evaluate, format_number

    calls = log if log is not None else []
    corpus = LocalCorpus()

    def search(query: str) -> str:
        calls.append(("search", query))
        return corpus.search(query)

    def calculate(expression: str) -> str:
        calls.append(("calculator", expression))
        return format_number(evaluate(expression))

    return [
        Tool(name="search", func=search, description="Search the encyclopedia for a topic."),
        Tool.from_function(
            func=calculate, name="calculator", description="Evaluate arithmetic, e.g. 2*(3+4)."
        ),
    ]


class _Query(BaseModel):
    query: str = Field(max_length=60, description="what to look up")


class _Keyword(BaseModel):
    keyword: str = Field(max_length=30, description="a word on the page")


class _Expression(BaseModel):
    expression: str = Field(max_length=40, description="arithmetic, e.g. 1937-1889")


def bounded_tools() -> list[BaseTool]:
    """The bundled search, lookup and calculator with each argument's length bounded in its
    schema (``maxLength``): a server that constrains tool calls by a grammar built from the
    schema (llama-cpp-python's chatml-function-calling, which ignores ``max_tokens`` there)
    then cannot let a small model write one argument to the end of its context. The command
    line loads them too (``--tools tests.fakes:bounded_tools``)."""
    from reactgraph.tools import calculator, search_tools

    search, lookup = search_tools()
    schemas = {"search": _Query, "lookup": _Keyword, "calculator": _Expression}
    return [
        t.model_copy(update={"args_schema": schemas[t.name]}) for t in (search, lookup, calculator)
    ]


@tool
def explode(text: str) -> str:
    """Always raises."""
    raise RuntimeError(f"boom on {text}")


@tool
def sleepy(text: str) -> str:
    """Sleeps far past any test timeout."""
    time.sleep(30)
    return "too late"


@tool
def big(text: str) -> str:
    """Returns 5,000 characters."""
    return "x" * 5000


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers given as a JSON object."""
    return a + b


def count_index_builds(monkeypatch: Any) -> list[int]:
    """How many times the ``messages`` reducer builds its id index from here on: a one-item
    list, counted up (the patch is undone with ``monkeypatch``)."""
    from reactgraph.nodes.vocabulary import reducers

    built = [0]
    positions = reducers._positions

    def counted(out: Any) -> Any:
        built[0] += 1
        return positions(out)

    monkeypatch.setattr(reducers, "_positions", counted)
    return built


# --- A local OpenAI-compatible chat-completions server --------------------------------------


@dataclass
class Fault:
    """An HTTP error answer: status, message, extra headers."""

    status: int
    message: str = "injected fault"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Hang:
    """Answer only after ``seconds`` (past the client's timeout), then with ``reply``."""

    seconds: float
    reply: str = "Final Answer: too late"


class Gate:
    """A responder for the test server that holds the requests ``hold`` picks, unanswered,
    until ``open``: a test waits for a number of them (``wait_held``), acts on a known state
    (every run in flight stopped mid-way), then lets them through, bar any it drops (requests
    whose client is gone: they are answered only at ``close``, with a fault)."""

    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Any],
        hold: Callable[[dict[str, Any]], bool],
    ) -> None:
        self._responder, self._hold = responder, hold
        self._changed = threading.Condition()
        self.held: list[dict[str, Any]] = []
        self._opened = self._closed = False
        self._dropped: list[dict[str, Any]] = []

    def __call__(self, request: dict[str, Any]) -> Any:
        with self._changed:
            if self._opened or not self._hold(request):
                return self._responder(request)
            self.held.append(request)
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._closed or self._passes(request))
            self.held.remove(request)
            if not self._passes(request):
                return Fault(503, "the test is over")
        return self._responder(request)

    def _passes(self, request: dict[str, Any]) -> bool:
        return self._opened and not any(request is dropped for dropped in self._dropped)

    def wait_held(self, count: int, timeout: float) -> list[dict[str, Any]]:
        """The requests held once ``count`` are (a copy); TimeoutError if not by ``timeout``."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.held) >= count, timeout):
                raise TimeoutError(f"{len(self.held)} requests held, not {count}")
            return list(self.held)

    def open(self, drop: Sequence[dict[str, Any]] = ()) -> None:
        """Answer the requests held, and every one after, but those in ``drop``."""
        with self._changed:
            self._dropped.extend(drop)
            self._opened = True
            self._changed.notify_all()

    def close(self) -> None:
        """Answer the dropped requests too (with a fault): no server thread is left waiting."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()


@dataclass
class Trickle:
    """A 200 answer whose body arrives a few bytes every ``interval`` seconds: each read is
    quick, so only a deadline on the whole call can stop it."""

    interval: float
    reply: str = "Final Answer: trickled"


@dataclass
class Raw:
    """A literal response body (malformed JSON, no choices, content null) with a status. A
    streamed request gets it as one event's data (``events``), or else as it is, with
    ``content_type``: a reply that is not an event stream at all."""

    body: str | bytes
    status: int = 200
    events: bool = True
    content_type: str = "application/json"


# Malformed 200 replies as some servers and proxies send them, to streamed requests too.
NOT_UTF8 = Raw(b'{"choices": [{"message": {"content": "\xff\xfe\xc3("}}]}', events=False)
NO_CHOICES = Raw(
    '{"id": "x", "object": "chat.completion", "created": 1, "model": "m"}', events=False
)


@dataclass
class Unstreamed:
    """A complete, plain chat completion (its content, usage and finish reason), sent as JSON
    whether or not the request asked for a stream, as some proxies and servers do."""

    reply: str


@dataclass
class Cut:
    """A streamed reply that ends before its finish reason: the role, ``sent`` of the text,
    then ``[DONE]``, as llama-cpp-python's server ends a stream when another request waits.
    A plain request gets ``reply`` whole (that server never cuts those)."""

    reply: str
    sent: str = ""


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # a burst of 100 clients must not be refused
    daemon_threads = True
    connections = 0
    """How many connections clients opened (streams are kept alive, as real servers keep them)."""

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections += 1
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closes an idle kept-alive connection (resets it) is not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class Call:
    """An assistant message calling one tool (the tool-calling protocol), streamed when asked:
    ``arguments`` as JSON, or a string sent as it is (arguments that are not JSON)."""

    name: str
    arguments: dict[str, Any] | str
    id: str = "call-1"
    content: str | None = None
    """The message's text beside the call (its Thought), if any."""


@dataclass
class Calls:
    """An assistant message calling several tools at once (a parallel tool call)."""

    calls: list[Call]
    content: str | None = None


@dataclass
class EmptyStream:
    """A 200 event stream with no event in it, as llama-cpp-python's chatml-function-calling
    answers a streamed request once its model chooses to call a tool; a plain request gets
    ``instead``."""

    instead: Call | Calls | str


Answer = str | Fault | Hang | Trickle | Raw | Call | Calls | EmptyStream | Unstreamed | Cut
ServerReply = Answer | Callable[[dict[str, Any]], Answer]


class Body:
    """A streamed response body as the HTTP library hands it to the transport: its chunks, how
    many were read, and whether it was closed (its connection released)."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks, self.read, self.closed = list(chunks), 0, False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.chunks:
            self.read += 1
            yield chunk

    def close(self) -> None:
        self.closed = True


class FakeOpenAIServer:
    """``POST /v1/chat/completions`` on 127.0.0.1, scripted per test: it honours ``stop`` as
    providers do (or ignores it), reports ``usage``, streams server-sent events when asked (with
    usage when ``stream_options.include_usage``, unless ``stream_usage`` is off, as on
    llama-cpp-python's server), and injects latency and faults. Every request it gets is kept in
    ``requests``."""

    def __init__(self, port: int = 0) -> None:
        self.script: deque[ServerReply] = deque()
        self.responder: Callable[[dict[str, Any]], ServerReply] | None = None
        self.requests: list[dict[str, Any]] = []
        self.usages: list[dict[str, int]] = []
        """The token counts of each reply it wrote (sent or not, as ``stream_usage`` says)."""
        self.report_usage = True
        """False: no reply carries ``usage`` (plain or streamed), as some servers send none."""
        self.usage_sent: dict[str, Any] | Any = None
        """When set, what every reply sends as its ``usage`` instead of its counts: a mapping's
        fields over the counts (``{"completion_tokens": -300000}``, ``float("nan")``...), or
        anything else as it is (a string, a list), as a hostile proxy might."""
        self.stream_usage = True
        self.stream_end: threading.Event | None = None
        """When set, a streamed reply's body ends only once this event is (after its ``[DONE]``),
        as a server that leaves a body open after its last event would."""
        self.latency_s = 0.0
        self.honour_stop = True
        self.reject_stop = False
        self.fingerprint: str | None = None
        """The ``system_fingerprint`` of every reply (llama.cpp's ``llama-server`` sends its
        build, ``b6123-abcdef0``; OpenAI ``fp_...``); None: none, as llama-cpp-python's."""
        self.reject_fields: set[str] = set()
        """Request fields answered with a 400 naming them, as a strict server does."""
        self.refuse_null_content = False
        """Answer 500 to an assistant message whose content is null, as llama-cpp-python's
        server does (its request model wants a string)."""
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()
        self._asked = threading.Event()  # set by the first request
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes: without this, Nagle's algorithm and
            # delayed ACKs add ~40 ms to every keep-alive request.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server._handle(self, body)

        self._http = _Server(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        """How many connections clients have opened to it."""
        return self._http.connections

    def close(self) -> None:
        """Stop serving."""
        self._http.shutdown()
        self._http.server_close()

    def hold(self) -> threading.Event:
        """Answer as ``seed_responder`` does, each request only once the gate returned is set (or
        after a minute): a test holds a run mid-way, and lets it go."""
        gate = threading.Event()
        self.responder = lambda body: gate.wait(60) and seed_responder(body)
        return gate

    def wait_for_a_request(self, timeout: float = 60) -> bool:
        """Wait until the server has had its first request; whether it has."""
        return self._asked.wait(timeout)

    def _next(self, body: dict[str, Any]) -> Answer:
        with self._lock:
            reply = self.script.popleft() if self.script else self.responder
        if reply is None:
            return Fault(500, "the test server's script is exhausted")
        return reply(body) if callable(reply) else reply

    def _handle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(body)
            self._asked.set()
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(self.latency_s)
            nulls = [
                m for m in body["messages"] if m["role"] == "assistant" and m.get("content") is None
            ]
            rejected = sorted(self.reject_fields & set(body))
            if self.reject_stop and "stop" in body:
                reply: Answer = Fault(
                    400, "Unsupported parameter: 'stop' is not supported with this model."
                )
            elif rejected:
                reply = Fault(400, f"Unrecognized request argument supplied: {rejected[0]}")
            elif self.refuse_null_content and nulls:
                reply = Fault(
                    500, "validation error: assistant content: Input should be a valid string"
                )
            else:
                reply = self._next(body)
            if isinstance(reply, Hang):
                time.sleep(reply.seconds)
                reply = reply.reply
            if isinstance(reply, EmptyStream) and body.get("stream"):
                self._send_events(handler, [], done=False)
                return
            if isinstance(reply, EmptyStream):
                reply = reply.instead
            if isinstance(reply, Trickle):
                self._trickle(handler, body, reply)
            elif isinstance(reply, Raw) and body.get("stream") and reply.status == 200:
                self._stream_raw(handler, reply)
            elif isinstance(reply, Raw):
                data = reply.body.encode() if isinstance(reply.body, str) else reply.body
                handler.send_response(reply.status)
                handler.send_header("Content-Type", reply.content_type)
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data)
            elif isinstance(reply, Fault):
                self._send(
                    handler,
                    reply.status,
                    {"error": {"message": reply.message, "type": "test", "param": None}},
                    reply.headers,
                )
            elif isinstance(reply, Call | Calls):
                self._call(handler, body, reply)
            elif isinstance(reply, Unstreamed):
                self._complete(handler, {**body, "stream": False}, reply.reply)
            elif isinstance(reply, Cut) and body.get("stream"):
                self._cut(handler, body, reply)
            elif isinstance(reply, Cut):
                self._complete(handler, body, reply.reply)
            else:
                self._complete(handler, body, reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout): nothing to answer
        finally:
            with self._lock:
                self.active -= 1

    def _call(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], reply: Call | Calls
    ) -> None:
        made = reply.calls if isinstance(reply, Calls) else [reply]
        content = reply.content
        arguments = [
            c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments) for c in made
        ]
        tool_calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": a}}
            for c, a in zip(made, arguments, strict=True)
        ]
        prompt = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4 + 1
        usage: Any = {"prompt_tokens": prompt, "completion_tokens": 10, "total_tokens": prompt + 10}
        self.usages.append(usage)
        usage = self._sent(usage)
        base = self._base(body)
        if not body.get("stream"):
            message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
            choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
            self._send(
                handler,
                200,
                self._counted(
                    {**base, "object": "chat.completion", "usage": usage, "choices": [choice]}
                ),
            )
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": content or ""}]
        for index, (made_call, args) in enumerate(zip(made, arguments, strict=True)):
            head = {"index": index, "id": made_call.id, "type": "function"}
            deltas.append(
                {"tool_calls": [{**head, "function": {"name": made_call.name, "arguments": ""}}]}
            )
            for start in range(0, len(args), 8):
                part = {"index": index, "function": {"arguments": args[start : start + 8]}}
                deltas.append({"tool_calls": [part]})
        events = [{**chunk, "choices": [{"index": 0, "delta": d}]} for d in deltas]
        events.append(
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
        )
        if self._streams_usage(body):
            events.append({**chunk, "choices": [], "usage": usage})
        self._send_events(handler, events)

    def _send_events(
        self,
        handler: BaseHTTPRequestHandler,
        events: list[dict[str, Any]],
        done: bool = True,
        keep_alive: bool = True,
    ) -> None:
        """Server-sent events, then ``[DONE]``. Sent chunked on a connection kept alive, as
        vLLM's, llama.cpp's and OpenAI's servers send them (a client that reads the body to its
        end reuses the connection), ``[DONE]`` and the body's end in one write; or, with
        ``keep_alive`` off (or no ``[DONE]``), on a connection closed afterwards, as a server
        that gives up on a stream does."""
        kept = keep_alive and done
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        if kept:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Connection", "close")
        handler.end_headers()
        lines = [f"data: {json.dumps(event)}\n\n".encode() for event in events]
        if done:
            lines.append(b"data: [DONE]\n\n")
        if not kept:
            for line in lines:
                handler.wfile.write(line)
            handler.wfile.flush()
            handler.close_connection = True
            return
        framed = [b"%x\r\n%s\r\n" % (len(line), line) for line in lines]
        for line in framed[:-1]:
            handler.wfile.write(line)
        if self.stream_end is None:
            handler.wfile.write(framed[-1] + b"0\r\n\r\n")
        else:
            handler.wfile.write(framed[-1])
            handler.wfile.flush()
            self.stream_end.wait(60)
            handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()

    def _complete(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], text: str) -> None:
        if self.honour_stop:
            for sequence in body.get("stop") or []:
                text = text.split(sequence, 1)[0]
        cap = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "stop"
        if isinstance(cap, int) and len(text) > cap * 4:  # four characters a token
            text, finish = text[: cap * 4], "length"
        prompt = sum(len(str(m.get("content", ""))) for m in body["messages"]) // 4 + 1
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": len(text) // 4 + 1,
            "total_tokens": prompt + len(text) // 4 + 1,
        }
        self.usages.append(usage)
        usage = self._sent(usage)
        base = self._base(body)
        if not body.get("stream"):
            message = {"role": "assistant", "content": text}
            self._send(
                handler,
                200,
                self._counted(
                    {
                        **base,
                        "object": "chat.completion",
                        "usage": usage,
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    }
                ),
            )
            return
        chunk = {**base, "object": "chat.completion.chunk"}
        pieces = [text[i : i + 16] for i in range(0, len(text), 16)] or [""]
        events = [
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        ]
        events += [{**chunk, "choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
        events.append({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if self._streams_usage(body):
            events.append({**chunk, "choices": [], "usage": usage})
        self._send_events(handler, events)

    def _base(self, body: dict[str, Any]) -> dict[str, Any]:
        """What every reply (and every chunk of a stream) starts with."""
        base = {"id": "chatcmpl-test", "created": int(time.time()), "model": body["model"]}
        if self.fingerprint is not None:
            base["system_fingerprint"] = self.fingerprint
        return base

    def _counted(self, completion: dict[str, Any]) -> dict[str, Any]:
        """A plain completion, without its ``usage`` when the server reports none."""
        if not self.report_usage:
            completion.pop("usage", None)
        return completion

    def _streams_usage(self, body: dict[str, Any]) -> bool:
        """Whether a stream ends with its usage: asked for, and sent on streams."""
        asked = (body.get("stream_options") or {}).get("include_usage")
        return bool(self.report_usage and self.stream_usage and asked)

    def _sent(self, usage: dict[str, int]) -> Any:
        """The ``usage`` a reply sends: its counts, or ``usage_sent`` over (or instead of) them."""
        if self.usage_sent is None:
            return usage
        if isinstance(self.usage_sent, dict):
            return {**usage, **self.usage_sent}
        return self.usage_sent

    def _cut(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], cut: Cut) -> None:
        chunk = {"id": "chatcmpl-cut", "object": "chat.completion.chunk", "model": body["model"]}
        chunk["created"] = int(time.time())
        events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
        if cut.sent:
            events.append({**chunk, "choices": [{"index": 0, "delta": {"content": cut.sent}}]})
        self._send_events(handler, events, keep_alive=False)

    def _stream_raw(self, handler: BaseHTTPRequestHandler, raw: Raw) -> None:
        """A literal body as a streaming client gets it (``Raw.events``): a completion object
        becomes one chunk (its message the delta), anything else is the event's data as it is;
        or, without events, the body itself, not an event stream."""
        if not raw.events:
            data = raw.body.encode() if isinstance(raw.body, str) else raw.body
            handler.send_response(200)
            handler.send_header("Content-Type", raw.content_type)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        data = raw.body.encode() if isinstance(raw.body, str) else raw.body
        try:
            value = json.loads(data)
        except ValueError:
            pass  # sent as it is, bytes that are not UTF-8 included
        else:
            if isinstance(value, dict) and isinstance(value.get("choices"), list):
                value["object"] = "chat.completion.chunk"
                for choice in value["choices"]:
                    if isinstance(choice, dict) and "message" in choice:
                        choice["delta"] = choice.pop("message")
            data = json.dumps(value).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(b"data: " + data + b"\n\ndata: [DONE]\n\n")
        handler.wfile.flush()
        handler.close_connection = True

    def _trickle(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], t: Trickle) -> None:
        data = json.dumps(
            {
                "id": "chatcmpl-trickle",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": t.reply},
                        "finish_reason": "stop",
                    }
                ],
            }
        ).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        for start in range(0, len(data), 8):
            handler.wfile.write(data[start : start + 8])
            handler.wfile.flush()
            time.sleep(t.interval)

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)


def demo_db(folder: Path) -> str:
    """A SQLite database in ``folder`` holding one finished run, thread ``t1``: the offline demo's
    question, scripted, with its run record (what ``threads`` and ``show`` read)."""
    from reactgraph import build_graph
    from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES
    from reactgraph.storage.database import new_record, open_db
    from reactgraph.tools import default_tools

    db = str(folder / "runs.sqlite")
    with open_db(db) as (saver, store):
        model = ScriptedChatModel(replies=DEMO_REPLIES)
        graph = build_graph("transcript", model=model, tools=default_tools(), checkpointer=saver)
        graph.invoke({"question": DEMO_QUESTION}, {"configurable": {"thread_id": "t1"}})
        new_record("t1", DEMO_QUESTION, "transcript", "scripted", None, None, {}).save(store)
    return db


def is_summary_request(messages: Sequence[BaseMessage]) -> bool:
    """Whether a model call is the compaction's summary (its prompt opens with its rules)."""
    return message_text(messages[0]).startswith("You are compacting")


def compacting_graph(model: Any, **settings: Any) -> Any:
    """A compaction graph that summarizes every turn or two: 100 tokens a message, a 1,000-token
    window, a threshold of 0.7 and one turn kept (``settings`` change any of them), and the echo
    tool."""
    from reactgraph import build_graph

    options = {
        "token_counter": lambda messages: 100 * len(messages),
        "context_window": 1000,
        "compaction_threshold": 0.7,
        "keep_turns": 1,
    }
    return build_graph("compaction", model=model, tools=[ToolLog().echo()], **(options | settings))


def colour_graph() -> Any:
    """A transcript graph answering with ``colour_reply`` over the bundled search (for worker
    processes, which build their own)."""
    from reactgraph import build_graph
    from reactgraph.tools import search_tools

    return build_graph("transcript", model=colour_model(), tools=search_tools())


def dying_graph() -> Any:
    """A graph whose model ends its process on a question that says "die" (a worker killed
    mid-run), sends its process a SIGINT (a terminal's Ctrl-C) on one that says "interrupt",
    and otherwise answers at once."""
    import os
    import signal

    from reactgraph import build_graph

    def reply(messages: Sequence[BaseMessage]) -> str:
        question = message_text(messages[0]).rsplit("Question:", 1)[-1]
        if "die" in question:
            os._exit(9)
        if "interrupt" in question:
            os.kill(os.getpid(), signal.SIGINT)
        return "Final Answer: ok"

    return build_graph("transcript", model=ScriptedChatModel(replies=[reply] * 100), tools=[])


def probe_graph() -> Any:
    """A graph whose answer says what its worker process was given: whether the model client
    was imported before the graph was built (the fork server's preload), and the value of
    ``REACTGRAPH_PROBE`` in its environment when it answers. With ``REACTGRAPH_PROBE_GATE``
    (a folder), each answer waits for a second worker, so that both take part."""
    import os
    import sys

    from reactgraph import build_graph

    preloaded = "langchain_openai" in sys.modules

    def reply(messages: Sequence[BaseMessage]) -> str:
        probe = os.environ.get("REACTGRAPH_PROBE", "unset")
        gate = os.environ.get("REACTGRAPH_PROBE_GATE")
        if gate:  # a folder: answer once two workers have written their pids there
            Path(gate, str(os.getpid())).touch()
            waited_until = time.monotonic() + 60
            while len(os.listdir(gate)) < 2 and time.monotonic() < waited_until:
                time.sleep(0.01)
        return f"Final Answer: preloaded={preloaded} probe={probe} pid={os.getpid()}"

    return build_graph("transcript", model=ScriptedChatModel(replies=[reply] * 100), tools=[])


@contextlib.asynccontextmanager
async def echo_runner() -> Any:
    """An ``OpenRunner`` (for the engines) whose jobs answer with their own question, after a
    pause of ``pause=S`` in the question when it has one: no graph, no database."""

    async def run(job: Any) -> dict[str, Any]:
        pause = re.search(r"pause=([0-9.]+)", job.question)
        await asyncio.sleep(float(pause.group(1)) if pause else 0)
        return {
            "index": job.index,
            "thread_id": job.thread_id,
            "answer": job.question,
            "status": "answered",
        }

    yield run


def echo_for(recipe: Any) -> Any:
    """``echo_runner`` in place of ``open_runner(recipe)`` (an eval's runs without a graph)."""
    return echo_runner()


@contextlib.contextmanager
def scratch_database(server: str, prefix: str) -> Iterator[str]:
    """The URL of a PostgreSQL database made on ``server`` (any database's URL there) under a
    unique name starting with ``prefix``, dropped afterwards: what is in it is the caller's."""
    import uuid

    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True, connect_timeout=3) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def open_at_once(db: str, count: int = 8) -> list[BaseException]:
    """Open the database ``db`` from ``count`` threads released together (``open_db``); what
    the openings raised."""
    from reactgraph.storage.database import open_db

    start, errors = threading.Barrier(count), []

    def opener() -> None:
        start.wait()
        try:
            with open_db(db):
                pass
        except BaseException as error:  # collected for the caller's assertion
            errors.append(error)

    workers = [threading.Thread(target=opener) for _ in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return errors


class MemoryBackend:
    """A storage backend of the tests' own (``memory://NAME``): LangGraph's in-memory saver and
    store, kept per name, and thread locks in this process. Registered only by the test that
    shows a third backend is one module and one line (``tests/test_backends.py``)."""

    name = "memory"
    shared = False
    keeps_steps = True
    dialect: Any = None
    kept: dict[str, Any] = {}  # noqa: RUF012 (one per process, as a database would be)
    held: set[tuple[str, str]] = set()  # noqa: RUF012

    def claims(self, db: str) -> bool:
        return db.startswith("memory://")

    def address(self, db: str) -> str:
        return db

    shown = address
    lock_place = address

    def exists(self, db: str) -> bool:
        return db in self.kept

    def faults(self) -> tuple[type[BaseException], ...]:
        return ()

    def explain(self, db: str, error: BaseException) -> str:
        return f"the database {db} failed ({error})"

    @contextlib.contextmanager
    def open(self, db: str, read_only: bool) -> Iterator[Any]:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        yield self.kept.setdefault(db, (InMemorySaver(), InMemoryStore()))

    @contextlib.asynccontextmanager
    async def aopen(self, db: str) -> Any:
        with self.open(db, False) as opened:
            yield opened

    @contextlib.contextmanager
    def lock(self, db: str, thread_id: str) -> Iterator[Any]:
        from reactgraph.storage.locks import Lease, ThreadBusy

        if (db, thread_id) in self.held:
            raise ThreadBusy(f"thread {thread_id} is running in another process")
        self.held.add((db, thread_id))
        try:
            yield Lease(thread_id)
        finally:
            self.held.discard((db, thread_id))

    @contextlib.asynccontextmanager
    async def alock(self, db: str, thread_id: str, saver: Any) -> Any:
        with self.lock(db, thread_id) as lease:
            yield lease

    def delete_older(self, db: str, thread_id: str, keep: str) -> None:
        saver = self.kept[db][0]
        for namespaces in saver.storage.get(thread_id, {}).values():
            for checkpoint_id in [c for c in namespaces if c < keep]:
                del namespaces[checkpoint_id]

    def compact(self, db: str) -> None:
        pass

    def owns(self, store: Any) -> bool:
        return False  # its store is listed with ``search``

    def quick_reader(self, db: str) -> None:
        return None  # its threads are read through LangGraph


BACKEND = MemoryBackend()


# --- BFCL: a model replaying a task's ground truth (or wrong arguments) -----------------------


def _first_value(value: Any) -> Any:
    """An accepted value with its nested dicts' (and lists of dicts') first accepted values."""
    if isinstance(value, dict):
        return {k: _first_value(v[0]) for k, v in value.items() if v and v[0] != ""}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_first_value(v) for v in value]
    return value


def bfcl_perfect_calls(task: Any, turn: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """The ground truth's calls of a task's turn, each argument at its first accepted value (a
    parameter that may be left out is left out; a required one takes its first value that is
    not ``""``; one the function does not declare is left out)."""
    from reactgraph.app.eval.bfcl_state import parse_source_call

    if task.category == "irrelevance":
        return []
    docs = {d["name"]: d for d in [*task.functions, *(x for v in task.added.values() for x in v)]}
    if task.multi_turn:
        made = []
        for source in task.answer[turn]:
            name, args, kwargs = parse_source_call(source)
            names = list(docs[name]["parameters"].get("properties") or {})
            made.append((name, {**dict(zip(names, args, strict=False)), **kwargs}))
        return made
    made = []
    for answer in task.answer:
        ((name, possible),) = answer.items()
        parameters = docs[name]["parameters"]
        required = parameters.get("required") or []
        declared = parameters.get("properties") or {}
        arguments = {}
        for param, values in possible.items():
            given = [v for v in values if v != ""]
            if ("" in values and param not in required) or not given or param not in declared:
                continue
            arguments[param] = _first_value(given[0])
        made.append((name, arguments))
    return made


def _wrong(value: Any) -> Any:
    """A value no answer accepts, of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7919
    if isinstance(value, str):
        return value + " zz9"
    if isinstance(value, list):
        return [*value, "zz9"]
    if isinstance(value, dict):
        return {**value, "zz9": 1}
    return "zz9"


def bfcl_wrong_calls(task: Any, turn: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """The ground truth's calls with every argument wrong (an irrelevance task: a call to its
    first function, where none fits)."""
    if task.category == "irrelevance":
        return [(task.functions[0]["name"], {})]
    return [(n, {k: _wrong(v) for k, v in a.items()}) for n, a in bfcl_perfect_calls(task, turn)]


def _bfcl_input(task: Any, name: str, arguments: dict[str, Any]) -> str:
    """An action's input in the text format: a one-parameter tool's raw value, else JSON."""
    docs = [*task.functions, *(x for v in task.added.values() for x in v)]
    doc = next(d for d in docs if d["name"] == name)
    declared = list(doc["parameters"].get("properties") or {})
    if len(declared) == 1 and len(arguments) == 1:
        (value,) = arguments.values()
        return value if isinstance(value, str) else json.dumps(value)
    return json.dumps(arguments) if arguments else ""


class BfclReplayer:
    """A responder for ``FakeOpenAIServer`` that plays each BFCL task's ground truth, one call a
    model turn, then answers; ``wrong``: with every argument wrong. It finds the task and turn
    by the question's text (the tasks' turns must differ), and how far it is by the
    Observations (text format) or tool messages (native calls) after it."""

    def __init__(self, tasks: Sequence[Any], wrong: bool = False) -> None:
        self.turns: dict[str, tuple[Any, int]] = {}
        for task in tasks:
            for index, text in enumerate(task.turns):
                self.turns.setdefault(text.strip(), (task, index))
        self.plan = bfcl_wrong_calls if wrong else bfcl_perfect_calls

    def _turn(self, text: str) -> tuple[Any, int] | None:
        asked = text.rsplit("Question:", 1)[-1].strip()
        found = [key for key in self.turns if asked.startswith(key)]
        return self.turns[max(found, key=len)] if found else None

    def __call__(self, body: dict[str, Any]) -> Any:
        from reactgraph.app.eval.bfcl_tools import tool_name

        messages = body["messages"]
        native = bool(body.get("tools")) and body.get("tool_choice") != "none"
        if not native and body.get("tools"):
            return "Final Answer: done"
        if native:
            place = next(
                (
                    (i, found)
                    for i in range(len(messages) - 1, -1, -1)
                    if messages[i]["role"] == "user"
                    and (found := self._turn(str(messages[i].get("content") or "")))
                ),
                None,
            )
            if place is None:
                return "I cannot tell which task this is."
            index, (task, turn) = place
            done = sum(m["role"] == "tool" for m in messages[index:])
        else:
            text = "\n".join(str(m.get("content") or "") for m in messages)
            found = self._turn(text)
            if found is None:
                return "Final Answer: I cannot tell which task this is."
            task, turn = found
            done = text.rsplit("Question:", 1)[-1].count("Observation:")
        planned = self.plan(task, turn)
        if done >= len(planned):
            return "Final Answer: done" if not native else "Done."
        name, arguments = planned[done]
        if native:
            return Call(tool_name(name), arguments, id=f"call-{len(messages)}")
        tool_input = _bfcl_input(task, name, arguments)
        return f"Thought: I call it.\nAction: {tool_name(name)}[{tool_input}]"
