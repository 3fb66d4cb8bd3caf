"""What a state edit may change: ``update_state``, ``aupdate_state``, ``bulk_update_state`` and
``abulk_update_state`` (Studio's state editor and its fork with new values, the LangGraph
server's ``threads.update_state``), checked before anything is stored.

- On a thread that waits for a person's decision (its newest checkpoint waits at
  ``approve_action``), or at a checkpoint where that step is due, every edit is refused with
  ``EditRefused`` (a ValueError): an edit written "as" a node would run the Action with no
  decision (``Command(goto="run_tool")``), or drop it, leaving a thread that looks finished.
  The way on is a decision, ``Command(resume=DECISION)``.
- On any thread, an edit cannot change what only the loop writes (``LOOP_FIELDS``): the run's
  settings (its ``approve`` list with the deployment's floor, its budgets), its spend, the
  pending Action and the decisions, the turns. A value equal to the stored one (Studio's editor
  and pruning send the whole state back) is written as it is (the turns in full, not appended
  again); a different one is refused. Nor may an edit route the run (a ``Command``'s
  ``goto``), give a decision (its ``resume``) or drop the steps due (``as_node=END`` with no
  values).
- Everything else is LangGraph's own edit: the chat view's ``messages``, the ``question`` of a
  fork, the notes and the summary, a run's outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.graph import END
from langgraph.types import Command, Overwrite, StateSnapshot, StateUpdate

LOOP_FIELDS: dict[str, str] = {
    "settings": "the run's settings (its approve list, the deployment's floor, its budgets)",
    "usage": "the run's spend",
    "budget": "the budget that ended the run",
    "budget_warned": "the budgets' warnings given",
    "parsed": "the pending Action and the decision on it",
    "reply": "the model's reply the next Action is read from",
    "turns": "the turns, with their decisions and spend",
    "run": "the run's number on the thread",
    "thread_id": "the run's thread",
    "trace": "the run's trace context",
    "rung": "the model ladder's rung the run has reached",
    "escalations": "the run's moves up the model ladder",
}
"""The state's fields only the loop writes, and what each holds (named in the refusal)."""

_APPENDED = frozenset({"turns"})  # the loop's fields whose reducer appends what is written
_COPY = "__copy__"  # LangGraph's fork of a checkpoint, as an edit's node
_INPUT = "__input__"  # an edit as the graph's input: a new run's question
WAITING_NODE = "approve_action"
"""The step at which a thread waits for a person's decision."""
DECIDE = (
    "decide with invoke(Command(resume=DECISION)) (approve, edit, respond or reject; the "
    "LangGraph server: runs with command={'resume': DECISION})"
)


class EditRefused(ValueError):
    """A state edit that would change what only the loop or a person's decision may change."""


def waits_at(snapshot: StateSnapshot | None) -> bool:
    """Whether ``approve_action`` is due at this checkpoint (waiting for a decision, or about
    to ask for one), or any step waits on an ``interrupt()`` (an application's middleware
    asking a person)."""
    return snapshot is not None and any(
        task.name == WAITING_NODE or task.interrupts for task in snapshot.tasks
    )


def waiting_refusal(thread: Any, snapshot: StateSnapshot) -> EditRefused:
    """The refusal of any edit of a thread that waits for a decision."""
    parsed = snapshot.values.get("parsed") or {}
    action = f"{parsed.get('action')}[{parsed.get('action_input') or ''}]"
    return EditRefused(
        f"thread {str(thread)[:80]!r} waits for a person's decision on {action[:200]}: its "
        f"state cannot be edited until then (an edit would run or drop the Action); {DECIDE}"
    )


def _plain(value: Any) -> Any:
    """``value`` as JSON would carry it (tuples as lists), to compare a client's copy."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _fields(values: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` to write; EditRefused when it would change one of the loop's fields."""
    kept: dict[str, Any] = {}
    for key, value in values.items():
        if key in LOOP_FIELDS:
            whole = isinstance(value, Overwrite)  # the same value written in full (pruning)
            if _plain(value.value if whole else value) != _plain(stored.get(key)):
                raise EditRefused(
                    f"the state edit writes {key!r} ({LOOP_FIELDS[key]}), which only the loop "
                    f"changes; edit other fields (messages, question, notes...), or start a "
                    f"new run"
                )
            if key in _APPENDED and not whole and value:
                value = Overwrite(value)  # the same turns, not appended a second time
        kept[key] = value  # unchanged (Studio's editor and pruning send the whole state)
    return kept


def _command(command: Command, stored: Mapping[str, Any]) -> Command:
    """A ``Command`` a state edit gives, its update checked: it may not resume, route or reach a
    parent graph (EditRefused)."""
    if command.graph is not None or command.resume is not None:
        raise EditRefused(
            "a state edit gives no decision and reaches no parent graph: a decision is "
            "invoke(Command(resume=DECISION)) on the thread"
        )
    if command.goto not in (None, (), []):
        raise EditRefused(
            f"a state edit cannot route the run (Command(goto={command.goto!r})): the loop "
            f"chooses its next step, and an Action runs only after a person's decision where "
            f"one is asked for"
        )
    update = command.update
    if update is None or isinstance(update, Mapping):
        return Command(update=None if update is None else _fields(update, stored))
    kept = [(key, value) for key, value in _pairs(update) if _fields({key: value}, stored)]
    return Command(update=kept)


def _pairs(update: Any) -> list[Any]:
    """A ``Command``'s update given as (field, value) pairs, or EditRefused."""
    pairs = list(update) if isinstance(update, list | tuple) else []
    if not pairs or not all(
        isinstance(pair, list | tuple) and len(pair) == 2 and isinstance(pair[0], str)
        for pair in pairs
    ):
        raise EditRefused(
            "a state edit's Command(update=...) is a dict of the state's fields, or a list of "
            "(field, value) pairs"
        )
    return pairs


def _values(values: Any, stored: Mapping[str, Any]) -> Any:
    """One update's values, checked (see the module's docstring)."""
    if values is None:
        return None
    if isinstance(values, Mapping):
        return _fields(values, stored)
    if isinstance(values, Command):
        return _command(values, stored)
    if isinstance(values, list | tuple) and all(isinstance(v, Command) for v in values):
        return [_command(v, stored) for v in values]
    raise EditRefused(f"a state edit is a dict of the state's fields, got {type(values).__name__}")


def checked_update(update: Any, snapshot: StateSnapshot) -> StateUpdate:
    """One ``StateUpdate`` (or its tuple) against the checkpoint it edits: what to write, or
    EditRefused."""
    values, as_node, task_id = StateUpdate(*update)
    stored = snapshot.values or {}
    if as_node == END and values is None:
        if snapshot.tasks:
            raise EditRefused(
                "a state edit cannot drop the steps due (as_node=END with no values): the run "
                "would look finished, with no status; resume it with invoke(None, config)"
            )
        return StateUpdate(None, as_node, task_id)
    if as_node == _COPY and isinstance(values, list | tuple):
        copied = [checked_update(StateUpdate(*item[:2]), snapshot) for item in values]
        return StateUpdate([tuple(item[:2]) for item in copied], as_node, task_id)
    return StateUpdate(_values(values, stored), as_node, task_id)


def checked_edits(
    supersteps: Sequence[Sequence[Any]], snapshot: StateSnapshot
) -> list[list[StateUpdate]]:
    """Every update of ``supersteps`` checked against the edited checkpoint (``snapshot``): the
    supersteps to write, or EditRefused before anything is stored. The loop's fields are
    compared with the edited checkpoint's, which no edit can change (each would be refused)."""
    return [[checked_update(update, snapshot) for update in step] for step in supersteps]


def is_input(update: Any) -> bool:
    """Whether an update is written as the graph's input (a new run's question)."""
    return StateUpdate(*update).as_node == _INPUT
