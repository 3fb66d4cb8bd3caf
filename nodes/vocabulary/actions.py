"""The records of a reply's calls and a person's decisions on them, as the state holds them
(``reactgraph.nodes.vocabulary.state`` re-exports each): a native tool call, a call of a reply
of several (``parallel_tool_calls``) as read and as it ran, a person's decision."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

Decision = Literal["approve", "edit", "respond", "reject"]


class Approval(TypedDict):
    """A person's decision on an Action before it ran (the ``approve`` setting)."""

    decision: Decision
    """``approve``: it ran as the model wrote it; ``edit``: it ran with the person's input;
    ``respond``: it did not run, and the person's text is its Observation; ``reject``: it did
    not run, and its Observation says a person refused it (and why, when they said)."""
    by: str
    """Who decided: the LangGraph server's authenticated user, else the name the resume value
    gives (the command line gives the terminal's user), else ``unnamed``."""
    message: NotRequired[str]
    """The person's text: ``respond``'s Observation, ``reject``'s reason."""
    proposed_action: NotRequired[str]
    """``edit``: the tool the model named (the turn's ``action`` is the one that ran)."""
    proposed_input: NotRequired[str]
    """``edit``: the input the model wrote (the turn's ``action_input`` is the one that ran)."""
    said: NotRequired[str]
    """The words a person typed in the chat to decide ("yes", "no"), when they decided there
    rather than on the approval card (the chat view shows them)."""


class ToolCallRecord(TypedDict):
    """One tool call as a model sent it (``action_format="tool_calls"``), made storable: the
    next prompt sends it back, answered by a ``ToolMessage`` with its id."""

    name: str
    """The tool's name as the model wrote it."""
    args: dict[str, Any]
    """Its arguments (empty when they could not be read: see ``error``)."""
    id: str
    """The call's id, unique within its reply (made up when the model gave none)."""
    error: NotRequired[str]
    """Why its arguments could not be read (not JSON, not an object): the call is not run."""


class CallReading(TypedDict):
    """One call of a reply that holds several (``parallel_tool_calls``), as read."""

    action: str | None
    """The tool's name (canonical spelling), or None when the call cannot run."""
    action_input: str | None
    """Its raw input (in the ``tool_calls`` format, its arguments' text)."""
    call_id: str | None
    """``tool_calls`` format: the call's id as the model sent it; None in the text format."""
    args: dict[str, Any] | None
    """``tool_calls`` format: its arguments as the model sent them; None in the text format."""
    error: str | None
    """Why it does not run (an unknown tool, unreadable arguments, past
    ``max_parallel_calls``): the corrective text that is its Observation; None when it runs."""
    approval: NotRequired[Approval]
    """A person's decision on it, once made (``approve_action``)."""


class CallRecord(TypedDict):
    """One call of a turn that ran several (``parallel_tool_calls``) and what came of it."""

    action: str | None
    """The tool's name, or None for a call that could not run."""
    action_input: str | None
    """Its input, as it ran (a person's edit included)."""
    call_id: str | None
    """``tool_calls`` format: the id of the model's call this answers; None in the text
    format (its Observation is labelled with its number instead)."""
    args: dict[str, Any] | None
    """``tool_calls`` format: its arguments as the model sent them."""
    observation: str
    """Its own Observation (already truncated)."""
    tool_latency_s: float | None
    """Wall time of its tool call in seconds, or None when it did not run."""
    artifact: NotRequired[Any]
    """The tool's artifact, when it gave one."""
    approval: NotRequired[Approval]
    """A person's decision on it before it ran, when one was asked for."""
