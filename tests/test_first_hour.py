"""The rough edges of a new user's first hour (issue 44): a long checkout path, the threads
listing in an 80-column terminal, threads made from Python, exit codes and --help written for
users, warnings that name their question and none about the stand-in model, the prompt's
placeholder taken for an answer, and a server that never returns tool calls."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from reactgraph import VARIANTS, build_graph
from reactgraph.nodes.reading.textparser import parse_react
from reactgraph.nodes.reading.toolcalls import read_tool_calls
from reactgraph.nodes.vocabulary import prompts
from reactgraph.scripted import DEMO_QUESTION, DEMO_REPLIES, ScriptedChatModel
from reactgraph.tools import default_tools
from reactgraph.tools.mcp.config import WHERE_CHARS, where
from tests.fakes import FakeOpenAIServer, Runner, answer, call, fake_model, seed_responder
from tests.inprocess import run_main

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["ask", "resume", "show", "threads", "batch", "prune", "eval", "graph", "demo"]


# --- the MCP server's command line in messages -------------------------------------------------


@pytest.mark.parametrize("folder_chars", [10, 18, 19, 60, 200])
def test_a_long_command_line_keeps_its_end_at_any_checkout_path(folder_chars: int) -> None:
    """The message of a server that never answers must name it by its arguments wherever the
    checkout is: the cut used to take them away past an 18-character folder."""
    folder = "/" + "f" * folder_chars
    connection = {
        "transport": "stdio",
        "command": f"{folder}/reactgraph/.venv/bin/python",
        "args": [f"{folder}/reactgraph/tests/mcp_servers.py", "mute", "--tag", "a" * 32],
    }
    shown = where(connection)
    assert len(shown) <= WHERE_CHARS
    assert re.fullmatch(r".+ mute --tag a{32}", shown), shown
    assert shown.startswith(folder[:10])


def test_a_short_command_line_is_whole() -> None:
    connection = {"transport": "stdio", "command": "python", "args": ["server.py", "--x"]}
    assert where(connection) == "python server.py --x"


# --- help and exit codes -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_is_for_users_and_says_what_the_exit_codes_mean(command: str) -> None:
    result = run_main(*([command] if command else []), "--help", env={"COLUMNS": "80"})
    assert result.returncode == 0
    text = result.stdout
    assert "`" not in text, "--help shows Markdown or docstring marks"
    for internal in ("handler", "the seed", "module is imported", "bind_tools", "LangGraph or"):
        assert internal not in text, internal
    epilog = text.split("exit status:", 1)[1]
    codes = [int(code) for code in re.findall(r"^  (\d+) ", epilog, flags=re.M)]
    assert codes[0] == 0 and 2 in codes and 130 in codes, codes
    assert all(len(line) <= 80 for line in epilog.splitlines())


def test_every_command_has_its_exit_codes() -> None:
    from reactgraph.app.cli import EXIT_CODES, make_parser

    parser = make_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]  # argparse's own
    assert set(EXIT_CODES) == {"", *commands.choices}  # type: ignore[attr-defined]


def test_ask_exits_1_when_the_run_ends_without_an_answer(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = lambda _body: "I am still thinking."  # stuck after 3 of them
    run = run_main(
        "ask", "Why?", "--base-url", openai_server.url, "--db", str(tmp_path / "r.sqlite")
    )
    assert run.returncode == 1 and "stuck" in run.stdout, (run.stdout, run.stderr)


# --- the threads listing -----------------------------------------------------------------------


def make_threads(db: Path, server: FakeOpenAIServer, tmp_path: Path) -> list[tuple[str, str]]:
    """Runs of every kind a listing shows: a batch's, one with a long id of the person's, one
    waiting for an approval; returns each thread id with its status."""
    server.responder = seed_responder
    long_id = "my-own-thread-id-that-goes-on-and-on-" + "x" * 20
    made = [
        run_main("ask", DEMO_QUESTION, "--base-url", server.url, "--db", str(db), *extra)
        for extra in (["--thread", long_id], ["--approve", "calculator", "--thread", "waits"])
    ]
    assert [r.returncode for r in made] == [0, 1], [r.stderr for r in made]
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "eiffel-and-golden-gate", "question": "How many years?"}\n')
    batch = run_main(
        "batch", str(questions), "--out", str(tmp_path / "r.jsonl"), "--db", str(db),
        "--base-url", server.url, "--workers", "1",
    )  # fmt: skip
    assert batch.returncode == 0, batch.stderr
    (line,) = (tmp_path / "r.jsonl").read_text().splitlines()
    thread = re.search(r'"thread_id": ?"([^"]+)"', line)
    assert thread is not None
    return [(long_id, "answered"), ("waits", "awaiting_approval"), (thread.group(1), "answered")]


@pytest.mark.slow
def test_threads_never_cuts_an_id_or_a_status(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db = tmp_path / "runs.sqlite"
    made = make_threads(db, openai_server, tmp_path)
    for columns in (200, 100, 80, 60, 40):
        listing = run_main("threads", "--db", str(db), env={"COLUMNS": str(columns)})
        assert listing.returncode == 0 and listing.stderr == ""
        lines = listing.stdout.splitlines()
        for thread, status in made:
            (row,) = [i for i, line in enumerate(lines) if thread in line.split()]
            # its status on its row, or (too narrow for a row) on the line under its id
            below = lines[row + 1] if row + 1 < len(lines) else ""
            assert status in (lines[row] + " " + below).split(), (columns, lines)
        assert "…" not in " ".join(line.split("…")[0].split()[0] for line in lines if line)
        too_long = [line for line in lines if len(line) > columns]
        assert {line.strip() for line in too_long} <= set(dict(made)), (columns, too_long)
    wide = run_main("threads", "--db", str(db), env={"COLUMNS": "200"}).stdout
    assert "How many years?" in wide and "transcript" in wide


def test_the_listing_at_80_columns_keeps_a_batch_id_on_one_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reactgraph.app import console
    from reactgraph.storage.records import new_record

    rows: list[Any] = [
        (new_record(f"batch-368cc45f1e-9c1d2e3f-q{i}", "How many years? " * 9, "notes_compaction",
                    "m", None, None, {}), status, 12)
        for i, status in enumerate(["awaiting_approval", "context_exhausted", "answered"])
    ]  # fmt: skip
    monkeypatch.setenv("COLUMNS", "80")
    with console.console.capture() as captured:
        console.print_threads(rows)
    lines = captured.get().splitlines()
    assert len(lines) == 4 and all(len(line) <= 80 for line in lines), lines
    for line, (record, status, _) in zip(lines[1:], rows, strict=True):
        assert line.split()[:2] == [record.thread_id, status], line
        assert line.rstrip().endswith("…")  # the question is what gives way


# --- threads made from Python ------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_threads_made_from_python_are_listed_and_shown(variant: str, tmp_path: Path) -> None:
    from reactgraph.storage import open_db

    db = str(tmp_path / "runs.sqlite")
    with open_db(db) as (saver, store):
        objects = {"store": store} if "store" in build_graph_objects(variant) else {}
        graph = build_graph(
            variant, model=ScriptedChatModel(replies=DEMO_REPLIES), tools=default_tools(),
            checkpointer=saver, **objects,
        )  # fmt: skip
        out = graph.invoke({"question": DEMO_QUESTION}, {"configurable": {"thread_id": "py-1"}})
    assert out["answer"] == "48"
    listing = run_main("threads", "--db", db, env={"COLUMNS": "200"})
    assert listing.returncode == 0 and listing.stderr == "", listing.stderr
    (row,) = [line for line in listing.stdout.splitlines() if line.startswith("py-1 ")]
    assert row.split()[:4] == ["py-1", variant, "answered", "4"], row
    assert "How many years after the Eiffel Tower" in row
    shown = run_main("show", "py-1", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert f"Thread py-1 ({variant}, model scripted)" in shown.stdout
    assert DEMO_QUESTION in shown.stdout and "48" in shown.stdout
    resumed = run_main("resume", "py-1", "--db", db, "--base-url", "http://127.0.0.1:9/v1")
    assert resumed.returncode == 2 and "was run from Python" in resumed.stderr, resumed.stderr


def build_graph_objects(variant: str) -> set[str]:
    from reactgraph.variants import variant as spec_of

    return set(spec_of(variant).objects)


def test_another_graphs_threads_are_not_listed(tmp_path: Path) -> None:
    """A thread of a graph that is not reactgraph's (an eval's prebuilt agent, say) has no
    variant to read it with: it is left out, and ``show`` calls it unknown."""
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    from reactgraph.storage import open_db

    class Plain(TypedDict):
        x: int

    db = str(tmp_path / "runs.sqlite")
    with open_db(db) as (saver, _store):
        plain = StateGraph(Plain)
        plain.add_node("one", lambda state: {"x": state["x"] + 1})
        plain.add_edge(START, "one")
        plain.compile(checkpointer=saver).invoke({"x": 1}, {"configurable": {"thread_id": "other"}})
    assert "other" not in run_main("threads", "--db", db).stdout
    shown = run_main("show", "other", "--db", db)
    assert shown.returncode == 2 and "unknown thread 'other'" in shown.stderr


# --- warnings ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_eval_says_nothing_of_its_stand_in_model(
    openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = seed_responder
    run = run_main(
        "eval", "--bundled", "--limit", "1", "--variants", "compaction,notes_compaction",
        "--model", "gpt-4o-mini", "--base-url", openai_server.url, "--out", str(tmp_path / "e"),
        "--workers", "1",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "scripted" not in run.stderr and "context window" not in run.stderr, run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("command", ["batch", "eval"])
def test_each_warning_of_a_run_names_its_question(
    command: str, openai_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    openai_server.responder = lambda _body: "Let me think about that."  # stuck, with a warning
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        '{"id": "alpha", "question": "What?", "answer": "red"}\n'
        '{"id": "beta", "question": "Who?", "answer": "blue"}\n'
    )
    where = ["--out", str(tmp_path / ("r.jsonl" if command == "batch" else "e"))]
    if command == "eval":
        where += ["--variants", "transcript"]
    run = run_main(
        command, str(questions), *where, "--base-url", openai_server.url, "--workers", "1",
        "--db", str(tmp_path / "runs.sqlite"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    stuck = [line for line in run.stderr.splitlines() if "stuck" in line]
    assert len(stuck) == 2, run.stderr
    assert {re.search(r"question (\w+)", line).group(1) for line in stuck} == {  # type: ignore[union-attr]
        "alpha",
        "beta",
    }


def test_the_question_named_in_a_warning_is_the_runs_own(caplog: pytest.LogCaptureFixture) -> None:
    """Two runs at once in one event loop, each warning named by its own question (the name is
    the run's context, which its threads copy)."""
    import asyncio

    from reactgraph.app import logprefix

    logprefix.install()
    logger = logging.getLogger("reactgraph.test")

    async def one(name: str) -> None:
        with logprefix.running(name):
            await asyncio.sleep(0.01)
            await asyncio.to_thread(logger.warning, "tool %s timed out", "search")
            logger.warning("100% of it")

    async def both() -> None:
        await asyncio.gather(one("question a%b"), one("question 2"))

    with caplog.at_level(logging.WARNING, logger="reactgraph.test"):
        asyncio.run(both())
        logger.warning("outside")
    messages = sorted(record.getMessage() for record in caplog.records)
    assert messages == [
        "outside",
        "question 2: 100% of it",
        "question 2: tool search timed out",
        "question a%b: 100% of it",
        "question a%b: tool search timed out",
    ]


# --- the placeholder answer --------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        "Thought: I now have enough information.\nFinal Answer: your answer",
        "Final Answer: **Your answer.**",
        "Final Answer: [your answer]",
        "Final Answer: <your final answer>",
        "Action: Finish[your answer]",
    ],
)
def test_the_prompts_placeholder_is_no_answer(reply: str) -> None:
    parsed = parse_react(reply, ["search"])
    assert parsed["kind"] == "invalid" and parsed["answer"] is None
    assert "placeholder" in (parsed["error"] or "")
    native = read_tool_calls(reply, [], {"search": ["query"]})
    assert native["kind"] == "invalid" and "placeholder" in (native["error"] or "")


@pytest.mark.parametrize("reply", ["Final Answer: your answer is 48", "Final Answer: 48"])
def test_an_answer_that_only_mentions_the_words_is_an_answer(reply: str) -> None:
    assert parse_react(reply, ["search"])["kind"] == "answer"


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("action_format", ["text", "tool_calls"])
def test_a_copied_placeholder_gets_a_corrective_observation(
    variant: str, action_format: str, run: Runner
) -> None:
    placeholder = "Thought: I now have enough information.\nFinal Answer: your answer"
    model = fake_model(AIMessage(placeholder), AIMessage(answer("48")))
    graph = build_graph(variant, model=model, tools=default_tools(), action_format=action_format)
    out = run(graph, {"question": "How many?"}, {"configurable": {"thread_id": "t"}})
    assert (out["answer"], out["status"]) == ("48", "answered")
    first = out["turns"][0]
    assert first["kind"] == "invalid"
    expected = prompts.PLACEHOLDER_ANSWER.format(answer="your answer")
    assert expected in first["observation"], first["observation"]
    assert expected in model.prompts[1]


# --- tool_calls against a server that returns none ---------------------------------------------


def test_a_server_that_never_returns_tool_calls_is_warned_about_once(
    openai_server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    from reactgraph.models import chat_model
    from reactgraph.nodes.loop.formats.tool_calls import forget_no_tool_calls

    forget_no_tool_calls()
    # What llama-cpp-python's server without --chat_format chatml-function-calling sends back:
    # the text format's Action, as prose, and no tool call.
    openai_server.responder = lambda _body: "Thought: look it up.\nAction: search[Eiffel Tower]"
    llm = chat_model("local", base_url=openai_server.url, api_key="none")
    graph = build_graph("transcript", model=llm, tools=default_tools(), action_format="tool_calls")
    with caplog.at_level(logging.WARNING, logger="reactgraph.nodes.loop.model"):
        for thread in ("a", "b"):
            graph.invoke({"question": "When?"}, {"configurable": {"thread_id": thread}})
    warned = [
        r.getMessage() for r in caplog.records if "instead of calling a tool" in r.getMessage()
    ]
    assert len(warned) == 1, warned
    assert openai_server.url in warned[0] and "chatml-function-calling" in warned[0]


def test_a_reply_that_answers_without_a_tool_is_not_warned_about(
    caplog: pytest.LogCaptureFixture, run: Runner
) -> None:
    from reactgraph.nodes.loop.formats.tool_calls import forget_no_tool_calls

    forget_no_tool_calls()
    model = fake_model(call("search", {"query": "Eiffel"}), "1889.")
    graph = build_graph("notes", model=model, tools=default_tools(), action_format="tool_calls")
    with caplog.at_level(logging.WARNING, logger="reactgraph.nodes.loop.model"):
        out = run(graph, {"question": "When?"}, {"configurable": {"thread_id": "t"}})
    assert out["answer"] == "1889."
    assert not [r for r in caplog.records if "instead of calling a tool" in r.getMessage()]


# --- the version -------------------------------------------------------------------------------


def test_the_version_is_kept_in_one_place() -> None:
    import tomllib

    import reactgraph

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]
    assert reactgraph.__version__ == declared != "0.1.0"
    assert run_main("--version").stdout == f"reactgraph {declared}\n"
    assert f"## {declared}" in (ROOT / "CHANGELOG.md").read_text("utf-8")
    sources = [
        *ROOT.glob("graphs/**/*.py"),
        *ROOT.glob("nodes/**/*.py"),
        *ROOT.glob("tools/**/*.py"),
    ]
    assert not [p for p in sources if declared in p.read_text("utf-8")]
    assert sys.modules["reactgraph"] is reactgraph
