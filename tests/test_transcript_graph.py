"""The transcript graph end to end, compiled fresh per test, with the scripted model."""

from __future__ import annotations

import time

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import RunContext, build_graph
from reactgraph.tools import calculator, search_tools
from tests.fakes import (
    CONFIG,
    SEED,
    SEED_TOOL_CALLS,
    Runner,
    ToolLog,
    action,
    add,
    answer,
    big,
    explode,
    fake_model,
    sleepy,
)


def test_seed_eiffel_golden_gate_48(run: Runner) -> None:
    log = ToolLog()
    search, _lookup = search_tools()
    model = fake_model(*SEED)
    graph = build_graph("transcript", model=model, tools=[log.wrap(search), log.wrap(calculator)])
    out = run(graph, {"question": "How many years apart?"}, CONFIG)
    assert len(model.calls) == 4
    assert log.calls == SEED_TOOL_CALLS
    assert out["answer"] == "48"
    assert out["status"] == "answered"
    assert "1889" in out["turns"][0]["observation"]
    assert "1937" in out["turns"][1]["observation"]
    assert out["turns"][2]["observation"] == "48"


def test_turn_records_have_every_field(run: Runner) -> None:
    log = ToolLog()
    model = fake_model(action("echo", "hi"), answer("done"))
    out = run(build_graph("transcript", model=model, tools=[log.echo()]), {"question": "q"})
    first, last = out["turns"]
    assert first["turn"] == 1 and last["turn"] == 2
    assert first["reply"] == action("echo", "hi")
    assert (first["action"], first["action_input"]) == ("echo", "hi")
    assert first["observation"] == "echo: hi"
    assert first["tool_latency_s"] is not None and first["tool_latency_s"] >= 0
    assert first["prompt_tokens"] > 0 and first["completion_tokens"] > 0
    assert first["token_source"] == "tiktoken"
    assert last["kind"] == "answer" and last["tool_latency_s"] is None
    assert out["thread_id"]  # a fresh id when the caller gave none


def test_every_call_gets_the_stop_sequence_and_the_reply_is_cut(run: Runner) -> None:
    model = fake_model(
        "Action: echo[a]\nObservation: invented by the model\nFinal Answer: wrong",
        answer("right"),
    )
    log = ToolLog()
    out = run(build_graph("transcript", model=model, tools=[log.echo()]), {"question": "q"})
    assert model.stops == [["Observation:"], ["Observation:"]]
    assert out["answer"] == "right"
    assert "invented" not in model.prompts[1]
    assert "Observation: echo: a" in model.prompts[1]


def test_turn_cap_forces_a_last_answer(run: Runner) -> None:
    model = fake_model(*[action("echo", str(i)) for i in range(10)], answer("forced"))
    log = ToolLog()
    out = run(build_graph("transcript", model=model, tools=[log.echo()]), {"question": "q"})
    assert len(model.calls) == 11
    assert "You must answer now." in model.prompts[-1]
    assert "You must answer now." not in model.prompts[-2]
    assert out["status"] == "turn_limit"
    assert out["answer"] == "forced"
    assert len(log.calls) == 10
    assert out["turns"][-1]["kind"] == "forced" and out["turns"][-1]["turn"] == 11


def test_turn_cap_prose_reply_is_the_answer_but_an_action_is_not(run: Runner) -> None:
    prose = fake_model(action("echo", "1"), "It is probably 48.")
    log = ToolLog()
    out = run(
        build_graph("transcript", model=prose, tools=[log.echo()], max_turns=1), {"question": "q"}
    )
    assert (out["status"], out["answer"]) == ("turn_limit", "It is probably 48.")
    again = fake_model(action("echo", "1"), action("echo", "2"))
    out = run(
        build_graph("transcript", model=again, tools=[log.echo()], max_turns=1), {"question": "q"}
    )
    assert (out["status"], out["answer"]) == ("turn_limit", None)


def test_same_action_three_times_is_stuck(run: Runner) -> None:
    model = fake_model(*[action("echo", "same")] * 5)
    log = ToolLog()
    out = run(build_graph("transcript", model=model, tools=[log.echo()]), {"question": "q"})
    assert out["status"] == "stuck"
    assert out["answer"] is None
    assert len(model.calls) == 3
    assert len(log.calls) == 2  # the third repeat is not run
    assert out["turns"][-1]["kind"] == "stuck"


def test_repeats_broken_by_another_action_are_not_stuck(run: Runner) -> None:
    replies = [action("echo", "a"), action("echo", "a"), action("echo", "b"), action("echo", "a")]
    model = fake_model(*replies, answer("ok"))
    out = run(build_graph("transcript", model=model, tools=[ToolLog().echo()]), {"question": "q"})
    assert out["status"] == "answered"


def test_unknown_tool_gets_a_corrective_observation(run: Runner) -> None:
    model = fake_model(action("wikipedia", "x"), answer("ok"))
    out = run(build_graph("transcript", model=model, tools=[ToolLog().echo()]), {"question": "q"})
    observation = out["turns"][0]["observation"]
    assert "Unknown action 'wikipedia'" in observation and "echo" in observation
    assert out["turns"][0]["kind"] == "invalid"
    assert out["status"] == "answered"
    assert "Unknown action 'wikipedia'" in model.prompts[1]


def test_unparseable_reply_gets_a_corrective_observation(run: Runner) -> None:
    model = fake_model("I am thinking about it.", answer("ok"))
    out = run(build_graph("transcript", model=model, tools=[ToolLog().echo()]), {"question": "q"})
    assert "Invalid format" in out["turns"][0]["observation"]
    assert "Valid actions: echo" in out["turns"][0]["observation"]
    assert out["status"] == "answered"


def test_tool_exception_becomes_the_observation(run: Runner) -> None:
    model = fake_model(action("explode", "x"), answer("ok"))
    out = run(build_graph("transcript", model=model, tools=[explode]), {"question": "q"})
    assert out["turns"][0]["observation"] == "Error: explode failed: boom on x"
    assert out["status"] == "answered"


def test_tool_timeout_becomes_the_observation_and_the_run_goes_on(run: Runner) -> None:
    model = fake_model(action("sleepy", "x"), answer("ok"))
    graph = build_graph("transcript", model=model, tools=[sleepy], tool_timeout=0.2)
    started = time.perf_counter()
    out = run(graph, {"question": "q"})
    assert time.perf_counter() - started < 10  # far below the tool's 30 s sleep
    assert "timed out after 0.2 s" in out["turns"][0]["observation"]
    assert out["status"] == "answered"


def test_long_observations_are_truncated_with_a_marker(run: Runner) -> None:
    model = fake_model(action("big", "x"), answer("ok"))
    out = run(
        build_graph("transcript", model=model, tools=[big], max_observation_chars=100),
        {"question": "q"},
    )
    observation = out["turns"][0]["observation"]
    assert observation.startswith("x" * 100)
    assert "x" * 101 not in observation
    assert "4900 of 5000 characters cut" in observation


def test_multi_argument_tool_takes_a_json_object(run: Runner) -> None:
    model = fake_model('Action: add[{"a": 2, "b": 3}]', "Action: add[2, 3]", answer("5"))
    out = run(build_graph("transcript", model=model, tools=[add]), {"question": "q"})
    assert out["turns"][0]["observation"] == "5"
    assert '{"a": integer, "b": integer}' in out["turns"][1]["observation"]


def test_usage_metadata_is_preferred_to_counting(run: Runner) -> None:
    model = fake_model(answer("ok"), report_usage=True)
    out = run(build_graph("transcript", model=model, tools=[ToolLog().echo()]), {"question": "q"})
    assert out["turns"][0]["token_source"] == "usage"


def test_a_new_question_on_a_finished_thread_starts_a_fresh_run(run: Runner) -> None:
    model = fake_model(action("echo", "1"), answer("first"), answer("second"))
    graph = build_graph(
        "transcript", model=model, tools=[ToolLog().echo()], checkpointer=InMemorySaver()
    )
    run(graph, {"question": "one"}, CONFIG)
    out = run(graph, {"question": "two"}, CONFIG)
    assert out["answer"] == "second"
    assert [t["turn"] for t in out["turns"]] == [1]
    assert "one" not in model.prompts[-1].split("Question:")[-1]
    assert out["thread_id"] == "t1"


def test_run_context_overrides_the_built_settings(run: Runner) -> None:
    model = fake_model(action("echo", "1"), answer("forced"))
    graph = build_graph("transcript", model=model, tools=[ToolLog().echo()])
    out = run(graph, {"question": "q"}, context=RunContext(max_turns=1))
    assert out["status"] == "turn_limit"
    assert out["settings"]["max_turns"] == 1


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_turns": 0}, ValueError),
        ({"max_turns": "10"}, TypeError),
        ({"tool_timeout": -1}, ValueError),
        ({"max_observation_chars": 0}, ValueError),
        ({"stuck_repeats": 1}, ValueError),
        ({"tools": [lambda x: x]}, TypeError),
        ({"model": "gpt-4o"}, TypeError),
    ],
)
def test_misuse_raises(kwargs: dict, error: type[Exception]) -> None:
    arguments = {"model": fake_model(), "tools": [], **kwargs}
    with pytest.raises(error):
        build_graph("transcript", **arguments)


def test_unknown_variant_and_empty_question(run: Runner) -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        build_graph("nope", model=fake_model(), tools=[])
    graph = build_graph("transcript", model=fake_model(), tools=[])
    with pytest.raises(ValueError, match="question"):
        run(graph, {"question": "  "})


def test_a_hung_tool_does_not_keep_the_process_alive() -> None:
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import time\n"
        "from langchain_core.tools import tool\n"
        "from reactgraph import build_graph\n"
        "from tests.fakes import fake_model, action, answer\n"
        "@tool\n"
        "def hang(text: str) -> str:\n"
        "    '''Never returns in time.'''\n"
        "    time.sleep(120)\n"
        "    return 'late'\n"
        "model = fake_model(action('hang', 'x'), answer('ok'))\n"
        "out = build_graph('transcript', model=model, tools=[hang], tool_timeout=0.2)"
        ".invoke({'question': 'q'})\n"
        "print(out['status'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert result.returncode == 0 and result.stdout.strip() == "answered", result.stderr
