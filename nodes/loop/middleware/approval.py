"""A person approves, edits or rejects an Action before it runs (the ``approve`` setting).

``approve_action`` sits between ``parse_reply`` and ``run_tool``, reached only for an Action of
a tool the run's ``approve`` setting names (``needs_approval``). It stops the run with a
LangGraph ``interrupt()`` whose value is the request Agent Chat UI renders (LangChain's
human-in-the-loop ``action_requests``/``review_configs``, with the keys of LangGraph's prebuilt
``HumanInterrupt`` beside them for earlier clients); the thread is checkpointed there, and
``Command(resume=...)`` with the decision goes on (``reactgraph.nodes.running.decisions`` reads it):

- approve: ``run_tool`` runs the Action as the model wrote it;
- edit: ``run_tool`` runs it with the person's input (the turn keeps what the model proposed);
- respond: nothing runs; the person's text is the Observation;
- reject: nothing runs; the Observation says a person refused it, and why.

A value that says no decision is asked about again, the request saying what was wrong. Every
decision is in the turn record (``approval``: which, and who decided) and the turn's log line.
It keys on the parsed action, never on how the reply wrote it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import interrupt

from reactgraph.nodes.chatview.chat import arg_names, call_args
from reactgraph.nodes.loop.middleware.scope import Deps, Scope, refused_call
from reactgraph.nodes.loop.middleware.seam import Middleware
from reactgraph.nodes.running.decisions import (
    MAX_UNUSABLE,
    Decided,
    Malformed,
    read_decision,
    read_decisions,
)
from reactgraph.nodes.running.tool_runs import truncate
from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.nodes.vocabulary.state import Approval, ParsedReply, State
from reactgraph.nodes.vocabulary.storable import storable
from reactgraph.nodes.vocabulary.turns import new_turn

logger = logging.getLogger(__name__)

ALL = "all"
"""The word for every tool (``reactgraph.settings.ALL``, which a list-of-names setting reads)."""
DECISIONS = ("approve", "edit", "reject", "respond")
"""What a person may decide, as the request offers it."""
UNNAMED = "unnamed"
"""Who decided, when nothing says."""
# Where the LangGraph server puts the authenticated user of a run.
_AUTH_USER = "langgraph_auth_user_id"


def approves(names: Sequence[str], tool: str) -> bool:
    """Whether the ``approve`` setting's ``names`` cover the tool."""
    return ALL in names or tool in names


def needs_approval(state: Mapping[str, Any], tools: Collection[str], settings: RunSettings) -> bool:
    """Whether the parsed reply is an Action of a tool a person must approve first (of a
    reply of several calls: whether any of them is, and not yet decided)."""
    parsed = state.get("parsed")
    if parsed is None or parsed["kind"] != "action":
        return False
    if parsed.get("actions"):
        return bool(waiting(parsed, tools, settings))
    if parsed["action"] not in tools:
        return False
    return approves(settings.approve, parsed["action"])


def waiting(parsed: Mapping[str, Any], tools: Collection[str], settings: RunSettings) -> list[int]:
    """The calls of a reply of several that wait for a person's decision: those that run, of a
    tool the ``approve`` setting names, not decided yet (their indexes)."""
    return [
        index
        for index, call in enumerate(parsed.get("actions") or [])
        if call["error"] is None
        and call["action"] in tools
        and approves(settings.approve, str(call["action"]))
        and "approval" not in call
    ]


def runs_tool(state: Mapping[str, Any]) -> bool:
    """After ``approve_action``: whether the tool runs (approved or edited), or the turn is
    complete already (a response or a refusal was its Observation)."""
    parsed = state.get("parsed") or {}
    if parsed.get("actions"):
        return True  # a reply of several calls: its turn is completed in run_tool
    approval = parsed.get("approval") or {}
    return approval.get("decision") in ("approve", "edit")


def check_names(names: Sequence[str], tools: Collection[str]) -> None:
    """ValueError when the ``approve`` setting names a tool the graph does not have: a typo
    would otherwise let that tool run unasked."""
    unknown = [name for name in names if name != ALL and name not in tools]
    if unknown:
        raise ValueError(
            f"approve names {', '.join(map(repr, unknown))}, which the graph has no tool of; "
            f"its tools are: {', '.join(tools) or 'none'} (or approve 'all')"
        )


def request_for(state: State, deps: Deps, problem: str | None = None) -> dict[str, Any]:
    """The interrupt's value: the Action (its tool and arguments, as the chat view's tool call
    shows them) and the decisions allowed, in the shapes chat clients render."""
    parsed = state["parsed"]
    assert parsed is not None
    name = str(parsed["action"])
    args = call_args(parsed, deps.tools)
    turn = len(state.get("turns") or []) + 1
    action = f"{name}[{parsed['action_input']}]"
    description = prompts.APPROVAL_REQUEST.format(action=action, turn=turn)
    if problem is not None:
        description = prompts.APPROVAL_AGAIN.format(problem=problem) + description
    return {
        # LangChain's HITLRequest: what Agent Chat UI renders (approve, edit, reject).
        "action_requests": [{"name": name, "args": args, "description": description}],
        "review_configs": [{"action_name": name, "allowed_decisions": list(DECISIONS)}],
        # LangGraph's prebuilt HumanInterrupt: what the agent inbox and earlier clients render.
        "action_request": {"action": name, "args": args},
        "config": {
            "allow_accept": True,
            "allow_edit": True,
            "allow_respond": True,
            "allow_ignore": True,
        },
        "description": description,
    }


def approve_action(state: State, config: RunnableConfig, deps: Deps) -> dict[str, Any]:
    """Stop for a person's decision on the parsed Action, then apply it; a value that says no
    decision is asked about again. Runs again from the start when the run is resumed (LangGraph
    replays the values given so far to the ``interrupt()`` calls in order), so everything
    before each call is a pure function of the state."""
    parsed, reply = state["parsed"], state["reply"]
    if parsed is not None and parsed.get("actions"):
        return approve_calls(state, config, deps)
    if parsed is None or reply is None or parsed["action"] not in deps.tools:
        raise ValueError("approve_action needs a parsed tool action in the state")
    problem: str | None = None
    unusable = 0
    while True:
        value = interrupt(request_for(state, deps, problem))
        try:
            return decided(state, config, deps, read_decision(value))
        except Malformed as error:
            unusable += 1
            problem = str(error)
            if unusable >= MAX_UNUSABLE:
                problem += " " + prompts.APPROVAL_LAST_TRY.format(total=unusable)
            logger.warning("an unusable decision on %s: %s", parsed["action"], problem)


def decided(
    state: State,
    config: RunnableConfig,
    deps: Deps,
    decision: Decided,
    parsed: ParsedReply | None = None,
) -> dict[str, Any]:
    """The update a decision makes: the parse with its approval (an edit's input in it), and
    for a response or a refusal the turn it completes (``parsed``: one call's of several,
    whose turn ``run_tool`` completes)."""
    one = parsed is not None
    parsed, reply = parsed or state["parsed"], state["reply"]
    assert parsed is not None and reply is not None
    approval = Approval(decision=decision.decision, by=decided_by(config, decision.by))
    if decision.message is not None:
        approval["message"] = decision.message
    if decision.said is not None:
        approval["said"] = decision.said
    chosen = ParsedReply(**parsed)
    if decision.decision == "edit":
        name = decision.action or str(parsed["action"])
        if name not in deps.tools:
            raise Malformed(f"the edited action names {name[:60]!r}, which is not a tool.")
        text = input_of(name, decision.args, deps)
        if (name, text) == (parsed["action"], parsed["action_input"]):
            approval["decision"] = "approve"  # edited back to what the model wrote
        else:
            approval["proposed_action"] = str(parsed["action"])
            approval["proposed_input"] = parsed["action_input"] or ""
            chosen["action"], chosen["action_input"] = name, text
            if chosen.get("args") is not None:
                chosen["args"] = None  # a native call's edit runs from its input, as text's does
    chosen["approval"] = approval
    update: dict[str, Any] = {"parsed": chosen}
    if approval["decision"] in ("respond", "reject") and not one:
        if approval["decision"] == "respond":
            observation = decision.message or ""
        elif decision.message:
            observation = prompts.ACTION_REJECTED_WHY.format(reason=decision.message)
        else:
            observation = prompts.ACTION_REJECTED
        limit = deps.run_settings(state).max_observation_chars
        observation = truncate(storable(observation), limit)
        update["turns"] = [
            new_turn(state, "action", reply=reply, parsed=chosen, observation=observation)
        ]
    return update


def approve_calls(state: State, config: RunnableConfig, deps: Deps) -> dict[str, Any]:
    """A reply of several calls: one interrupt listing every call that waits, each decided on
    its own (``read_decisions``: one decision per call, in order), and the parse with each
    decision in its call (``run_tool`` then runs those approved or edited, and answers the
    others with the person's response or refusal)."""
    parsed = state["parsed"]
    assert parsed is not None
    pending = waiting(parsed, deps.tools, deps.run_settings(state))
    problem: str | None = None
    unusable = 0
    while True:
        value = interrupt(calls_request(state, deps, pending, problem))
        try:
            found = read_decisions(value, len(pending))
            chosen = [dict(call) for call in parsed.get("actions") or []]
            for index, decision in zip(pending, found, strict=True):
                one = ParsedReply(**parsed)
                one.update(chosen[index])  # type: ignore[typeddict-item]
                one.pop("actions", None)
                one["kind"] = "action"
                made = decided(state, config, deps, decision, one)["parsed"]
                chosen[index]["approval"] = made["approval"]
                chosen[index]["action"], chosen[index]["action_input"] = (
                    made["action"],
                    made["action_input"],
                )
                if decision.decision == "edit":
                    chosen[index]["args"] = made.get("args")
            return {"parsed": {**parsed, "actions": chosen}}
        except Malformed as error:
            unusable += 1
            problem = str(error)
            if unusable >= MAX_UNUSABLE:
                problem += " " + prompts.APPROVAL_LAST_TRY.format(total=unusable)
            logger.warning("an unusable decision on %d calls: %s", len(pending), problem)


def calls_request(
    state: State, deps: Deps, pending: list[int], problem: str | None
) -> dict[str, Any]:
    """The interrupt's value for several calls: every waiting call an action request (in the
    reply's order), as LangChain's human-in-the-loop middleware lists several."""
    parsed = state["parsed"]
    assert parsed is not None
    calls = parsed.get("actions") or []
    turn = len(state.get("turns") or []) + 1
    shown = [f"{calls[i]['action']}[{calls[i]['action_input']}]" for i in pending]
    description = prompts.APPROVAL_REQUEST.format(action=", ".join(shown), turn=turn)
    if problem is not None:
        description = prompts.APPROVAL_AGAIN.format(problem=problem) + description
    requests = []
    for i, action in zip(pending, shown, strict=True):
        name = str(calls[i]["action"])
        args = call_args({**calls[i]}, deps.tools)
        requests.append({"name": name, "args": args, "description": action})
    return {
        "action_requests": requests,
        "review_configs": [
            {"action_name": r["name"], "allowed_decisions": list(DECISIONS)} for r in requests
        ],
        "description": description,
    }


def input_of(name: str, args: Any, deps: Deps) -> str:
    """An edited action's input as the model would have written it: the raw text as given, the
    JSON object of a tool of several arguments, else the value of the tool's one argument."""
    if isinstance(args, str):
        return storable(args)
    keys = arg_names(name, deps.tools)
    if len(keys) > 1:
        return storable(json.dumps(args, ensure_ascii=False))
    key = keys[0] if keys else "input"
    if key in args:
        value = args[key]
    elif len(args) == 1:
        value = next(iter(args.values()))
    elif not args and not keys:
        value = ""  # a tool of no arguments
    else:
        raise Malformed(f"the edited arguments of {name} need {key!r}.")
    return storable(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def decided_by(config: RunnableConfig, given: str | None) -> str:
    """Who decided: the LangGraph server's authenticated user, else the name the value gives."""
    user = (config.get("configurable") or {}).get(_AUTH_USER)
    if isinstance(user, str) and user.strip():
        return user.strip()
    return given or UNNAMED


class ApprovalGate(Middleware):
    """The approval gate as middleware: an Action of a tool the run's ``approve`` setting
    names waits for a person (``approve_action``, the node it adds), and no tool call of such a
    tool runs without that person's decision on it, whatever a middleware's handler call
    asks for (a call a middleware changed to another such tool, or to other arguments, is
    refused, unrun)."""

    def __init__(self, tools: Collection[str]) -> None:
        self.tools = frozenset(tools)

    def pauses(self, after: Mapping[str, Any], settings: RunSettings) -> bool:
        return needs_approval(after, self.tools, settings)

    def wraps(self, hook: str, scope: Scope) -> bool:
        return bool(scope.settings.approve)  # no tool to approve: no call to hold

    def wrap_tool_call(self, request: Any, call: Any, scope: Scope) -> Any:
        asked = request.tool_call
        name = str(asked.get("name"))
        state = getattr(request, "state", None) or scope.state  # a call of several: its own
        if approves(scope.settings.approve, name) and not (
            _decided_for(state, name)
            and scope.asked.get(str(asked.get("id"))) == (name, asked.get("args"))
        ):
            logger.warning("a call of %s without a person's decision on it was refused", name)
            return refused_call(request, prompts.ACTION_UNAPPROVED)
        return (yield from call(request))


def _decided_for(state: Mapping[str, Any], name: str) -> bool:
    """Whether the parsed Action is ``name``'s and a person approved it (as it is, or edited)."""
    parsed = state.get("parsed") or {}
    approval = parsed.get("approval") or {}
    return parsed.get("action") == name and approval.get("decision") in ("approve", "edit")
