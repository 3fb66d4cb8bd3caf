"""What a server's prefix cache can reuse: over a run of every variant in both action formats,
the characters of each call's prompt after its longest common prefix with the previous call's
(what a server such as llama.cpp's evaluates anew), against the text that is new in it (how
much longer it is than the previous one: the latest reply and Observation; the first prompt
whole).

A recording model (the scripted one) answers 40 turns of one search each, whose Observations
are about 400 characters; the notes variants run with ``window_step`` 1 and 8. A ratio near 1
means the prompts only grow between calls; the issue's bounds (issue 56): 1.05 for transcript
and compaction, 2.5 for the notes variants with ``window_step=8``.

    .venv/bin/python bench/prefix.py [--turns 40] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool

from reactgraph import REGISTRY, VARIANTS, build_graph
from reactgraph.nodes.calling.tokens import message_text
from reactgraph.scripted import ScriptedChatModel, tool_call_reply

OBSERVATION_CHARS = 400
BOUNDS = {"transcript": 1.05, "compaction": 1.05, "notes": 2.5, "notes_compaction": 2.5}
"""The issue's bound on the ratio (the notes variants': with ``window_step=8``)."""
FILLER = (
    "The archive lists each result with its source, its date and a short abstract that "
    "repeats the key figures of the study in plain words, followed by related entries. "
)


def shared_prefix(one: Sequence[Any], other: Sequence[Any]) -> int:
    """How many leading items (characters, tokens) the two have in common."""
    common = 0
    for a, b in zip(one, other, strict=False):
        if a != b:
            break
        common += 1
    return common


@tool
def search(query: str) -> str:
    """Searches the archive (about 400 characters a result)."""
    return f"Result for {query}: {(FILLER * 4)[: OBSERVATION_CHARS - 20 - len(query)]}"


def rendered(message: BaseMessage) -> str:
    """One message as a server's chat template would lay it out: its role, its text, its tool
    calls (and a tool message's call id)."""
    calls = getattr(message, "tool_calls", None) or []
    text = f"<{message.type}>{message_text(message)}"
    if calls:
        text += json.dumps([{"name": c["name"], "args": c["args"], "id": c["id"]} for c in calls])
    call_id = getattr(message, "tool_call_id", None)
    return text + (f"[{call_id}]" if call_id else "") + "</>"


def prefix_figures(prompts: Sequence[Sequence[BaseMessage]]) -> dict[str, int]:
    """Over a run's prompts: the characters sent, those after each prompt's longest common
    prefix with the previous one (``anew``), and how much each is longer than the previous one
    (``new``: the text a prompt that only grows evaluates; the first prompt's all count)."""
    sent = anew = new = 0
    previous = ""
    for prompt in prompts:
        text = "".join(rendered(m) for m in prompt)
        common = shared_prefix(text, previous)
        sent += len(text)
        anew += len(text) - common
        new += max(0, len(text) - len(previous))
        previous = text
    return {"sent": sent, "anew": anew, "new": new}


def replies(turns: int, action_format: str) -> list[Any]:
    """``turns`` searches, then the answer, in the format's words."""
    if action_format == "tool_calls":
        found: list[Any] = [
            tool_call_reply("search", {"query": f"topic {i}"}, f"Look up topic {i}.", f"call-{i}")
            for i in range(turns)
        ]
        return [*found, AIMessage("Thought: I know enough.\nFinal Answer: done")]
    found = [f"Thought: Look up topic {i}.\nAction: search[topic {i}]" for i in range(turns)]
    return [*found, "Thought: I know enough.\nFinal Answer: done"]


def run(variant: str, action_format: str, turns: int, **settings: Any) -> dict[str, int]:
    """One recorded run's figures."""
    model = ScriptedChatModel(replies=replies(turns, action_format))
    spec = REGISTRY[variant]
    extra: dict[str, Any] = dict(settings)
    if spec.setting("notes_dir"):
        extra["notes_dir"] = tempfile.mkdtemp(prefix="reactgraph-bench-prefix-")
    if spec.setting("context_window"):
        summary = "## Goal\nLook up every topic.\n## Facts found\nSeveral.\n## Next step\nGo on."
        extra["summarizer"] = ScriptedChatModel(replies=[summary] * turns)
        extra["context_window"] = 8192
    graph = build_graph(
        variant,
        model=model,
        tools=[search],
        max_turns=turns + 1,
        action_format=action_format,
        **extra,
    )
    out = graph.invoke({"question": "What does the archive say about each topic?"})
    if out["status"] != "answered":
        raise RuntimeError(f"{variant}/{action_format}: the run ended {out['status']}")
    figures = prefix_figures([call["messages"] for call in model.calls])
    figures["compactions"] = len(out.get("compactions") or [])
    return figures


def table(turns: int) -> list[dict[str, Any]]:
    """Every variant in both formats; the notes variants with window_step 1 and 8."""
    rows = []
    for variant in VARIANTS:
        steps = (1, 8) if REGISTRY[variant].setting("window_step") else (None,)
        for action_format in ("text", "tool_calls"):
            for step in steps:
                settings = {} if step is None else {"window_step": step}
                figures = run(variant, action_format, turns, **settings)
                ratio = figures["anew"] / figures["new"]
                bound = BOUNDS.get(variant) if step in (None, 8) else None
                rows.append(
                    {
                        "variant": variant,
                        "format": action_format,
                        "window_step": step,
                        **figures,
                        "anew_share": figures["anew"] / figures["sent"],
                        "new_share": figures["new"] / figures["sent"],
                        "ratio": ratio,
                        "bound": bound,
                        "holds": None if bound is None else ratio <= bound,
                    }
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="one JSON object a row")
    args = parser.parse_args(argv)
    rows = table(args.turns)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print("| variant | format | window_step | evaluated anew | new text | anew / new | bound |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        step = "-" if row["window_step"] is None else row["window_step"]
        bound = "-" if row["bound"] is None else f"{row['bound']:g}"
        if row["holds"] is False:
            bound += " (over)"
        print(
            f"| {row['variant']} | {row['format']} | {step} | {row['anew_share']:.1%} | "
            f"{row['new_share']:.1%} | {row['ratio']:.2f} | {bound} |"
        )
    return 0 if all(row["holds"] is not False for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
