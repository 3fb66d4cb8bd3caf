"""Middleware (``build_graph(middleware=[...])``): LangChain's own middleware classes and an
application's, through every variant and both action formats, under ``invoke`` and ``ainvoke``;
what is refused when the graph is built; and every guarantee of a call made through middleware
(budgets and limits per actual call, approvals, the grammar and the tools narrowed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents.middleware import (
    AgentMiddleware,
    LLMToolSelectorMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    SummarizationMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
    after_model,
    before_model,
    hook_config,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.vocabulary import prompts
from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES, DEMO_TOOL_CALLS
from reactgraph.tools import default_tools
from tests.fakes import FakeChatModel, Runner, action, answer, call, fake_model

FORMATS = ["text", "tool_calls"]


def script(fmt: str) -> list[Any]:
    """The seed's replies (search, search, calculator, 48) in the format ``fmt``."""
    return list(DEMO_REPLIES if fmt == "text" else DEMO_TOOL_CALLS)


def graph_for(variant: str, fmt: str, model: Any, middleware: list[Any], **extra: Any) -> Any:
    more: dict[str, Any] = {}
    if variant in ("compaction", "notes_compaction"):
        more = {"token_counter": lambda messages: 10 * len(messages), "context_window": 100_000}
    return build_graph(
        variant,
        model=model,
        tools=extra.pop("tools", None) or default_tools(),
        action_format=fmt,
        middleware=middleware,
        **more,
        **extra,
    )


def down(messages: Any) -> Any:
    raise ValueError("the primary model is down")


def recording_calculator() -> tuple[BaseTool, list[str]]:
    """A calculator that answers 48 to anything, and the expressions it was given."""
    ran: list[str] = []

    @tool
    def calculator(expression: str) -> str:
        """Compute an expression."""
        ran.append(expression)
        return "48"

    return calculator, ran


def also_async(hook: Callable[[Any, Any, Any], None]) -> Callable[[Any, Any, Any], Any]:
    """The async form of a state hook, doing the same."""

    async def ahook(self: Any, state: Any, runtime: Any) -> None:
        hook(self, state, runtime)

    return ahook


class Recorder(AgentMiddleware):
    """A user's middleware with every hook, sync and async, recording each call in ``log``: the
    same record under ``invoke`` and ``ainvoke``."""

    def __init__(self, label: str, log: list[str]) -> None:
        self.label, self.log = label, log

    @property
    def name(self) -> str:
        return f"Recorder{self.label}"

    def note(self, event: str) -> None:
        self.log.append(f"{self.label}.{event}")

    def before_agent(self, state: Any, runtime: Any) -> None:
        self.note("before_agent")

    def before_model(self, state: Any, runtime: Any) -> None:
        self.note("before_model")

    def after_model(self, state: Any, runtime: Any) -> None:
        assert state["reply"] is not None
        self.note("after_model")

    def after_agent(self, state: Any, runtime: Any) -> None:
        self.note(f"after_agent:{state['status']}")

    abefore_agent = also_async(before_agent)
    abefore_model = also_async(before_model)
    aafter_model = also_async(after_model)
    aafter_agent = also_async(after_agent)

    def around(self, call: str, request: Any, handler: Any) -> Any:
        """The ``call`` (model or tool) through ``handler``, noted as it starts and ends."""
        self.note(f"{call}>")
        response = handler(request)
        self.note(f"{call}<")
        return response

    async def aaround(self, call: str, request: Any, handler: Any) -> Any:
        self.note(f"{call}>")
        response = await handler(request)
        self.note(f"{call}<")
        return response

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return self.around("model", request, handler)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        return await self.aaround("model", request, handler)

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self.around("tool", request, handler)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return await self.aaround("tool", request, handler)


class Reminder(AgentMiddleware):
    """Adds a message to every prompt, through ``request.override``."""

    NOTE = "Remember: answer with a number."

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(messages=[*request.messages, HumanMessage(self.NOTE)]))

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        messages = [*request.messages, HumanMessage(self.NOTE)]
        return await handler(request.override(messages=messages))


class NoCalculator(AgentMiddleware):
    """Blocks the calculator with a ToolMessage of its own."""

    TEXT = "The calculator is switched off."

    def _blocked(self, request: Any) -> ToolMessage | None:
        if request.tool_call["name"] != "calculator":
            return None
        return ToolMessage(self.TEXT, tool_call_id=request.tool_call["id"], name="calculator")

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self._blocked(request) or handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self._blocked(request) or await handler(request)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_fallback_model_answers_when_the_primary_raises(
    run: Runner, variant: str, fmt: str
) -> None:
    primary = fake_model(*[down] * 10)
    fallback = fake_model(*script(fmt))
    graph = graph_for(variant, fmt, primary, [ModelFallbackMiddleware(fallback)])
    out = run(graph, {"question": DEMO_QUESTION})
    assert (out["answer"], out["status"]) == ("48", "answered")
    assert len(fallback.calls) == 4 and len(primary.calls) == 4
    # The primary's calls failed with an error its server answered: billed nothing, not counted.
    assert out["usage"]["prompt_tokens"] == sum(t["prompt_tokens"] for t in out["turns"])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_flaky_tool_is_retried_and_each_attempt_counts(
    run: Runner, variant: str, fmt: str
) -> None:
    attempts: list[str] = []

    @tool
    def search(query: str) -> str:
        """Look up a fact."""
        attempts.append(query)
        if len(attempts) % 2:
            raise ConnectionError("the index is busy")
        return "The Eiffel Tower was completed in 1889; the Golden Gate Bridge opened in 1937."

    calculator, _ = recording_calculator()
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    graph = graph_for(variant, fmt, fake_model(*script(fmt)), [retry], tools=[search, calculator])
    out = run(graph, {"question": DEMO_QUESTION})
    assert out["answer"] == "48"
    assert len(attempts) == 4  # two searches, each failing once then answering
    assert "1889" in out["turns"][0]["observation"]
    assert out["usage"]["tool_calls"] == {"search": 4, "calculator": 1}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_tool_blocked_by_a_middleware_message_never_runs(
    run: Runner, variant: str, fmt: str
) -> None:
    calculator, ran = recording_calculator()
    tools = [*[t for t in default_tools() if t.name != "calculator"], calculator]
    graph = graph_for(variant, fmt, fake_model(*script(fmt)), [NoCalculator()], tools=tools)
    out = run(graph, {"question": DEMO_QUESTION})
    assert not ran
    assert out["turns"][2]["observation"] == NoCalculator.TEXT


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_message_added_to_every_prompt_reaches_every_call(
    run: Runner, variant: str, fmt: str
) -> None:
    model = fake_model(*script(fmt))
    out = run(graph_for(variant, fmt, model, [Reminder()]), {"question": DEMO_QUESTION})
    assert out["answer"] == "48"
    assert len(model.calls) == 4
    for sent in model.calls:
        assert sent["messages"][-1].content == Reminder.NOTE


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_two_middlewares_run_in_langchains_order(run: Runner, variant: str, fmt: str) -> None:
    log: list[str] = []
    middleware = [Recorder("A", log), Recorder("B", log)]
    graph = graph_for(variant, fmt, fake_model(*script(fmt)), middleware)
    out = run(graph, {"question": DEMO_QUESTION})
    assert out["answer"] == "48"
    assert log[:2] == ["A.before_agent", "B.before_agent"]
    first_turn = log[2 : 2 + 10]
    assert first_turn == [
        "A.before_model",
        "B.before_model",
        "A.model>",
        "B.model>",
        "B.model<",
        "A.model<",
        "B.after_model",
        "A.after_model",
        "A.tool>",
        "B.tool>",
    ]
    assert log[-2:] == ["B.after_agent:answered", "A.after_agent:answered"]
    assert log.count("A.model>") == 4 and log.count("B.tool<") == 3


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_retried_model_call_counts_every_attempt_that_answered(run: Runner, fmt: str) -> None:
    def slow(messages: Any) -> Any:
        raise TimeoutError("no answer in time")  # given up in flight: its server may bill it

    replies = script(fmt)
    model = fake_model(down, replies[0], slow, *replies[1:])
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    graph = graph_for("transcript", fmt, model, [retry], model_retries=0)
    out = run(graph, {"question": DEMO_QUESTION})
    assert out["answer"] == "48" and len(model.calls) == 6
    prompts = sum(t["prompt_tokens"] for t in out["turns"])
    # The error answered is billed nothing; the call abandoned in flight counts its prompt.
    abandoned = out["turns"][1]["prompt_tokens"]
    assert out["usage"]["prompt_tokens"] == prompts + abandoned


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_tool_selector_narrows_what_the_model_sees(run: Runner, fmt: str) -> None:
    selection = AIMessage(
        "",
        tool_calls=[{"name": "ToolSelectionResponse", "args": {"tools": ["search"]}, "id": "s"}],
    )
    selector = fake_model(*[selection] * 8)
    replies = [
        action("search", "Eiffel Tower") if fmt == "text" else call("search", {"query": "x"}),
        answer("1889"),
    ]
    model = fake_model(*replies)
    middleware = [LLMToolSelectorMiddleware(model=selector)]
    out = run(graph_for("transcript", fmt, model, middleware), {"question": "When?"})
    assert out["answer"] == "1889" and selector.calls
    for sent in model.calls:
        if fmt == "text":
            prompt = str(sent["messages"][0].content)
            assert "search[input]" in prompt and "calculator[" not in prompt
        else:
            names = [t["function"]["name"] for t in sent["options"]["tools"]]
            assert names == ["search"]
    # The selector's own calls are counted against the run's budget.
    turns = sum(t["prompt_tokens"] + t["completion_tokens"] for t in out["turns"])
    assert out["usage"]["total_tokens"] > turns


def test_a_narrowed_grammar_holds_only_the_tools_left() -> None:
    selection = AIMessage(
        "",
        tool_calls=[{"name": "ToolSelectionResponse", "args": {"tools": ["search"]}, "id": "s"}],
    )
    model = fake_model(action("search", "Eiffel Tower"), answer("1889"))
    graph = graph_for(
        "transcript",
        "text",
        model,
        [LLMToolSelectorMiddleware(model=fake_model(*[selection] * 4))],
        constrained_decoding="gbnf",
    )
    graph.invoke({"question": "When?"})
    grammar = model.calls[0]["options"]["extra_body"]["grammar"]
    assert '"search["' in grammar and "calculator" not in grammar


def test_a_tool_needing_approval_swapped_in_by_a_middleware_is_refused() -> None:
    calculator, ran = recording_calculator()

    class Swap(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            swapped = {**request.tool_call, "name": "calculator", "args": {"expression": "1+1"}}
            return handler(request.override(tool_call=swapped, tool=calculator))

    tools = [*[t for t in default_tools() if t.name != "calculator"], calculator]
    graph = graph_for(
        "transcript",
        "text",
        fake_model(action("search", "x"), answer("done")),
        [Swap()],
        tools=tools,
        approve=["calculator"],
        checkpointer=InMemorySaver(),
    )
    out = graph.invoke({"question": "q"}, {"configurable": {"thread_id": "t"}})
    assert out["status"] == "answered" and not ran
    assert out["turns"][0]["observation"] == prompts.ACTION_UNAPPROVED


class Rewrite(AgentMiddleware):
    """Changes every tool call's arguments (after a person's decision on them)."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        changed = {**request.tool_call, "args": {"expression": "6*7"}}
        return handler(request.override(tool_call=changed))


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_approved_call_a_middleware_changes_does_not_run(run: Runner, fmt: str) -> None:
    """A person's decision is on the call as the node made it: a middleware that changes its
    arguments afterwards gets a refusal, unrun (attack round 7)."""
    calculator, ran = recording_calculator()
    first = (
        action("calculator", "1+1") if fmt == "text" else call("calculator", {"expression": "1+1"})
    )
    graph = graph_for(
        "transcript",
        fmt,
        fake_model(first, answer("done")),
        [Rewrite()],
        tools=[calculator],
        approve=["calculator"],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    assert run(graph, {"question": "q"}, config)["__interrupt__"]
    out = run(graph, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert out["status"] == "answered" and ran == []
    assert out["turns"][0]["observation"] == prompts.ACTION_UNAPPROVED


def test_an_approved_call_a_retry_middleware_repeats_runs() -> None:
    """The same call again (a retry) is the call the person approved."""
    ran: list[str] = []

    @tool
    def calculator(expression: str) -> str:
        """Compute an expression."""
        ran.append(expression)
        if len(ran) == 1:
            raise RuntimeError("flaky")
        return "2"

    graph = graph_for(
        "transcript",
        "text",
        fake_model(action("calculator", "1+1"), answer("done")),
        [ToolRetryMiddleware(initial_delay=0)],
        tools=[calculator],
        approve=["calculator"],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"question": "q"}, config)
    out = graph.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert ran == ["1+1", "1+1"] and out["turns"][0]["observation"] == "2"


def test_a_tool_limit_counts_each_retried_attempt() -> None:
    attempts: list[str] = []

    @tool
    def search(query: str) -> str:
        """Look up a fact."""
        attempts.append(query)
        raise ConnectionError("busy")

    retry = ToolRetryMiddleware(max_retries=5, initial_delay=0, jitter=False)
    graph = graph_for(
        "transcript",
        "text",
        fake_model(action("search", "x"), answer("done")),
        [retry],
        tools=[search],
        tool_call_limits={"search": 2},
    )
    out = graph.invoke({"question": "q"})
    assert len(attempts) == 2  # the third attempt is past the limit: refused, not run
    assert "at most 2" in out["turns"][0]["observation"]


@pytest.mark.parametrize(
    "middleware, hook",
    [
        (SummarizationMiddleware(model=fake_model(), trigger=("tokens", 100)), "before_model"),
        (ToolCallLimitMiddleware(thread_limit=2), "state"),
    ],
    ids=["summarization", "tool_call_limit"],
)
def test_middleware_needing_state_reactgraph_lacks_is_refused(middleware: Any, hook: str) -> None:
    with pytest.raises(ValueError, match=middleware.name) as raised:
        build_graph("transcript", model=fake_model(), tools=[], middleware=[middleware])
    assert hook in str(raised.value)


def test_a_hook_that_jumps_is_refused() -> None:
    @hook_config(can_jump_to=["end"])
    def stop_early(state: Any, runtime: Any) -> dict[str, Any]:
        return {"jump_to": "end"}

    jumping = before_model(can_jump_to=["end"])(stop_early)
    with pytest.raises(ValueError, match="before_model hook jumps"):
        build_graph("transcript", model=fake_model(), tools=[], middleware=[jumping])


def test_a_hook_writing_the_state_is_refused_naming_it() -> None:
    @after_model
    def add_message(state: Any, runtime: Any) -> dict[str, Any]:
        return {"messages": [HumanMessage("more")]}

    graph = build_graph(
        "transcript", model=fake_model(answer("x")), tools=[], middleware=[add_message]
    )
    with pytest.raises(ValueError, match="add_message's after_model hook returned an update"):
        graph.invoke({"question": "q"})


def test_what_is_no_middleware_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="AgentMiddleware"):
        build_graph("transcript", model=fake_model(), tools=[], middleware=[object()])
    with pytest.raises(TypeError, match="list"):
        build_graph("transcript", model=fake_model(), tools=[], middleware=Reminder())
    with pytest.raises(ValueError, match="two middleware"):
        build_graph("transcript", model=fake_model(), tools=[], middleware=[Reminder()] * 2)


def test_a_sync_only_wrap_serves_ainvoke_and_an_async_only_one_invoke() -> None:
    import asyncio

    seen: list[str] = []

    class SyncOnly(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            seen.append("sync")
            return handler(request)

    class AsyncOnly(AgentMiddleware):
        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            seen.append("async")
            return await handler(request)

    for middleware, run in ((SyncOnly(), "ainvoke"), (AsyncOnly(), "invoke")):
        graph = build_graph(
            "transcript", model=fake_model(answer("x")), tools=[], middleware=[middleware]
        )
        if run == "invoke":
            out = graph.invoke({"question": "q"})
        else:
            out = asyncio.run(graph.ainvoke({"question": "q"}))
        assert out["answer"] == "x"
    assert seen == ["sync", "async"]


def test_the_request_is_what_the_model_receives(run: Runner) -> None:
    seen: list[Any] = []

    class Look(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            seen.append(request)
            return handler(request)

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            seen.append(request)
            return await handler(request)

    model: FakeChatModel = fake_model(answer("x"))
    run(graph_for("transcript", "tool_calls", model, [Look()]), {"question": "q"})
    request = seen[0]
    assert isinstance(request.system_message, SystemMessage)
    sent = model.calls[0]["messages"]
    assert [request.system_message, *request.messages] == sent
    assert [t.name for t in request.tools] == [t.name for t in default_tools()]
    assert request.state["question"] == "q" and request.runtime is not None
    assert request.model is model


def test_a_command_from_a_tool_wrapper_is_refused() -> None:
    class Commanding(AgentMiddleware):
        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            return Command(update={"question": "other"})

    graph = graph_for(
        "transcript", "text", fake_model(action("search", "x"), answer("y")), [Commanding()]
    )
    with pytest.raises(ValueError, match="Commanding's wrap_tool_call hook returned a Command"):
        graph.invoke({"question": "q"})
