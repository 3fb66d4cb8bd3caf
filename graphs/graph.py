"""The compiled graph ``build_graph`` returns: LangGraph's own, with its input and run context
checked before anything is stored, and writes made durable by default.

``invoke``/``ainvoke`` go through ``stream``/``astream``, so checking there covers every way to
run the graph, including the LangGraph server's. Its history read (``get_state_history``, which
the LangGraph server's history endpoint calls) cut at a ``limit`` also holds the state in which
each earlier question first appears, so a chat client's edit of an older question forks where
that question's run started (``reactgraph.nodes.chatview.edits``).

Nothing but a decision runs an Action that waits for one. Of LangGraph's commands only a resume
is taken: ``Command(goto=...)`` (which would run ``run_tool`` with no decision), ``update`` and
``graph`` raise ValueError, except ``Command(goto=END)`` alone (Agent Chat UI's "Mark as
Resolved"), which changes nothing: the thread keeps waiting. On a thread with a checkpointer,
the thread's standing is read first (``reactgraph.nodes.vocabulary.standing``):

- a resume (``None``, ``Command(resume=...)``) of a thread with no checkpoint raises ValueError
  before anything is stored; a decision for a thread that waits for none raises too;
- a new question on a thread that waits for a decision is that decision when it is one of the
  terminal's words (``yes``/``y`` approve, ``no``/``n`` reject; a chat client's message keeps
  the words in the turn's ``approval``, which the chat view shows); a chat client's other
  message is an answer that could not be used, so the Action is asked about again, the request
  quoting it (the client's approval card stays, saying why), and a ``question`` is refused with
  ValueError saying what the thread waits for: never a new run that drops the waiting Action;
- once ``MAX_UNUSABLE`` answers to one Action could not be used, a value that is no usable
  decision raises ValueError before it is stored: the values given are replayed at every
  resume, so their number is bounded, and the thread's cost stays flat.

A state edit (``bulk_update_state`` and its kin) is checked too (``reactgraph.state_edits``), a
fork that would replay an approved Action asks again (``reactgraph.forks``), and on a saver with
its database's locks (``open_db``'s) a run or an edit holds the thread (``ThreadBusy``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot, StateUpdate

from reactgraph import forks, state_edits
from reactgraph.nodes.chatview import edits
from reactgraph.nodes.chatview.questions import as_messages, content_parts, last_human, unread_note
from reactgraph.nodes.loop.middleware import approval
from reactgraph.nodes.running.decisions import MAX_UNUSABLE, Malformed, check_resume, read_decision
from reactgraph.nodes.vocabulary.effects import adrive, drive
from reactgraph.nodes.vocabulary.standing import status_of
from reactgraph.nodes.vocabulary.storable import unstorable

# Each step's checkpoint is written before the next step starts, so a run killed at any point
# resumes where it stopped ("async", LangGraph's default, can lose the last steps).
DURABILITY = "sync"


def _human_question(messages: Any) -> str:
    """The text of the last human message of a chat client's input (ValueError when it has
    none)."""
    human = last_human(as_messages(messages))
    if human is None:
        raise ValueError("the input needs a question: 'messages' holds no human message")
    text, others = content_parts(human.content)
    if not text.strip():
        if others:
            raise ValueError(
                f"the question has no text to answer: the last human message holds only "
                f"{unread_note(others)}, and this loop reads only text"
            )
        raise ValueError("the question is empty: the last human message holds no text")
    return text


# LangGraph's names in the checkpointer's pending writes and the run's config.
_RESUME = "__resume__"
_CHECKPOINTER = "__pregel_checkpointer"
# A chat message that is a decision: the terminal's words (``reactgraph.app.approving``) that
# need nothing more.
_CHAT_WORDS = {"y": "approve", "yes": "approve", "n": "reject", "no": "reject"}
# The most of a chat message on a waiting thread kept with the decision (what the person said).
MAX_SAID_CHARS = 200


def _only_end(goto: Any) -> bool:
    """Whether a Command's ``goto`` names nothing (None, as the LangGraph server sends it, or
    empty), or only END."""
    if goto is None:
        return True
    if isinstance(goto, str):
        return goto == END
    if isinstance(goto, Sequence):
        return all(isinstance(item, str) and item == END for item in goto)
    return False


def check_command(command: Command) -> None:
    """ValueError for a Command that is not a resume: nothing but a decision may run an Action
    that waits for one (``goto=END`` alone is let through: it runs nothing)."""
    if command.graph is not None:
        raise ValueError("a Command for a parent graph is not an input of this graph")
    if command.update is not None:
        raise ValueError(
            "Command(update=...) is refused: the state changes only through the loop's steps; "
            "decide on a waiting Action with Command(resume=DECISION)"
        )
    if not _only_end(command.goto):
        raise ValueError(
            f"Command(goto={command.goto!r}) is refused: nothing but a decision runs a waiting "
            f"Action; resume with Command(resume=DECISION) (approve, edit, respond or reject)"
        )


def check_input(input: Any) -> None:
    """A new run's input: a non-empty question, storable by every checkpointer; a resume
    value (a person's decision, from any client) bounded and storable, before it is stored.
    Resuming (None) passes through; a Command other than a resume raises (``check_command``)."""
    if isinstance(input, Command):
        check_command(input)
        if input.resume is not None:
            check_resume(input.resume)  # its shape is read by the node that asked
        return
    if input is None or not isinstance(input, Mapping):
        return  # None resumes; anything else is LangGraph's to judge
    question = input.get("question")
    if question is None and "messages" in input:
        question = _human_question(input["messages"])
    elif not isinstance(question, str) or not question.strip():
        raise ValueError("the input needs a question: a non-empty 'question' string")
    problem = unstorable(question)
    if problem is not None:
        raise ValueError(f"the question cannot be stored: it holds a {problem}")


def check_thread(config: RunnableConfig | None) -> None:
    """A thread id every checkpointer can store (it keys the thread's rows and files)."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    if isinstance(thread, str) and unstorable(thread):
        raise ValueError(f"the thread id cannot be stored: it holds a {unstorable(thread)}")


def _question_text(input: Mapping[str, Any]) -> str:
    question = input.get("question")
    if isinstance(question, str):
        return question
    human = last_human(as_messages(input.get("messages")))
    return content_parts(human.content)[0] if human is not None else ""


def _unusable_so_far(saved: Any, snapshot: StateSnapshot) -> int:
    """How many values the waiting task has been given already (each one it asked about again
    was unusable): LangGraph replays them all at every resume."""
    waiting = {task.id for task in snapshot.tasks if task.interrupts}
    given = 0
    for task_id, channel, value in getattr(saved, "pending_writes", None) or ():
        if channel == _RESUME and task_id in waiting and isinstance(value, list):
            given = max(given, len(value))
    return given


def _waiting_action(snapshot: StateSnapshot) -> str:
    parsed = snapshot.values.get("parsed") or {}
    turn = len(snapshot.values.get("turns") or []) + 1
    return f"{parsed.get('action')}[{parsed.get('action_input') or ''}] (turn {turn})"


class ReactGraph(CompiledStateGraph):
    """A compiled variant of the ReAct loop (see ``reactgraph.build_graph``)."""

    def _saver(self, config: RunnableConfig | None) -> BaseCheckpointSaver | None:
        """The checkpointer of a top-level run on a thread (None: no thread standing to read)."""
        configurable = (config or {}).get("configurable") or {}
        if configurable.get("thread_id") is None or configurable.get("checkpoint_ns"):
            return None
        saver = configurable.get(_CHECKPOINTER) or self.checkpointer
        return saver if isinstance(saver, BaseCheckpointSaver) else None

    def _against(
        self, input: Any, config: RunnableConfig, saved: Any, snapshot: StateSnapshot
    ) -> Any:
        """The input, checked against where the thread stands (see the module's docstring):
        what to run, or ValueError before anything is stored."""
        standing = status_of(snapshot) if saved is not None else "unknown"
        thread = config["configurable"]["thread_id"]
        resume = input.resume if isinstance(input, Command) else None
        if standing == "unknown" and (input is None or isinstance(input, Command)):
            raise ValueError(
                f"there is no thread {str(thread)[:80]!r} to resume: start it with a question"
            )
        if standing != "awaiting_approval":
            if resume is not None:
                raise ValueError(
                    f"thread {str(thread)[:80]!r} waits for no decision ({standing}): a resume "
                    f"value answers an Action that waits for approval"
                )
            return input
        if isinstance(input, Mapping):
            input = self._chat_decision(input, snapshot)
            resume = input.resume
        if resume is not None and _unusable_so_far(saved, snapshot) >= MAX_UNUSABLE:
            self._check_usable(resume, config, snapshot)
        return input

    def _chat_decision(self, input: Mapping[str, Any], snapshot: StateSnapshot) -> Command:
        """A new question on a thread that waits for a decision (see the module's docstring):
        the decision its word says; a chat client's other message, an answer asked about again;
        or ValueError saying what the thread waits for."""
        text = _question_text(input)
        said = " ".join(text.split())[:MAX_SAID_CHARS]
        word = _CHAT_WORDS.get(said.rstrip(".!").strip().lower())
        chat = input.get("question") is None  # a chat client's message, not an API question
        if word is not None:
            decision: dict[str, Any] = {"decisions": [{"type": word}]}
            return Command(resume={**decision, "said": said} if chat else decision)
        if chat:
            return Command(resume=said)  # not a decision: the card asks again, quoting it
        raise ValueError(
            f"this thread waits for a decision on {_waiting_action(snapshot)}: answer yes "
            f"to run it or no to refuse it (or approve, edit or reject it on its card); "
            f"{said[:40]!r} was not taken as a new question"
        )

    def _check_usable(self, value: Any, config: RunnableConfig, snapshot: StateSnapshot) -> None:
        """ValueError unless ``value`` is a decision the waiting Action can take."""
        node = getattr(self.builder.nodes.get("approve_action"), "runnable", None)
        deps = getattr(node, "deps", None)
        try:
            decision = read_decision(value)
            if deps is not None:
                approval.decided(snapshot.values, config, deps, decision)  # type: ignore[arg-type]
        except Malformed as error:
            raise ValueError(
                f"the resume value was refused: {MAX_UNUSABLE} answers to "
                f"{_waiting_action(snapshot)} could not be used, so only a usable decision is "
                f"taken now, and the thread keeps waiting. {error}"
            ) from None

    def _standing(self, input: Any, config: RunnableConfig | None) -> tuple[Any, Any]:
        """What to run, and from where (a fork that would replay a decision asks again:
        ``reactgraph.forks``)."""
        saver = self._saver(config)
        if saver is None or config is None:
            return input, config
        saved = saver.get_tuple(config)
        snapshot = self.get_state(config) if saved is not None else None
        input = self._against(input, config, saved, snapshot)  # type: ignore[arg-type]
        parsed = forks.decided_action(snapshot) if input is None and snapshot else None
        if parsed is not None and forks.is_fork(config, saver.get_tuple(forks.newest(config))):
            config = forks.from_fork(
                config, super().bulk_update_state(forks.rooted(config), forks.ask_again(parsed))
            )
        return input, config

    async def _astanding(self, input: Any, config: RunnableConfig | None) -> tuple[Any, Any]:
        saver = self._saver(config)
        if saver is None or config is None:
            return input, config
        saved = await saver.aget_tuple(config)
        snapshot = await self.aget_state(config) if saved is not None else None
        input = self._against(input, config, saved, snapshot)  # type: ignore[arg-type]
        parsed = forks.decided_action(snapshot) if input is None and snapshot else None
        if parsed is not None and forks.is_fork(
            config, await saver.aget_tuple(forks.newest(config))
        ):
            written = await super().abulk_update_state(
                forks.rooted(config), forks.ask_again(parsed)
            )
            config = forks.from_fork(config, written)
        return input, config

    def _hold(self, config: RunnableConfig | None, way: str = "hold") -> Any:
        """Hold the thread while this process advances it (``ThreadBusy`` when another process
        or thread does, as for the command line's ``resume``), where the checkpointer has its
        database's locks (``open_db``'s ``thread_locks``); ``way="ahold"``: async."""
        locks = getattr(self._saver(config), "thread_locks", None)
        if locks is None or config is None:
            return contextlib.nullcontext()
        return getattr(locks, way)(str(config["configurable"]["thread_id"]))

    def _edits(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[Any]], *states: StateSnapshot
    ) -> list[list[StateUpdate]]:
        """A state edit checked (``reactgraph.state_edits``): the edited checkpoint's state and
        the thread's newest, ``states``, neither waiting for a decision."""
        thread = (config.get("configurable") or {}).get("thread_id")
        for snapshot in states:
            if state_edits.waits_at(snapshot):
                raise state_edits.waiting_refusal(thread, snapshot)
        for update in (update for step in supersteps for update in step):
            if state_edits.is_input(update):
                check_input(StateUpdate(*update).values)
        return state_edits.checked_edits(supersteps, states[0])

    def bulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        """LangGraph's state edit (``update_state`` too), checked first: never on a thread
        that waits for a decision, never of the loop's own fields (``reactgraph.state_edits``)."""
        with self._hold(config):
            states = self.get_state(config), self.get_state(forks.newest(config))
            return super().bulk_update_state(config, self._edits(config, supersteps, *states))

    async def abulk_update_state(
        self, config: RunnableConfig, supersteps: Sequence[Sequence[StateUpdate]]
    ) -> RunnableConfig:
        """``bulk_update_state``, awaited (``aupdate_state`` too; the LangGraph server's
        ``threads.update_state``)."""
        async with self._hold(config, "ahold"):
            states = await self.aget_state(config), await self.aget_state(forks.newest(config))
            checked = self._edits(config, supersteps, *states)
            return await super().abulk_update_state(config, checked)

    def _history_saver(self, config: RunnableConfig) -> BaseCheckpointSaver | None:
        saver = (config.get("configurable") or {}).get(_CHECKPOINTER) or self.checkpointer
        return saver if isinstance(saver, BaseCheckpointSaver) else None

    def get_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """LangGraph's history; a read cut at its ``limit`` also yields, after it, the state in
        which each earlier question first appears, so a chat client edits the question it
        means (``reactgraph.nodes.chatview.edits``)."""
        shown = list(super().get_state_history(config, filter=filter, before=before, limit=limit))
        yield from shown
        saver = self._history_saver(config)
        if saver is not None and edits.clipped(shown, config, filter, before, limit):
            for found in drive(edits.first_states(shown, saver)):
                yield self.get_state(found)

    async def aget_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """``get_state_history``, awaited (what the LangGraph server's history endpoint calls)."""
        shown = [
            state
            async for state in super().aget_state_history(
                config, filter=filter, before=before, limit=limit
            )
        ]
        for state in shown:
            yield state
        saver = self._history_saver(config)
        if saver is not None and edits.clipped(shown, config, filter, before, limit):
            for found in await adrive(edits.first_states(shown, saver)):
                yield await self.aget_state(found)

    def _prepare(self, input: Any, config: RunnableConfig | None, kwargs: dict[str, Any]) -> None:
        check_input(input)
        check_thread(config)
        context = kwargs.get("context")
        schema: Any = self.context_schema  # the variant's own (``context.context_schema``)
        if isinstance(context, Mapping):
            kwargs["context"] = schema(**context)  # checks every field
        elif context is not None and not isinstance(context, schema):
            raise TypeError(
                f"context must be a dict, a RunContext or this graph's context schema, got "
                f"{type(context).__name__}"
            )
        if kwargs.get("durability") is None and self.checkpointer not in (None, False, True):
            kwargs["durability"] = DURABILITY

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        self._prepare(input, config, kwargs)
        return self._held_stream(input, config, kwargs)

    def _held_stream(
        self, input: Any, config: RunnableConfig | None, kwargs: dict[str, Any]
    ) -> Iterator[Any]:
        with self._hold(config):
            input, config = self._standing(input, config)
            yield from super().stream(input, config, **kwargs)

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        self._prepare(input, config, kwargs)
        async with self._hold(config, "ahold"):
            input, config = await self._astanding(input, config)
            async for chunk in super().astream(input, config, **kwargs):
                yield chunk


def adopt(compiled: CompiledStateGraph) -> ReactGraph:
    """``compiled`` as a ``ReactGraph``, built the way LangGraph's own ``copy`` rebuilds it."""
    return ReactGraph(**{k: v for k, v in vars(compiled).items() if k != "__orig_class__"})
