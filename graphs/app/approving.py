"""Asking the person at the terminal about an Action that waits for approval (``ask --approve
TOOL``, and ``resume`` of a thread that waits): y runs it as written, e runs it with the input
they type, n refuses it with their reason, r answers in the tool's place. The answer is the
resume value (LangChain's human-in-the-loop shape, with who decided: the terminal's user). When
nobody answers (the input is closed), the thread keeps waiting."""

from __future__ import annotations

import getpass
from collections.abc import Callable, Mapping
from typing import Any

from rich.markup import escape

from reactgraph.app import console as out

CHOICES = "[y]es, run it / [e]dit its input / [n]o, refuse it / [r]eply in its place: "
_WORDS = {
    "y": "approve",
    "yes": "approve",
    "e": "edit",
    "edit": "edit",
    "n": "reject",
    "no": "reject",
    "r": "respond",
    "reply": "respond",
}


def who() -> str:
    """The person at this terminal, as the turn record names them."""
    try:
        return f"{getpass.getuser()} (terminal)"
    except (KeyError, OSError):  # no user name for this uid (a bare container)
        return "the terminal"


def pending_action(request: Mapping[str, Any], values: Mapping[str, Any]) -> str:
    """The waiting Action as the model wrote it (``tool[input]``), from the thread's parse of
    the reply, else from the request."""
    parsed = values.get("parsed") or {}
    asked = (request.get("action_requests") or [{}])[0]
    name = parsed.get("action") or asked.get("name") or "?"
    text = parsed.get("action_input")
    if text is None:
        text = ", ".join(f"{k}={v}" for k, v in (asked.get("args") or {}).items())
    return f"{name}[{text}]"


# Each choice's decision, asking for what it needs; None when the answer falls short (the
# question is asked again).
_Ask = Callable[[Mapping[str, Any], Callable[[str], str]], dict[str, Any] | None]


def _approve(request: Mapping[str, Any], read: Callable[[str], str]) -> dict[str, Any]:
    return {"type": "approve"}


def _edit(request: Mapping[str, Any], read: Callable[[str], str]) -> dict[str, Any]:
    name = (request.get("action_requests") or [{}])[0].get("name")
    text = read("New input (as the tool takes it): ")
    return {"type": "edit", "edited_action": {"name": name, "args": text}}


def _reject(request: Mapping[str, Any], read: Callable[[str], str]) -> dict[str, Any]:
    message = read("Reason (the agent reads it): ").strip()
    return {"type": "reject", **({"message": message} if message else {})}


def _respond(request: Mapping[str, Any], read: Callable[[str], str]) -> dict[str, Any] | None:
    message = read("Your reply: ").strip()
    if not message:
        out.console.print("[dim]a reply needs some text[/dim]")
        return None
    return {"type": "respond", "message": message}


_ASKS: dict[str, _Ask] = {
    "approve": _approve,
    "edit": _edit,
    "reject": _reject,
    "respond": _respond,
}


def decide(
    request: Mapping[str, Any], values: Mapping[str, Any], read: Callable[[str], str] = input
) -> dict[str, Any] | None:
    """The person's decision on the waiting Action (on each, in order, when one reply's calls
    wait together: ``parallel_tool_calls``), as the value to resume with; None when nobody
    answers (end of input)."""
    turn = len(values.get("turns") or []) + 1
    asked = request.get("action_requests") or [{}]
    try:
        if len(asked) > 1:
            decisions = []
            for index, one in enumerate(asked, 1):
                shown = str(one.get("description") or one.get("name") or "?")
                out.console.print(
                    f"[bold yellow]Approval needed[/] for turn {turn}, call {index} of "
                    f"{len(asked)}: {escape(shown)}"
                )
                decisions.append(_decision({"action_requests": [one]}, read))
            return {"decisions": decisions, "by": who()}
        shown = pending_action(request, values)
        out.console.print(f"[bold yellow]Approval needed[/] for turn {turn}: {escape(shown)}")
        return _resume(_decision(request, read))
    except EOFError:
        return None


def _decision(request: Mapping[str, Any], read: Callable[[str], str]) -> dict[str, Any]:
    """One decision read at the terminal, asked again until it is one (EOFError: nobody
    answers)."""
    while True:
        ask = _ASKS.get(_WORDS.get(read(CHOICES).strip().lower(), ""))
        if ask is None:
            out.console.print("[dim]answer y, e, n or r[/dim]")
            continue
        decision = ask(request, read)
        if decision is not None:
            return decision


def _resume(decision: dict[str, Any]) -> dict[str, Any]:
    return {"decisions": [decision], "by": who()}
