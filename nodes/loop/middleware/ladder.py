"""The model ladder as middleware (``escalate_to``, ``escalate_after``): a run starts on its model
and moves up one rung, for the rest of the run, when

- a model call fails after its retries (``wrap_model_call``: the same call is made again at
  once on the next rung, so the reply the loop reads is the new model's);
- ``escalate_after`` replies in a row of the rung's model could not be used (``settle``: turns
  of kind ``invalid``, each answered by a corrective Observation);
- the stuck rule would end the run (``settle``: the stuck ending is taken back, the reply is
  completed as any other turn, and the next call is the new model's).

On the last rung everything is as without a ladder. The rung is the state's (``rung``, with
each move in ``escalations``), so a resumed run goes on with the model it had reached; each
node's run applies the rung's own call settings (``node_entered``). Every call goes through
the middleware inside it (the grammar, the budgets, the traces), so each rung's calls are
constrained, counted (``Scope.calling``: the spend split by model) and traced.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.errors import GraphBubbleUp

from reactgraph.nodes.loop.middleware.rungs import Rung, chosen, model_label
from reactgraph.nodes.loop.middleware.scope import MiddlewareError, Scope
from reactgraph.nodes.loop.middleware.seam import Middleware
from reactgraph.nodes.loop.middleware.tracing import run_event
from reactgraph.nodes.vocabulary.run_settings import RunSettings
from reactgraph.nodes.vocabulary.state import Escalation
from reactgraph.nodes.vocabulary.storable import storable

logger = logging.getLogger(__name__)

ESCALATED = "reactgraph.escalated"
"""The run span's event at each move up the ladder (its reason, the models, the turn)."""
RUNG, MOVES, MODEL = "ladder.rung", "ladder.moves", "ladder.model"
"""The scope's marks: the rung reached in this node, its moves, the model of its last call."""
DETAIL_CHARS = 200
"""The most characters of a move's ``detail``."""


def rung_of(state: Mapping[str, Any]) -> int:
    """The rung a run has reached (0: its own model)."""
    rung = state.get("rung")
    return rung if isinstance(rung, int) and rung > 0 else 0


def unusable_in_a_row(turns: Sequence[Mapping[str, Any]], model: str) -> int:
    """How many of the last turns in a row were replies of ``model`` the loop could not use
    (each answered by a corrective Observation)."""
    count = 0
    for turn in reversed(turns):
        if turn.get("kind") != "invalid" or turn.get("model") != model:
            break
        count += 1
    return count


class Ladder(Middleware):
    """The model ladder: ``rungs`` above the run's model, ``names`` theirs (the run's model's
    first)."""

    def __init__(self, rungs: Sequence[Rung], names: Sequence[str]) -> None:
        self.rungs, self.names = tuple(rungs), tuple(names)

    def _ladder(self, settings: RunSettings) -> tuple[int, ...]:
        """The positions in ``rungs`` of the run's ladder (its ``escalate_to``)."""
        return chosen(self.names[1:], settings.escalate_to)

    def _name(self, ladder: tuple[int, ...], rung: int) -> str:
        return self.names[0] if rung == 0 else self.names[1 + ladder[rung - 1]]

    def _settings(self, scope: Scope, ladder: tuple[int, ...], rung: int) -> RunSettings:
        """The run's settings with the rung's own call settings over them."""
        settings = scope.deps.run_settings(scope.state)
        own = self.rungs[ladder[rung - 1]].settings if rung else {}
        return settings.over(own) if own else settings

    def _rung(self, scope: Scope) -> int:
        found = scope.marks.get(RUNG)
        return found if isinstance(found, int) else rung_of(scope.state)

    def _move(
        self, scope: Scope, ladder: tuple[int, ...], reason: str, detail: str, turns: int
    ) -> int:
        """Up one rung in this node (its ``settle`` writes it) after ``turns`` turns: the move
        recorded, the new rung's call settings in force."""
        rung = self._rung(scope)
        move = Escalation(
            turn=turns,
            rung=rung + 1,
            from_model=self._name(ladder, rung),
            to_model=self._name(ladder, rung + 1),
            reason=reason,  # type: ignore[typeddict-item]
            detail=storable(detail[:DETAIL_CHARS]),  # a server's or a model's words
        )
        logger.warning(
            "moving up the model ladder after turn %d: %s -> %s (%s: %s)",
            turns,
            move["from_model"],
            move["to_model"],
            reason,
            move["detail"],
        )
        scope.marks.setdefault(MOVES, []).append(move)
        scope.marks[RUNG] = rung + 1
        scope.settings = self._settings(scope, ladder, rung + 1)
        return rung + 1

    def before_agent(self, state: Mapping[str, Any], scope: Scope) -> dict[str, Any]:
        return {"rung": 0, "escalations": []}  # a new run starts on its own model

    def node_entered(self, scope: Scope) -> None:
        rung = rung_of(scope.state)
        if scope.node == "start_run" or not rung:
            return
        ladder = self._ladder(scope.settings)
        if rung <= len(ladder):
            scope.settings = self._settings(scope, ladder, rung)

    def wrap_model_call(self, request: Any, call: Any, scope: Scope) -> Any:
        ladder = self._ladder(scope.settings)
        if not ladder:
            return (yield from call(request))
        own = scope.deps.caller_for(scope.deps.run_settings(scope.state)).model
        if scope.purpose == "summary" or request.model is not own:
            # The summarizer's call, or a model a middleware asked for: not the ladder's.
            is_base = request.model is scope.deps.model
            scope.calling = self.names[0] if is_base else model_label(request.model)
            try:
                return (yield from call(request))
            finally:
                scope.calling = None
        while True:
            rung = self._rung(scope)
            sent = request
            if rung:
                sent = request.override(model=self.rungs[ladder[rung - 1]].model)
            scope.calling = scope.marks[MODEL] = self._name(ladder, rung)
            try:
                return (yield from call(sent))
            except (GraphBubbleUp, MiddlewareError):
                raise  # an interrupt, a run ended by a budget, a misuse: no model's fault
            except Exception as error:
                if rung >= len(ladder):
                    raise
                done = len(scope.state.get("turns") or [])
                self._move(scope, ladder, "fault", f"{type(error).__name__}: {error}", done)
            finally:
                scope.calling = None

    def settle(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        ladder = self._ladder(scope.settings)
        if not ladder or scope.node == "start_run":
            return update
        update = self._named(state, update, scope)
        rung = self._rung(scope)
        added = update.get("turns")
        added = added if isinstance(added, list) else []
        if update.get("status") == "stuck" and rung < len(ladder):
            update = self._up_from_stuck(state, update, scope, ladder, added)
        elif added and not update.get("status") and not state.get("status"):
            self._up_if_unusable(state, scope, ladder, rung, added)
        return _with_moves(state, update, scope)

    def _up_from_stuck(
        self,
        state: Mapping[str, Any],
        update: dict[str, Any],
        scope: Scope,
        ladder: tuple[int, ...],
        added: list[Any],
    ) -> dict:
        """On every rung but the last, the stuck rule moves the run up instead of ending it:
        the update without its ``stuck`` status and turn (the reply is completed as any other:
        its Action runs, or it gets its correction)."""
        last = next((t for t in reversed(added) if t["kind"] == "stuck"), None)
        text = last["text"] if last is not None else ""
        kept = [t for t in added if t["kind"] != "stuck"]
        done = len(state.get("turns") or []) + len(kept) + 1  # the stuck reply's turn too
        self._move(scope, ladder, "stuck", f"the same reply again: {text}", done)
        update = {k: v for k, v in update.items() if k not in ("status", "turns")}
        if kept:
            update["turns"] = kept
        return update

    def _up_if_unusable(
        self,
        state: Mapping[str, Any],
        scope: Scope,
        ladder: tuple[int, ...],
        rung: int,
        added: list[Any],
    ) -> None:
        """Move the run up (below the last rung) once ``escalate_after`` replies in a row of
        this rung's model could not be used."""
        turns = [*(state.get("turns") or []), *added]
        count = unusable_in_a_row(turns, self._name(ladder, rung))
        if count >= scope.settings.escalate_after and rung < len(ladder):
            said = turns[-1].get("observation") or ""
            detail = f"{count} unusable replies: {said}"
            self._move(scope, ladder, "unusable", detail, len(turns))

    def _named(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        """The update with its reply, and the turns it completes, naming their model."""
        model = scope.marks.get(MODEL)
        reply = update.get("reply")
        if isinstance(model, str) and isinstance(reply, dict):
            reply = {**reply, "model": model}
            update = {**update, "reply": reply}
        added = update.get("turns")
        if not isinstance(added, list) or all("model" in t for t in added):
            return update
        source = reply if isinstance(reply, dict) else state.get("reply")
        named = (source or {}).get("model") if isinstance(source, Mapping) else None
        if not isinstance(named, str):
            return update
        turns = [t if "model" in t else {**t, "model": named} for t in added]
        return {**update, "turns": turns}

    def observe(self, state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
        moves = update.get("escalations")
        if isinstance(moves, list):
            for move in moves[len(state.get("escalations") or []) :]:
                run_event(
                    state,
                    ESCALATED,
                    {
                        "reactgraph.turn": move["turn"],
                        "reactgraph.escalation.reason": move["reason"],
                        "reactgraph.escalation.from_model": move["from_model"],
                        "reactgraph.escalation.to_model": move["to_model"],
                        "reactgraph.escalation.rung": move["rung"],
                        "reactgraph.escalation.detail": move["detail"],
                    },
                )
        return update


def _with_moves(state: Mapping[str, Any], update: dict[str, Any], scope: Scope) -> dict:
    """The update with the moves up this node made (``escalations``) and the rung it left the
    run on; as it is when it made none."""
    moves = scope.marks.get(MOVES)
    if not moves:
        return update
    return {
        **update,
        "rung": scope.marks[RUNG],
        "escalations": [*(state.get("escalations") or []), *moves],
    }
