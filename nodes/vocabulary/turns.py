"""A turn's record: made from a reply, its reading and what came of it, numbered after the
run's turns so far, and logged as one line of figures."""

from __future__ import annotations

import logging
from typing import Any

from reactgraph.nodes.vocabulary import prompts
from reactgraph.nodes.vocabulary.state import ModelReply, ParsedReply, State, Turn, TurnKind

logger = logging.getLogger(__name__)


def new_turn(
    state: State,
    kind: TurnKind,
    *,
    reply: ModelReply,
    parsed: ParsedReply | None,
    observation: str | None = None,
    tool_latency_s: float | None = None,
    artifact: Any = None,
) -> Turn:
    """The record of the turn that ``reply`` started, numbered after the turns so far."""
    turn = Turn(
        turn=len(state.get("turns") or []) + 1,
        kind=kind,
        reply=reply["raw"],
        text=reply["text"],
        thought=parsed["thought"] if parsed else None,
        action=parsed["action"] if parsed else None,
        action_input=parsed["action_input"] if parsed else None,
        observation=observation,
        tool_latency_s=tool_latency_s,
        model_latency_s=reply["model_latency_s"],
        prompt_tokens=reply["prompt_tokens"],
        completion_tokens=reply["completion_tokens"],
        token_source=reply["token_source"],
        message_id=reply.get("message_id"),
    )
    if reply.get("cut"):
        turn["cut"] = True
    if reply.get("lost_calls"):
        turn["lost_calls"] = reply["lost_calls"]
    if "model" in reply:
        turn["model"] = reply["model"]
    if artifact is not None:
        turn["artifact"] = artifact
    if parsed is not None and "approval" in parsed:
        turn["approval"] = parsed["approval"]
    if "tool_calls" in reply:
        turn["tool_calls"] = reply["tool_calls"]
        turn["tool_call_id"] = parsed.get("call_id") if parsed else None
        turn["args"] = parsed.get("args") if parsed else None
    log_turn(turn)
    return turn


def log_turn(turn: Turn) -> None:
    """One INFO line of figures per turn, and the turn's text."""
    if not logger.isEnabledFor(logging.INFO):
        return
    latency = "-" if turn["tool_latency_s"] is None else f"{turn['tool_latency_s']:.3f}s"
    logger.info(
        "turn %d %s: tool %s, model %.3fs, tokens %d prompt + %d completion (%s)",
        turn["turn"],
        turn["kind"],
        latency,
        turn["model_latency_s"],
        turn["prompt_tokens"],
        turn["completion_tokens"],
        turn["token_source"],
    )
    logger.info("turn %d reply:\n%s", turn["turn"], turn["text"])
    approval = turn.get("approval")
    if approval is not None:
        logger.info(
            "turn %d: %s[%s] %s by %s",
            turn["turn"],
            turn["action"],
            turn["action_input"],
            prompts.DECIDED[approval["decision"]],
            approval["by"],
        )
    if turn["observation"] is not None:
        logger.info("turn %d observation:\n%s", turn["turn"], turn["observation"])
