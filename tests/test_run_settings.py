"""Every per-run setting of every variant changes what a run does: one graph, run once with the
built values and once with the setting changed in the run's context, under ``invoke`` and
``ainvoke``. A per-run setting without a probe here fails the test."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import build_graph
from reactgraph.nodes.calling.providers import ModelCallError
from reactgraph.nodes.calling.tokens import message_text
from reactgraph.variants import REGISTRY
from tests.fakes import FakeChatModel, Runner, ToolLog, action, answer, big

SUMMARY = "## Goal\nG\n## Next step\nGo on."


def responder(messages: list[BaseMessage]) -> str:
    """Echo a new step each turn; answer after six; summarize when asked to."""
    first = message_text(messages[0])
    if first.startswith("You are compacting"):
        return SUMMARY
    done = sum(message_text(m).startswith("Observation:") for m in messages)
    return action("echo", f"step {done}") if done < 6 else answer("done")


TWO_ECHOES = "Thought: both.\nAction: echo[a]\nAction: echo[b]"


class Flaky:
    """A first call that times out (a transient fault), then answers."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[BaseMessage]) -> str:
        self.calls += 1
        if self.calls == 1:
            raise TimeoutError("injected timeout")
        return answer("after a retry")


@tool
def nap(text: str) -> str:
    """Sleeps a little."""
    time.sleep(0.3)
    return "rested"


def counter(messages: Any) -> int:
    """100 tokens a message: compaction thresholds in whole messages."""
    return 100 * len(messages)


RUNG = FakeChatModel(replies=[lambda messages: answer("the rung's")] * 10_000, model_name="rung")
"""The model ladder's one rung (every run of the probes may call it)."""


@dataclass
class Probe:
    built: dict[str, Any]
    context: dict[str, Any]
    observe: Callable[[dict[str, Any]], Any]
    replies: Callable[[], list[Any]] = lambda: [responder] * 200
    server: bool = False
    """Whether the run's context sends the model calls to the test server (``base_url``)."""
    earlier: str | None = None
    """A question asked first on the same thread (with the built settings), before the one
    observed."""


def obs(result: dict[str, Any]) -> list[str | None]:
    return [t["observation"] for t in result["turns"]]


def window_hides_step_0(result: dict[str, Any]) -> bool:
    model: FakeChatModel = result["_model"]
    return "echo: step 0" not in model.prompts[-1]


PROBES: dict[str, Probe] = {
    "max_turns": Probe({"max_turns": 4}, {"max_turns": 2}, lambda r: len(r["turns"])),
    "tool_timeout": Probe(
        {"tool_timeout": 5.0},
        {"tool_timeout": 0.05},
        lambda r: obs(r)[0],
        lambda: [action("nap", "x"), answer("d")],
    ),
    "max_observation_chars": Probe(
        {},
        {"max_observation_chars": 10},
        lambda r: len(obs(r)[0] or ""),
        lambda: [action("big", "x"), answer("d")],
    ),
    "stuck_repeats": Probe(
        {"stuck_repeats": 5},
        {"stuck_repeats": 2},
        lambda r: (r["status"], len(r["turns"])),
        lambda: [action("echo", "same")] * 6 + [answer("d")],
    ),
    "model_retries": Probe(
        {"model_retries": 1, "retry_backoff_s": 0},
        {"model_retries": 0},
        lambda r: r.get("_error") or r["status"],
        lambda: [Flaky()] * 3,
    ),
    "retry_backoff_s": Probe(
        {"model_retries": 1, "retry_backoff_s": 0},
        {"retry_backoff_s": 0.04},
        lambda r: "in 0.00 s" in r["_log"],
        lambda: [Flaky()] * 3,
    ),
    "max_completion_tokens": Probe({}, {"max_completion_tokens": 64}, lambda r: r["_model"].caps),
    # The run stops before the echo, for a person's decision.
    "approve": Probe({}, {"approve": ["echo"]}, lambda r: (r.get("status"), "__interrupt__" in r)),
    # The tools bound to the model (and the reply read as tool calls: here the text answers).
    "action_format": Probe(
        {}, {"action_format": "tool_calls"}, lambda r: (r["_model"].bound[0], r["answer"])
    ),
    # Each call's request body carries the step's grammar (the scripted model records it).
    "constrained_decoding": Probe(
        {},
        {"constrained_decoding": "gbnf"},
        lambda r: [sorted(c["options"].get("extra_body") or {}) for c in r["_model"].calls],
    ),
    "model_name": Probe(
        {},
        {"model_name": "other-model"},
        lambda r: sorted({body["model"] for body in r["_server"].requests}),
        server=True,
    ),
    # Without a base_url the built (scripted) model answers; with one, the server does.
    "base_url": Probe({}, {"base_url": None}, lambda r: len(r["_server"].requests)),
    "window_turns": Probe({"window_turns": 8}, {"window_turns": 1}, window_hides_step_0),
    # How many echoes each prompt shows: 4 at most, or up to 7 in a window moving 4 at once.
    "window_step": Probe(
        {"window_turns": 4},
        {"window_step": 4},
        lambda r: [p.count("echo: step") for p in r["_model"].prompts],
    ),
    "max_notes_chars": Probe(
        {},
        {"max_notes_chars": 10},
        lambda r: obs(r)[0],
        lambda: [action("update_notes", "a plan of fifty characters, give or take"), answer("d")],
    ),
    "compaction_threshold": Probe(
        {"context_window": 1000, "compaction_threshold": 1.0},
        {"compaction_threshold": 0.5},
        lambda r: (r["status"], len(r.get("compactions") or [])),
    ),
    "keep_turns": Probe(
        {"context_window": 1000, "compaction_threshold": 0.7, "keep_turns": 0},
        {"keep_turns": 1},
        lambda r: [c["first_kept_turn"] for c in r.get("compactions") or []],
    ),
    "context_window": Probe(
        {"context_window": 100_000},
        {"context_window": 800},
        lambda r: (r["status"], len(r.get("compactions") or [])),
    ),
    # The first question on the thread, in the second's prompt, or not.
    "history_runs": Probe(
        {},
        {"history_runs": 0},
        lambda r: "Asked: First?" in r["_model"].prompts[-1],
        earlier="First?",
    ),
    # The application's instructions, in the prompt's block of their own.
    "instructions": Probe(
        {},
        {"instructions": "Prefer the echo tool."},
        lambda r: r["_model"].prompts[0].count("Prefer the echo tool."),
    ),
    # A typed answer: the same reply read as the JSON value that matches the schema.
    "answer_schema": Probe(
        {},
        {"answer_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        lambda r: (r.get("structured_answer"), r["answer"]),
        lambda: [answer('The count: {"n": 3}')],
    ),
    # Run budgets: the run ends budget_exhausted (or a tool's calls are refused).
    "max_run_tokens": Probe({}, {"max_run_tokens": 1}, lambda r: (r["status"], len(r["turns"]))),
    "max_run_cost": Probe(
        {"token_prices": (1e6, 1e6)},  # a unit of cost a token
        {"max_run_cost": 1.0},
        lambda r: (r["status"], r.get("budget")),
    ),
    "token_prices": Probe({}, {"token_prices": [1.0, 2.0]}, lambda r: r["usage"]["cost"]),
    "max_run_seconds": Probe(
        {},
        {"max_run_seconds": 0.1},
        lambda r: r["status"],
        lambda: [action("nap", "x"), answer("d")],
    ),
    "tool_call_limits": Probe(
        {},
        {"tool_call_limits": {"echo": 0}},
        lambda r: (obs(r)[0], r["usage"]["tool_calls"]),
    ),
    # Both Actions of one reply run (off: a correction, one action per turn).
    "parallel_tool_calls": Probe(
        {},
        {"parallel_tool_calls": True},
        lambda r: (obs(r)[0], r["usage"]["tool_calls"]),
        lambda: [TWO_ECHOES, answer("d")],
    ),
    # The calls past the cap are answered, not run.
    "max_parallel_calls": Probe(
        {"parallel_tool_calls": True},
        {"max_parallel_calls": 1},
        lambda r: (obs(r)[0], r["usage"]["tool_calls"]),
        lambda: [TWO_ECHOES, answer("d")],
    ),
    # The model ladder: the built rung answers once the run moves up to it.
    "escalate_to": Probe(
        {"escalate_to": [RUNG]},
        {"escalate_to": "none"},
        lambda r: (r["status"], r["answer"]),
        lambda: [f"Not sure, take {n}." for n in range(100)],
    ),
    "escalate_after": Probe(
        {"escalate_to": [RUNG]},
        {"escalate_after": 3},
        lambda r: r["answer"],
        lambda: ["Not sure.", "Still not sure.", answer("the small one's")],
    ),
}

CASES = [
    (name, setting.name)
    for name, spec in REGISTRY.items()
    for setting in spec.settings
    if setting.knob.per_run
]


def outcome(
    run: Runner, variant: str, probe: Probe, context: dict[str, Any], request: Any
) -> dict[str, Any]:
    spec = REGISTRY[variant]
    model = FakeChatModel(replies=probe.replies())
    built = dict(probe.built)
    objects: dict[str, Any] = {}
    if "token_counter" in spec.objects:
        objects["token_counter"] = counter
        built.setdefault("context_window", 100_000)
    tools = [ToolLog().echo(), nap, big]
    if probe.earlier is not None:
        objects["checkpointer"] = InMemorySaver()
    graph = build_graph(variant, model=model, tools=tools, **objects, **built)
    server = request.getfixturevalue("openai_server")
    server.responder = lambda body: answer("from the server")
    if probe.server or "base_url" in context:
        context = {**context, "base_url": server.url}
    caplog = request.getfixturevalue("caplog")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="reactgraph.nodes.calling.providers"):
        try:
            config = None
            if probe.earlier is not None:
                config = {"configurable": {"thread_id": "probe"}}
                run(graph, {"question": probe.earlier}, config)
            result = dict(run(graph, {"question": "Q?"}, config, context=context or None))
        except ModelCallError as error:
            result = {"_error": type(error).__name__}
    return {**result, "_model": model, "_server": server, "_log": caplog.text}


def test_every_per_run_setting_has_a_probe() -> None:
    assert {setting for _, setting in CASES} == set(PROBES)


@pytest.mark.parametrize(("variant", "setting"), CASES)
def test_each_per_run_setting_changes_the_run(
    variant: str, setting: str, run: Runner, request: pytest.FixtureRequest
) -> None:
    probe = PROBES[setting]
    before = outcome(run, variant, probe, {}, request)
    seen = probe.observe(before)
    after = outcome(run, variant, probe, dict(probe.context), request)
    assert seen != probe.observe(after), (variant, setting, seen)
