"""Agent Chat UI in a real browser: LangChain's chat client (upstream source in
``../shared/agent-chat-ui``, run with ``npm ci`` and ``next dev`` in a copy under ``build/``,
ignored by git) against `langgraph dev` and the local OpenAI-compatible test server, driven
by Playwright in the Debian Chromium, for every variant: the demo question with its tool
cards, results and the final 48; a slow tool, whose Thought and Action stay on screen while
it runs; a second question; a reload and the thread reopened from the history; Regenerate,
after which the thread still loads; and on the notes variants, how a notes update looks. On
the transcript variant: a decision typed in the chat, and a message that is none; editing the
first of two questions and the only one (issue 58); and a run stopped by its token budget. With
parallel calls on (issue 53), two calls of one reply that each wait for a decision, decided one by
one on the card and sent together, in every variant.

Run by ``make test-browser`` (and CI). Where Chromium, npm, Playwright or the client's source
is missing, it skips saying why; in CI (``CI=true``) it fails instead. A failed check saves a
screenshot to ``build/browser/``. With ``REACTGRAPH_DOCS_SHOTS=1`` the first variant's
approval card is saved to ``docs/images/approval-card.png`` too (the picture the docs show).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reactgraph import VARIANTS
from tests.agent_chat_ui import CHROMIUM, chat_ui, missing
from tests.fakes import FakeOpenAIServer, seed_responder
from tests.langgraph_dev import CHAT_GRAPHS, ROOT, langgraph_dev

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SHOTS = ROOT / "build" / "browser"
# With REACTGRAPH_DOCS_SHOTS=1 the approval card is also saved where the docs show it.
DOCS_SHOTS = os.environ.get("REACTGRAPH_DOCS_SHOTS") == "1"
APPROVAL_CARD = ROOT / "docs" / "images" / "approval-card.png"
# Two animation frames: React has committed every update that was pending when it was asked.
RENDERED = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
TRAFFIC: dict[int, Traffic] = {}  # each page's requests to the server (the ``page`` fixture)
WAIT_MS = 300_000  # a busy machine renders slowly; a check passes as soon as it holds
NOTES = "Plan: look up both years, then subtract."


class Traffic:
    """A page's requests to the server: which are in flight, and the order in which each one
    started and ended (one counter for both)."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.clock = 0
        self.start: dict[Any, int] = {}
        self.end: dict[Any, int] = {}

    def started(self, request: Any) -> None:
        if request.url.startswith(self.api):
            self.clock += 1
            self.start[request] = self.clock

    def ended(self, request: Any) -> None:
        if request in self.start:
            self.clock += 1
            self.end[request] = self.clock

    def flying(self) -> list[str]:
        return [r.url for r in self.start if r not in self.end]

    def log(self) -> list[str]:
        """Each request: its method, path, and when it started and ended (for a failure)."""
        return [
            f"{r.method} {r.url.removeprefix(self.api)} {start}-{self.end.get(r, '')}"
            for r, start in self.start.items()
        ]

    def _last(self, moments: dict[Any, int], path: str) -> int:
        """When the last POST to ``path`` started or ended (``moments``; 0: none did)."""
        return max(
            (t for r, t in moments.items() if r.method == "POST" and self._is(r, path)), default=0
        )

    def _is(self, request: Any, path: str) -> bool:
        return str(request.url).split("?")[0].endswith(path)

    def _read_after(self, path: str, moment: int) -> bool:
        """Whether a POST to ``path`` started after ``moment`` and has ended."""
        return any(
            r.method == "POST" and self._is(r, path) and start > moment
            for r, start in self.start.items()
            if r in self.end
        )

    def followed_up(self) -> bool:
        """Whether the reads Agent Chat UI makes after a run and after a new thread are done,
        and nothing is in flight. Each of them renders the chat again, and every render hands
        the approval card a new interrupt object, which resets its edit form
        (``useEffect(..., [interrupt])``): the thread's history, read as a run's stream ends
        (before the browser reports the stream finished), and the thread list, read 4 s after
        a thread is made (``onThreadId``'s ``sleep()``)."""
        run = self._last(self.start, "/runs/stream")
        made = self._last(self.end, "/threads")
        return (
            not self.flying()
            and (run == 0 or self._read_after("/history", run))
            and (made == 0 or self._read_after("/threads/search", made))
        )


def question_of(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"]).rsplit("Question:", 1)[-1]


def question_part(request: dict[str, Any]) -> str:
    """The prompt's first message up to its question: the seed's rules and, on a thread with
    earlier runs, the earlier conversation's block."""
    return str(request["messages"][0]["content"]).rsplit("Question:", 1)[0]


def responder(request: dict[str, Any]) -> str:
    """The demo script for the demo question; a slow tool call; a notes update."""
    question = question_of(request)
    done = sum(str(m["content"]).startswith("Observation:") for m in request["messages"])
    if "slow tool" in question:
        variant = question.rsplit("(", 1)[-1].split(")", 1)[0]
        if done == 0:
            return f"Thought: The slow tool first.\nAction: slow[{variant}]"
        return "Thought: It was released.\nFinal Answer: released"
    if "Take notes" in question:
        if done == 0:
            return f"Thought: Keep a plan.\nAction: update_notes[{NOTES}]"
        return "Thought: The plan is saved.\nFinal Answer: noted"
    if "in months" in question:  # a follow-up: answered from the earlier answer, if it is shown
        earlier = re.findall(r"^Answered: (\d+)$", question_part(request), flags=re.M)
        if not earlier:
            return "Thought: I do not know what that refers to.\nFinal Answer: unknown"
        months = int(earlier[-1]) * 12
        return f"Thought: The earlier answer, in months.\nFinal Answer: {months} months"
    if "Send both " in question:  # two sends in one reply (parallel calls on), each decided
        said = re.findall(
            r"^(?:Observation: )?Observation \d+ \((send\[[^\]]*\])\): (.*)$",
            "\n".join(str(m["content"]) for m in request["messages"][1:]),
            flags=re.M,
        )
        if not said:
            first, second = question.split("Send both ", 1)[1].split(" (", 1)[0].split(" and ")
            return f"Thought: Both at once.\nAction: send[{first}]\nAction: send[{second}]"
        return "Thought: Done.\nFinal Answer: " + "; ".join(f"{a} {t}" for a, t in said)
    if "Send " in question:  # the send tool waits for a person's decision
        if done == 0:
            text = question.split("Send ", 1)[1].split(" (", 1)[0]
            return f"Thought: I will send it.\nAction: send[{text}]"
        seen = str(request["messages"][-1]["content"]).removeprefix("Observation: ")
        return f"Thought: Done.\nFinal Answer: {seen.splitlines()[-1]}"
    return seed_responder(request)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    why = missing()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test must run in CI: {why}")
        pytest.skip(why)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)

    folder = tmp_path_factory.mktemp("browser")
    release = folder / "release"
    release.mkdir()
    model = FakeOpenAIServer()
    model.responder = responder
    env = {
        "OPENAI_BASE_URL": model.url,
        "OPENAI_API_KEY": "not-needed",
        "REACTGRAPH_MODEL": "gpt-4o-mini",
        "REACTGRAPH_TEST_RELEASE": str(release),
    }
    try:
        with (
            langgraph_dev(folder, CHAT_GRAPHS, env=env) as api,
            chat_ui(folder, api) as ui,
            sync_playwright() as playwright,
        ):
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                yield {"api": api, "ui": ui, "browser": browser, "release": release, "model": model}
            finally:
                browser.close()
    finally:
        model.close()


@pytest.fixture
def page(stack: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[Any]:
    context = stack["browser"].new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    traffic = Traffic(stack["api"])
    page.on("request", traffic.started)
    page.on("requestfinished", traffic.ended)
    page.on("requestfailed", traffic.ended)
    TRAFFIC[id(page)] = traffic
    yield page
    TRAFFIC.pop(id(page), None)
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"{request.node.name}.png"), full_page=True)
    context.close()


def shot(page: Any, name: str) -> None:
    """A screenshot of a moment worth looking at (kept in build/browser/)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def ask(page: Any, question: str) -> None:
    box = page.get_by_placeholder("Type your message...")
    box.fill(question)
    box.press("Enter")


def ai_texts(page: Any) -> list[str]:
    return page.locator(".group.mr-auto .py-1").all_inner_texts()


def thread_state(api: str, page: Any) -> dict[str, Any]:
    """The thread the page shows, read from the server (a 500 fails here)."""
    thread = page.evaluate("new URL(location.href).searchParams.get('threadId')")
    assert thread, page.url
    response = httpx.get(f"{api}/threads/{thread}/state", timeout=30)
    assert response.status_code == 200, response.text
    history = httpx.post(f"{api}/threads/{thread}/history", json={"limit": 50}, timeout=30)
    assert history.status_code == 200, history.text
    return response.json()["values"]


def thread_runs(api: str, page: Any) -> list[dict[str, Any]]:
    """The runs of the thread the page shows, newest first."""
    thread = page.evaluate("new URL(location.href).searchParams.get('threadId')")
    response = httpx.get(f"{api}/threads/{thread}/runs", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def wait_for_file(path: Path, seconds: float = WAIT_MS / 1000) -> None:
    deadline = time.time() + seconds
    while not path.exists():
        assert time.time() < deadline, f"{path.name} never appeared"
        time.sleep(0.1)


@pytest.mark.parametrize("variant", VARIANTS)
def test_agent_chat_ui_chats_with_every_variant(
    stack: dict[str, Any], page: Any, variant: str
) -> None:
    from playwright.sync_api import expect

    api, release = stack["api"], stack["release"]
    page.goto(f"{stack['ui']}/?assistantId={variant}&chatHistoryOpen=true")
    demo = f"How many years apart? ({variant})"
    ask(page, demo)
    final = page.get_by_text("Final Answer: 48")
    expect(final).to_be_visible()
    # Tool cards with their names and results; the final reply line by line.
    for name in ("search", "calculator"):
        expect(page.locator("h3", has_text=name).first).to_be_visible()
    expect(page.get_by_text("Tool Result").nth(2)).to_be_visible()
    last = ai_texts(page)[-1]
    assert last == "Thought: I now have enough information.\nFinal Answer: 48", last
    assert not page.get_by_text("Error").count()
    shot(page, f"{variant}-answered")

    # A follow-up on the thread: "that" is the earlier answer, which the model now sees.
    ask(page, f"And that in months? ({variant})")
    expect(page.get_by_text("Final Answer: 576 months")).to_be_visible()
    assert ai_texts(page)[-1].endswith("Final Answer: 576 months"), ai_texts(page)[-1]
    shot(page, f"{variant}-follow-up")

    # A second question whose tool is slow: the Thought and the Action stay while it runs.
    ask(page, f"Use the slow tool ({variant})")
    wait_for_file(release / f"{variant}.started")
    thought = page.get_by_text("The slow tool first.")
    expect(thought).to_be_visible()
    expect(page.locator("h3", has_text="slow").first).to_be_visible()
    expect(page.get_by_text(f"Action: slow[{variant}]")).to_be_visible()
    time.sleep(1.5)  # a while into the tool's run: still there (the fault was a vanishing)
    expect(thought).to_be_visible()
    shot(page, f"{variant}-slow-tool-running")
    (release / variant).touch()
    expect(page.get_by_text("Final Answer: released")).to_be_visible()
    expect(final).to_be_visible()  # the first exchange stays
    values = thread_state(api, page)
    assert values["answer"] == "released"

    # Reload, then reopen the thread from the history sidebar.
    page.reload()
    expect(page.get_by_text("Final Answer: released")).to_be_visible()
    expect(page.get_by_text("Final Answer: 48")).to_be_visible()
    page.goto(f"{stack['ui']}/?assistantId={variant}&chatHistoryOpen=true")
    page.get_by_role("button", name=demo).first.click()
    expect(page.get_by_text("Final Answer: released")).to_be_visible()

    if "notes" in variant:
        ask(page, f"Take notes ({variant})")
        expect(page.get_by_text("Final Answer: noted")).to_be_visible()
        expect(page.get_by_text(f"Action: update_notes[{NOTES}]")).to_be_visible()
        expect(page.get_by_text("notes saved").first).to_be_visible()
        assert not page.get_by_text("(the text now shown under Your notes)").count()
        shot(page, f"{variant}-notes")

    # Regenerate the last answer: the thread still loads, now and after a reload.
    runs = thread_runs(api, page)
    page.locator(".group.mr-auto").last.hover()
    page.get_by_role("button", name="Refresh").last.click()
    deadline = time.time() + WAIT_MS / 1000
    while len(now := thread_runs(api, page)) == len(runs) or any(
        r["status"] in ("pending", "running") for r in now
    ):
        assert time.time() < deadline, "the regenerated run never finished"
        time.sleep(0.5)
    assert now[0]["status"] == "success", now[0]
    last_answer = "Final Answer: noted" if "notes" in variant else "Final Answer: released"
    expect(page.get_by_text(last_answer)).to_be_visible()
    expect(page.get_by_text("Unable to connect")).to_have_count(0)
    values = thread_state(api, page)
    assert values["answer"] == last_answer.removeprefix("Final Answer: ")
    assert values["messages"][-1]["content"].endswith(last_answer)
    page.reload()
    expect(page.get_by_text(last_answer)).to_be_visible()
    expect(page.get_by_text("Unable to connect")).to_have_count(0)
    shot(page, f"{variant}-regenerated")


def settled(page: Any) -> None:
    """Until Agent Chat UI has made the reads that follow a run and a new thread, and has no
    request in flight (``Traffic.followed_up``): each would undo an edit made before it."""
    traffic = TRAFFIC[id(page)]
    deadline = time.monotonic() + WAIT_MS / 1000  # a bound against a hang, not a timing
    while not traffic.followed_up() and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # Playwright hands over its events while it waits
    assert traffic.followed_up(), traffic.log()


def fill_kept(page: Any, box: Any, text: str) -> None:
    """Type ``text`` into a box of the approval card until it holds once the page has
    settled and rendered what came (the card resets its forms on every render of the chat)."""
    deadline = time.monotonic() + WAIT_MS / 1000  # a bound against a hang, not a timing
    while time.monotonic() < deadline:
        box.fill(text)
        settled(page)
        page.evaluate(RENDERED)
        if box.input_value() == text:
            return
    raise AssertionError(f"the approval card never kept {text!r}")


def decide(page: Any, question: str, text: str) -> None:
    """Ask for a send, and wait for Agent Chat UI's approval card for it, the page settled."""
    from playwright.sync_api import expect

    ask(page, question)
    expect(page.get_by_text("Edit/Approve")).to_be_visible()
    expect(page.locator("p.text-2xl", has_text="send")).to_be_visible()
    settled(page)
    expect(page.locator("textarea:not([placeholder])")).to_have_value(text)


@pytest.mark.parametrize("variant", VARIANTS)
def test_agent_chat_ui_approves_edits_and_rejects_an_action(
    stack: dict[str, Any], page: Any, variant: str
) -> None:
    from playwright.sync_api import expect

    api = stack["api"]

    def send_turn() -> dict[str, Any]:
        """The last run's send, as the server keeps it (each run's turns are its own)."""
        (turn,) = [t for t in thread_state(api, page)["turns"] if t["action"] == "send"]
        return turn

    page.goto(f"{stack['ui']}/?assistantId={variant}&chatHistoryOpen=true")
    # Approve: the Action runs as the model wrote it.
    decide(page, f"Send hello ({variant})", "hello")
    expect(page.get_by_text("Action: send[hello]")).to_be_visible()
    shot(page, f"{variant}-approval-asked")
    if DOCS_SHOTS and variant == VARIANTS[0]:
        # The page's viewport as a person sees it: the Action, and the card under it.
        page.screenshot(path=str(APPROVAL_CARD))
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_text("Final Answer: sent hello")).to_be_visible()
    expect(page.get_by_text("Edit/Approve")).to_have_count(0)
    turn = send_turn()
    assert (turn["approval"]["decision"], turn["observation"]) == ("approve", "sent hello")
    # Edit: it runs with the person's input.
    decide(page, f"Send draft ({variant})", "draft")
    fill_kept(page, page.locator("textarea:not([placeholder])"), "final text")
    page.get_by_role("button", name="Submit", exact=True).click()
    expect(page.get_by_text("Final Answer: sent final text")).to_be_visible()
    turn = send_turn()
    assert (turn["approval"]["decision"], turn["approval"]["proposed_input"]) == ("edit", "draft")
    assert (turn["action_input"], turn["observation"]) == ("final text", "sent final text")
    # Reject, with a reason: nothing runs, and the agent reads why.
    decide(page, f"Send spam ({variant})", "spam")
    fill_kept(page, page.get_by_placeholder("Share feedback with the agent..."), "not to everyone")
    page.get_by_role("button", name="Submit rejection").click()
    expect(page.get_by_text("Final Answer: A person refused this action")).to_be_visible()
    shot(page, f"{variant}-approval-decided")
    turn = send_turn()
    assert (turn["approval"]["decision"], turn["approval"]["message"]) == (
        "reject",
        "not to everyone",
    )
    # Every exchange stays on screen, and nothing failed.
    for line in ("Final Answer: sent hello", "Final Answer: sent final text"):
        expect(page.get_by_text(line)).to_be_visible()
    assert not page.get_by_text("Error").count()


def parallel_assistant(api: str, variant: str) -> str:
    """An assistant of ``variant`` that runs every call of a reply (issue 53)."""
    response = httpx.post(
        f"{api}/assistants",
        json={"graph_id": variant, "context": {"parallel_tool_calls": True}},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["assistant_id"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_agent_chat_ui_decides_several_waiting_calls_one_by_one(
    stack: dict[str, Any], page: Any, variant: str
) -> None:
    """Issue 53, 4: two sends of one reply wait in one interrupt; Agent Chat UI pages through
    them (``send (1/2)``) and sends a decision for each at once; the approved call runs, the
    rejected one has its refusal as its Observation, and the run answers from both."""
    from playwright.sync_api import expect

    api = stack["api"]
    page.goto(f"{stack['ui']}/?assistantId={parallel_assistant(api, variant)}")
    ask(page, f"Send both hi and bye ({variant})")
    expect(page.locator("p.text-2xl", has_text="send (1/2)")).to_be_visible()
    settled(page)
    expect(page.locator("textarea:not([placeholder])")).to_have_value("hi")
    shot(page, f"{variant}-several-asked")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("p.text-2xl", has_text="send (2/2)")).to_be_visible()
    expect(page.locator("textarea:not([placeholder])")).to_have_value("bye")
    box = page.get_by_placeholder("Share feedback with the agent...")
    box.fill("not bye yet")
    page.get_by_role("button", name="Submit rejection").click()
    submit = page.get_by_role("button", name="Submit all 2 decisions")
    expect(submit).to_be_enabled()
    submit.click()
    refused = "A person refused this action, so it did not run. Their reason: not bye yet"
    expect(page.get_by_text(f"Final Answer: send[hi] sent hi; send[bye] {refused}")).to_be_visible()
    expect(page.get_by_text("Edit/Approve")).to_have_count(0)
    shot(page, f"{variant}-several-decided")
    assert runs_done(api, page, 2)[0]["status"] == "success"
    values = thread_state(api, page)
    assert values["status"] == "answered"
    (turn,) = [t for t in values["turns"] if t.get("actions")]
    assert [
        (a["action"], a["action_input"], a["approval"]["decision"]) for a in turn["actions"]
    ] == [
        ("send", "hi", "approve"),
        ("send", "bye", "reject"),
    ]
    assert [a["observation"] for a in turn["actions"]] == ["sent hi", refused]
    # The chat view: one reply with both calls, and one ToolMessage per call, each its answer.
    (calling,) = [m for m in values["messages"] if m["type"] == "ai" and m.get("tool_calls")]
    answers = [m for m in values["messages"] if m["type"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == [c["id"] for c in calling["tool_calls"]]
    assert [m["content"] for m in answers] == ["sent hi", refused]
    page.reload()
    expect(page.get_by_text(f"Final Answer: send[hi] sent hi; send[bye] {refused}")).to_be_visible()
    assert not page.get_by_text("Error").count()


def runs_done(api: str, page: Any, count: int) -> list[dict[str, Any]]:
    """The thread's runs, once it has ``count`` and none is pending or running."""
    deadline = time.monotonic() + WAIT_MS / 1000  # a bound against a hang, not a timing
    while len(runs := thread_runs(api, page)) < count or any(
        r["status"] in ("pending", "running") for r in runs
    ):
        assert time.monotonic() < deadline, runs
        page.wait_for_timeout(100)
    return runs


def test_a_message_typed_while_an_action_waits_is_its_decision_or_asked_again(
    stack: dict[str, Any], page: Any
) -> None:
    """Agent Chat UI keeps its input box open while the approval card waits (issue 45, 5;
    issue 58, 5): a message there is the decision when it is one of the terminal's words (yes,
    no), and the words stay in the chat after the Action's result; any other message runs
    nothing, and the card stays on screen, its description saying why; the card offers no
    control its description does not name."""
    from playwright.sync_api import expect

    api = stack["api"]
    page.goto(f"{stack['ui']}/?assistantId=transcript&chatHistoryOpen=true")
    decide(page, "Send memo (transcript)", "memo")
    page.get_by_role("button", name="Description").click()
    expect(page.get_by_text("The agent wants to run send[memo] (turn 1).")).to_be_visible()
    assert not page.get_by_text("tool's place").count()
    page.reload()  # back to the card
    expect(page.get_by_text("Edit/Approve")).to_be_visible()
    settled(page)
    # Not a decision: the run succeeds, nothing ran, and the card is back, saying why.
    ask(page, "what about lunch?")
    assert runs_done(api, page, 2)[0]["status"] == "success"
    settled(page)
    expect(page.get_by_text("Edit/Approve")).to_be_visible()
    expect(page.get_by_text("what about lunch?")).to_have_count(0)
    assert not page.get_by_text("Error").count()
    page.get_by_role("button", name="Description").click()
    expect(
        page.get_by_text("That answer could not be used: 'what about lunch?' is not a decision")
    ).to_be_visible()
    shot(page, "transcript-message-while-waiting-asked-again")
    values = thread_state(api, page)
    assert values["question"].startswith("Send memo") and values["turns"] == []
    page.reload()
    expect(page.get_by_text("Edit/Approve")).to_be_visible()
    settled(page)
    # "yes" is the decision: the Action runs as the model wrote it, and the word stays.
    ask(page, "yes")
    expect(page.get_by_text("Final Answer: sent memo")).to_be_visible()
    expect(page.get_by_text('Decided in the chat: "yes" approved send[memo].')).to_be_visible()
    (turn,) = [t for t in thread_state(api, page)["turns"] if t["action"] == "send"]
    assert (turn["approval"]["decision"], turn["observation"]) == ("approve", "sent memo")
    assert turn["approval"]["said"] == "yes"
    page.reload()
    expect(page.get_by_text('Decided in the chat: "yes" approved send[memo].')).to_be_visible()
    shot(page, "transcript-message-while-waiting-decided")


def edit_question(page: Any, index: int, text: str) -> None:
    """Edit the ``index``-th question on screen as a person does: hover it, press its pencil,
    type, submit."""
    human = page.locator(".group.ml-auto").nth(index)
    human.hover()
    human.get_by_role("button", name="Edit").click()
    box = human.locator("textarea")
    box.fill(text)
    human.get_by_role("button", name="Submit").click()


def prompts_since(model: FakeOpenAIServer, start: int) -> str:
    return "\n".join(
        str(m.get("content") or "") for r in model.requests[start:] for m in r["messages"]
    )


def one_exchange_shown(page: Any, question: str) -> None:
    """The chat shows ``question`` alone (its questions, not the thread list) and one answer."""
    from playwright.sync_api import expect

    expect(page.locator(".group.ml-auto p")).to_have_text([question])
    expect(page.get_by_text("Final Answer: 48")).to_have_count(1)


def first_question_edited(
    stack: dict[str, Any], page: Any, text: str, runs: int
) -> tuple[str, dict[str, Any]]:
    """Edit the first question on screen to ``text`` once the chat has settled, and wait for the
    thread's ``runs``-th run: the chat then shows that exchange alone, and the prompts sent
    since tell of no earlier run. The prompts sent since, and the thread's state."""
    api, model = stack["api"], stack["model"]
    settled(page)
    asked = len(model.requests)
    edit_question(page, 0, text)
    runs_done(api, page, runs)
    one_exchange_shown(page, text)
    sent = prompts_since(model, asked)
    assert "Earlier in this conversation" not in sent and "did not finish" not in sent
    return sent, thread_state(api, page)


def test_editing_the_first_of_two_questions_replaces_it_and_the_second(
    stack: dict[str, Any], page: Any
) -> None:
    """Issue 58, 3: each run writes 14 checkpoints and Agent Chat UI reads 10; editing the first
    of two questions replaces it and the second, on screen, in the thread and in the prompt."""
    from playwright.sync_api import expect

    page.goto(f"{stack['ui']}/?assistantId=transcript&chatHistoryOpen=true")
    ask(page, "How many years apart? (first)")
    expect(page.get_by_text("Final Answer: 48")).to_be_visible()
    ask(page, "How many years apart? (second)")
    expect(page.get_by_text("Final Answer: 48")).to_have_count(2)
    runs_done(stack["api"], page, 2)
    sent, values = first_question_edited(stack, page, "How many years apart? (edited)", 3)
    assert "Question: How many years apart? (edited)" in sent
    # Agent Chat UI sends a question as text blocks, an edited one as a string.
    assert [m["content"] for m in values["messages"] if m["type"] == "human"] == [
        "How many years apart? (edited)"
    ]
    assert [r["question"] for r in values["earlier_runs"]] == ["How many years apart? (edited)"]
    page.reload()
    one_exchange_shown(page, "How many years apart? (edited)")
    shot(page, "transcript-first-of-two-edited")


def test_editing_the_only_question_leaves_one_exchange(stack: dict[str, Any], page: Any) -> None:
    from playwright.sync_api import expect

    page.goto(f"{stack['ui']}/?assistantId=transcript&chatHistoryOpen=true")
    ask(page, "How many years apart? (only)")
    expect(page.get_by_text("Final Answer: 48")).to_be_visible()
    runs_done(stack["api"], page, 1)
    _, values = first_question_edited(stack, page, "How many years apart? (only, edited)", 2)
    assert [r["question"] for r in values["earlier_runs"]] == [
        "How many years apart? (only, edited)"
    ]
    page.reload()
    one_exchange_shown(page, "How many years apart? (only, edited)")
    shot(page, "transcript-only-question-edited")


def test_a_budget_stop_says_which_budget_and_shows_the_warning_and_the_last_action(
    stack: dict[str, Any], page: Any
) -> None:
    """Issue 58, 4: the 80% warning in the chat without unfolding a tool result, the last Action
    as a tool-call card, the stop naming the budget, its limit and what was spent."""
    from playwright.sync_api import expect

    api = stack["api"]
    page.goto(f"{stack['ui']}/?assistantId=budgets&chatHistoryOpen=true")
    ask(page, "Find everything about it")
    stop = page.get_by_text(
        "Stopped at the run's token budget (max_run_tokens): 360 of 300 tokens spent, so no "
        "further model call or tool ran."
    )
    expect(stop).to_be_visible()
    expect(
        page.get_by_text("Budget warning: 240 of 300 tokens of the run's token budget")
    ).to_be_visible()
    calls = page.locator("h3", has_text="search").filter(has_not_text="Tool Result")
    expect(calls).to_have_count(3)  # the last one a card too, though it never ran
    expect(page.get_by_text("Tool Result")).to_have_count(3)
    values = thread_state(api, page)
    assert values["status"] == "budget_exhausted" and len(values["turns"]) == 3
    page.reload()
    expect(stop).to_be_visible()
    expect(calls).to_have_count(3)
    shot(page, "budgets-stopped")
