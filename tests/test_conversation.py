"""A follow-up question sees the conversation (``history_runs``): each new run on a thread
carries its earlier runs' questions and answers (never their Thoughts, Actions or
Observations) in one headed block right before the question, bounded, in every variant and both
action formats, under ``invoke`` and ``ainvoke``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.calling.tokens import message_text
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.reducers import kept_runs
from reactgraph.nodes.vocabulary.run_settings import HISTORY_RUNS_MAX
from reactgraph.variants import REGISTRY
from tests.fakes import (
    FakeChatModel,
    FakeOpenAIServer,
    Fault,
    Runner,
    action,
    answer,
    call,
    prompt_text,
    seed_responder,
)
from tests.inprocess import run_main
from tests.test_cli import one_line_error

ROOT = Path(__file__).resolve().parents[1]
FORMATS = ["text", "tool_calls"]
HEADING = prompts.EARLIER_BLOCK.split("{runs}")[0]
FIRST = "Where is the Eiffel Tower?"
FOLLOW_UP = "How tall is it?"
SECRET = "SECRET-OBSERVATION"


@tool
def search(query: str) -> str:
    """Look up a fact."""
    return f"{SECRET} about {query}: it stands in Paris and is 330 m tall."


def look(fmt: str, query: str) -> Any:
    """A reply that searches, in the action format ``fmt``."""
    if fmt == "text":
        return action("search", query)
    return call("search", {"query": query}, "I should look.", f"call-{query[:3]}")


def save_notes(fmt: str, text: str) -> Any:
    if fmt == "text":
        return action("update_notes", text, "Save it.")
    return call("update_notes", {"text": text}, "Save it.", "call-notes")


def graph_for(variant: str, fmt: str, model: FakeChatModel, **settings: Any) -> Any:
    extra: dict[str, Any] = {}
    if "token_counter" in REGISTRY[variant].objects:
        extra = {"token_counter": lambda messages: 10 * len(messages), "context_window": 100_000}
    return build_graph(
        variant,
        model=model,
        tools=[search],
        checkpointer=InMemorySaver(),
        action_format=fmt,
        **extra,
        **settings,
    )


def thread(name: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def opening(messages: list[BaseMessage]) -> HumanMessage:
    """The message that holds the question: the first (text), after the rules (tool_calls)."""
    first = messages[0]
    if isinstance(first, SystemMessage):
        first = messages[1]
    assert isinstance(first, HumanMessage)
    return first


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_follow_up_sees_the_first_question_and_answer_not_its_observations(
    variant: str, fmt: str, run: Runner
) -> None:
    notes = REGISTRY[variant].view.notes
    first_run = [look(fmt, "Eiffel Tower")]
    if notes:
        first_run.append(save_notes(fmt, "- Eiffel Tower: Paris, 330 m"))
    first_run.append(answer("It is in Paris."))
    second_run = [look(fmt, "Eiffel Tower height"), answer("330 metres.")]
    model = FakeChatModel(replies=first_run + second_run)
    graph = graph_for(variant, fmt, model)
    one = run(graph, {"question": FIRST}, thread())
    assert one["answer"] == "It is in Paris."
    calls_before = len(model.calls)
    assert HEADING not in prompt_text(model.calls[0]["messages"])

    two = run(graph, {"question": FOLLOW_UP}, thread())
    assert two["status"] == "answered" and two["answer"] == "330 metres."
    block = HEADING + f"Asked: {FIRST}\nAnswered: It is in Paris.\n\n"
    for index, sent in enumerate(model.calls[calls_before:]):
        messages = sent["messages"]
        text = prompt_text(messages)
        # The block sits in the question's message, right before its "Question:" line.
        assert message_text(opening(messages)).endswith(block + f"Question: {FOLLOW_UP}")
        assert text.count(HEADING) == 1
        assert "Thought: I should look." not in text.split(block)[0]
        observations = text.count(SECRET)
        assert observations == index, "only this run's own Observations, none of the first's"
        if notes:  # the notes variants keep their notes across the runs of the thread
            assert "- Eiffel Tower: Paris, 330 m" in text
    if fmt == "tool_calls":  # the rules stay a system message of their own, unchanged
        assert model.calls[-1]["messages"][0].content == prompts.TOOL_CALLS_PROMPT
    assert [r["run"] for r in two["earlier_runs"]] == [1, 2]
    assert two["earlier_runs"][-1] == {
        "run": 2,
        "question": FOLLOW_UP,
        "answer": "330 metres.",
        "status": "answered",
    }


@pytest.mark.parametrize("fmt", FORMATS)
def test_without_earlier_runs_the_prompt_is_the_seeds_as_written(fmt: str, run: Runner) -> None:
    model = FakeChatModel(replies=[answer("Paris.")])
    run(graph_for("transcript", fmt, model), {"question": FIRST}, thread())
    first = message_text(opening(model.calls[0]["messages"]))
    if fmt == "text":
        assert first.startswith("Answer the question by interleaving")
        assert first.endswith(prompts.REACT_PROMPT.split("Rules:")[1].format(question=FIRST))
    else:
        assert first == f"Question: {FIRST}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_history_runs_0_asks_each_question_alone(fmt: str, run: Runner) -> None:
    model = FakeChatModel(replies=[answer("Paris."), answer("330 m.")])
    graph = graph_for("transcript", fmt, model, history_runs=0)
    run(graph, {"question": FIRST}, thread())
    run(graph, {"question": FOLLOW_UP}, thread())
    assert HEADING not in prompt_text(model.calls[-1]["messages"])
    assert FIRST not in prompt_text(model.calls[-1]["messages"])
    # The same as the very first question's prompt, but for the question.
    before = prompt_text(model.calls[0]["messages"]).replace(FIRST, FOLLOW_UP)
    assert prompt_text(model.calls[-1]["messages"]) == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_history_runs_1_carries_only_the_run_before(fmt: str, run: Runner) -> None:
    model = FakeChatModel(replies=[answer("A1."), answer("A2."), answer("A3."), answer("A4.")])
    graph = graph_for("notes", fmt, model, history_runs=1)
    for question in ("Q1?", "Q2?", "Q3?"):
        run(graph, {"question": question}, thread())
    last = prompt_text(model.calls[-1]["messages"])
    assert "Asked: Q2?\nAnswered: A2." in last
    assert "Q1?" not in last and "A1." not in last
    # A run's context chooses it too: 3 earlier runs, oldest first.
    run(graph, {"question": "Q4?"}, thread(), context={"history_runs": 3})
    last = prompt_text(model.calls[-1]["messages"])
    assert last.index("Asked: Q1?") < last.index("Asked: Q2?") < last.index("Asked: Q3?")


def test_a_thread_of_many_questions_costs_a_prompt_no_more_than_history_runs(
    run: Runner,
) -> None:
    runs = HISTORY_RUNS_MAX + 20
    model = FakeChatModel(replies=[answer(f"Answer {n:03d}.") for n in range(runs)])
    graph = graph_for("transcript", "text", model, history_runs=2)
    sizes = []
    for n in range(runs):
        out = run(graph, {"question": f"Question number {n:03d}?"}, thread())
        sizes.append(len(prompt_text(model.calls[-1]["messages"])))
    assert len(set(sizes[2:])) == 1, "every prompt from the third on is the same size"
    last = prompt_text(model.calls[-1]["messages"])
    assert last.count("Asked:") == 2 and f"Answered: Answer {runs - 2:03d}." in last
    # The state keeps a bounded number of records, the latest.
    records = out["earlier_runs"]
    assert len(records) == HISTORY_RUNS_MAX and records[-1]["run"] == runs
    assert [r["run"] for r in records] == list(range(runs - HISTORY_RUNS_MAX + 1, runs + 1))


def test_the_reducer_replaces_a_runs_start_with_its_end_and_stays_bounded() -> None:
    start = [{"run": 1, "question": "q", "answer": None, "status": None}]
    end = [{"run": 1, "question": "q", "answer": "a", "status": "answered"}]
    assert kept_runs([], [start, end]) == end
    assert kept_runs(kept_runs([], [start]), [end]) == kept_runs([], [start, end])
    many = [[{"run": n, "question": "q", "answer": None, "status": None}] for n in range(1, 251)]
    kept = kept_runs([], many)
    assert len(kept) == HISTORY_RUNS_MAX and kept[0]["run"] == 151
    # However the writes are batched, the result is the same (a delta channel's replay).
    assert kept_runs(kept_runs([], many[:120]), many[120:]) == kept


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_long_earlier_answer_is_cut_like_an_observation(fmt: str, run: Runner) -> None:
    long = "x" * 500
    model = FakeChatModel(replies=[answer(long), answer("ok")])
    graph = graph_for("transcript", fmt, model, max_observation_chars=100)
    run(graph, {"question": FIRST}, thread())
    out = run(graph, {"question": FOLLOW_UP}, thread())
    text = prompt_text(model.calls[-1]["messages"])
    marker = prompts.TRUNCATION_MARKER.format(cut=400, total=500)
    assert "Answered: " + "x" * 100 + marker in text
    assert "x" * 101 not in text
    assert out["earlier_runs"][0]["answer"] == long  # the record keeps it whole


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_run_without_an_answer_shows_its_question_and_how_it_ended(fmt: str, run: Runner) -> None:
    stuck = [look(fmt, "same")] * 3
    model = FakeChatModel(replies=[*stuck, answer("ok")])
    graph = graph_for("transcript", fmt, model)
    assert run(graph, {"question": FIRST}, thread())["status"] == "stuck"
    run(graph, {"question": FOLLOW_UP}, thread())
    said = prompts.EARLIER_STATUS["stuck"]
    assert f"Asked: {FIRST}\nNot answered: {said}" in prompt_text(model.calls[-1]["messages"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_run_that_spent_its_budget_is_shown_as_such(fmt: str, run: Runner) -> None:
    """A run's context gave it a budget its first call spent (before its Action ran); the next
    run on the thread has none, and sees how the first one ended."""
    model = FakeChatModel(replies=[look(fmt, "x"), answer("ok")], fixed_usage=(100, 20))
    graph = graph_for("transcript", fmt, model)
    first = run(graph, {"question": FIRST}, thread(), context={"max_run_tokens": 50})
    assert (first["status"], first["answer"]) == ("budget_exhausted", None)
    run(graph, {"question": FOLLOW_UP}, thread())
    said = prompts.EARLIER_STATUS["budget_exhausted"]
    assert said != prompts.EARLIER_STATUS[None]
    assert f"Asked: {FIRST}\nNot answered: {said}" in prompt_text(model.calls[-1]["messages"])


def test_a_run_that_never_ended_is_shown_as_unfinished(run: Runner) -> None:
    """A run that failed on its model call (and was not resumed), then a new question on the
    thread instead. (A run waiting for a person's decision takes no new question: the thread
    asks for the decision first.)"""

    def down(_prompt: object) -> str:
        raise RuntimeError("the provider is down")

    model = FakeChatModel(replies=[down, answer("ok")])
    graph = graph_for("transcript", "text", model)
    with pytest.raises(Exception, match="the provider is down"):
        run(graph, {"question": FIRST}, thread())
    run(graph, {"question": FOLLOW_UP}, thread())
    said = prompts.EARLIER_STATUS[None]
    assert f"Asked: {FIRST}\nNot answered: {said}" in prompt_text(model.calls[-1]["messages"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_chat_clients_follow_up_message_sees_the_conversation(fmt: str, run: Runner) -> None:
    model = FakeChatModel(replies=[answer("It is in Paris."), answer("330 metres.")])
    graph = graph_for("notes", fmt, model)
    one = run(graph, {"messages": [HumanMessage(FIRST, id="h1")]}, thread())
    assert one["answer"] == "It is in Paris."
    two = run(graph, {"messages": [HumanMessage(FOLLOW_UP, id="h2")]}, thread())
    assert two["answer"] == "330 metres."
    text = prompt_text(model.calls[-1]["messages"])
    assert f"Asked: {FIRST}\nAnswered: It is in Paris.\n\nQuestion: {FOLLOW_UP}" in text
    # The chat view keeps every exchange, as before.
    humans = [m.content for m in two["messages"] if m.type == "human"]
    assert humans == [FIRST, FOLLOW_UP]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_fork_from_an_earlier_checkpoint_sees_the_conversation_up_to_there(
    fmt: str, run: Runner
) -> None:
    model = FakeChatModel(replies=[answer("A1."), answer("A2."), answer("A3.")])
    graph = graph_for("transcript", fmt, model)
    run(graph, {"question": "Q1?"}, thread())
    run(graph, {"question": "Q2?"}, thread())
    after_first = next(
        s
        for s in graph.get_state_history(thread())
        if s.values.get("status") == "answered" and s.values.get("question") == "Q1?"
    )
    forked = run(graph, {"question": "Q3?"}, after_first.config)
    assert forked["answer"] == "A3."
    text = prompt_text(model.calls[-1]["messages"])
    assert "Asked: Q1?\nAnswered: A1." in text and "Q2?" not in text and "A2." not in text
    assert [r["question"] for r in forked["earlier_runs"]] == ["Q1?", "Q3?"]
    # The branch it left keeps its own conversation.
    assert any(
        [r["question"] for r in s.values.get("earlier_runs", [])] == ["Q1?", "Q2?"]
        for s in graph.get_state_history(thread())
    )


class Compacting:
    """The agent and its summarizer in one: a summary when asked, else the script."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.requests: list[str] = []

    def __call__(self, messages: list[BaseMessage]) -> Any:
        first = message_text(messages[0])
        if first.startswith("You are compacting"):
            self.requests.append(first)
            return "## Goal\nG\n## Facts found\nThe tower is in Paris (earlier answer).\n"
        return self.script.pop(0)


@pytest.mark.parametrize("variant", ["compaction", "notes_compaction"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_compaction_folds_the_earlier_conversation_into_its_summary(
    variant: str, fmt: str, run: Runner
) -> None:
    """The block counts against the window: a long earlier answer fills it on the follow-up's
    first call, and the summary takes it in (no turn of this run to drop yet)."""
    script = Compacting([answer("Paris. " + "detail " * 500), answer("330 metres.")])
    model = FakeChatModel(replies=[script] * 10)

    def counter(messages: list[BaseMessage]) -> int:
        return sum(len(message_text(m)) for m in messages) // 4

    graph = build_graph(
        variant,
        model=model,
        tools=[search],
        checkpointer=InMemorySaver(),
        action_format=fmt,
        token_counter=counter,
        context_window=1500,
        compaction_threshold=0.5,
        max_observation_chars=4000,
    )
    one = run(graph, {"question": FIRST}, thread())
    assert one["status"] == "answered" and not one["compactions"]
    two = run(graph, {"question": FOLLOW_UP}, thread())
    assert two["status"] == "answered" and two["answer"] == "330 metres."
    assert len(two["compactions"]) == 1 and len(script.requests) == 1
    request = script.requests[0]
    assert f"Asked: {FIRST}\nAnswered: Paris. detail" in request
    last = prompt_text(model.calls[-1]["messages"])
    assert HEADING not in last and "detail detail" not in last
    assert "The tower is in Paris (earlier answer)." in last  # the summary carries it


def test_the_setting_is_checked(run: Runner) -> None:
    model = FakeChatModel(replies=[])
    with pytest.raises(ValueError):
        graph_for("transcript", "text", model, history_runs=-1)
    with pytest.raises(ValueError):
        graph_for("transcript", "text", model, history_runs=HISTORY_RUNS_MAX + 1)


KILLED = textwrap.dedent(
    """
    import json, os, signal, sys
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from reactgraph import build_graph
    from reactgraph.scripted import ScriptedChatModel, tool_call_reply
    from reactgraph.storage.database import open_db

    db, fmt, mode, work = sys.argv[1:5]
    marker = os.path.join(work, "killed")

    @tool
    def search(query: str) -> str:
        \"\"\"Look up a fact.\"\"\"
        if query == "height" and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)  # mid-way through the follow-up
        return "OBS " + query

    def reply(messages):
        text = "\\n".join(str(m.content) for m in messages)
        with open(os.path.join(work, "prompts.jsonl"), "a") as log:
            log.write(json.dumps({"mode": mode, "text": text}) + "\\n")
        question = text.rsplit("Question:", 1)[1]
        if "OBS" not in text:
            query = "where" if "Where" in question else "height"
            if fmt == "text":
                return f"Thought: look.\\nAction: search[{query}]"
            return tool_call_reply("search", {"query": query}, "look.", "c1")
        return "Final Answer: " + ("In Paris." if "Where" in question else "330 m.")

    with open_db(db) as (saver, store):
        graph = build_graph("transcript", model=ScriptedChatModel(replies=[reply] * 20),
                            tools=[search], checkpointer=saver, action_format=fmt)
        config = {"configurable": {"thread_id": "t"}}
        if mode == "start":
            graph.invoke({"question": "Where is the Eiffel Tower?"}, config)
            out = graph.invoke({"question": "How tall is it?"}, config)
        else:
            out = graph.invoke(None, config)
    print(json.dumps({"answer": out["answer"], "status": out["status"]}))
    """
)


@pytest.mark.kills
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_follow_up_killed_mid_run_resumes_with_the_conversation(fmt: str, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")

    def go(mode: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", KILLED, db, fmt, mode, str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    first = go("start")
    assert first.returncode == -9, first.stderr
    second = go("resume")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {
        "answer": "330 m.",
        "status": "answered",
    }
    lines = (tmp_path / "prompts.jsonl").read_text().splitlines()
    resumed = [json.loads(line)["text"] for line in lines if json.loads(line)["mode"] == "resume"]
    assert resumed, "the resumed run called the model"
    for text in resumed:
        assert "Asked: Where is the Eiffel Tower?\nAnswered: In Paris." in text
        assert "OBS where" not in text  # the first run's Observation is not replayed


def test_ask_on_a_finished_thread_goes_on_with_its_conversation(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    db = str(tmp_path / "runs.sqlite")
    where = ("--base-url", openai_server.url, "--db", db, "--thread", "t1")
    first = run_main("ask", "How many years apart?", *where)
    assert first.returncode == 0, first.stderr
    asked = len(openai_server.requests)
    follow = run_main("ask", "And in months?", *where)
    assert follow.returncode == 0, follow.stderr
    sent = openai_server.requests[asked]["messages"]
    assert len(sent) == 1, "the follow-up starts with its question alone: no earlier turns"
    assert sent[0]["content"].endswith(
        f"{HEADING}Asked: How many years apart?\nAnswered: 48\n\nQuestion: And in months?"
    )
    assert "Observation" not in sent[0]["content"].split(HEADING)[1]
    threads = run_main("threads", "--db", db)
    assert "And in months?" in threads.stdout  # the thread's latest question
    show = run_main("show", "t1", "--db", db)
    assert "Question: And in months?" in show.stdout
    # --history-runs 0: the question alone.
    alone = run_main("ask", "A third?", *where, "--history-runs", "0")
    assert alone.returncode == 0, alone.stderr
    assert HEADING not in openai_server.requests[-1]["messages"][0]["content"]


def test_ask_on_a_thread_of_another_variant_or_unfinished_is_one_line(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    db = str(tmp_path / "runs.sqlite")
    where = ("--base-url", openai_server.url, "--db", db)
    assert run_main("ask", "How many years apart?", *where, "--thread", "t1").returncode == 0
    other = run_main("ask", "And now?", *where, "--thread", "t1", "--variant", "notes")
    one_line_error(other, "thread t1 runs the transcript variant; ask on it with --variant")
    openai_server.responder = lambda body: Fault(503, "down.")
    failed = run_main("ask", "q", *where, "--thread", "t2", "--model-retries", "0")
    assert failed.returncode == 1, failed.stderr
    openai_server.responder = seed_responder
    again = run_main("ask", "And now?", *where, "--thread", "t2")
    one_line_error(again, "thread t2 has a run that has not finished; `reactgraph resume t2`")
    resumed = run_main("resume", "t2", "--db", db, "--base-url", openai_server.url)
    assert resumed.returncode == 0, resumed.stderr
    assert run_main("ask", "And now?", *where, "--thread", "t2").returncode == 0
