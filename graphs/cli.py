"""The ``reactgraph`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from graphs import build_graph
from graphs.scripted import DEMO_QUESTION, DEMO_REPLIES, ScriptedChatModel
from tools import calculator, search_tools


def print_turn(turn: dict[str, Any]) -> None:
    """A turn as a person reads it: the model's text, the Observation, the figures."""
    print(f"\n--- turn {turn['turn']} ({turn['kind']}) ---")
    print(turn["text"])
    if turn["observation"] is not None:
        print(f"Observation: {turn['observation']}")
    tool = (
        "" if turn["tool_latency_s"] is None else f", tool {turn['tool_latency_s'] * 1000:.1f} ms"
    )
    print(
        f"[model {turn['model_latency_s'] * 1000:.1f} ms{tool}, tokens "
        f"{turn['prompt_tokens']} prompt + {turn['completion_tokens']} completion "
        f"({turn['token_source']})]"
    )


def run_demo(args: argparse.Namespace) -> int:
    """The offline demo: a scripted model drives the real graph, search and calculator."""
    print("reactgraph demo: the model is SCRIPTED (no LLM is called); the graph, the local")
    print("search over tools/corpus and the calculator are real.")
    print(f"\nQuestion: {DEMO_QUESTION}")
    model = ScriptedChatModel(replies=DEMO_REPLIES)
    graph = build_graph("transcript", model=model, tools=[*search_tools(), calculator])
    final: dict[str, Any] = {}
    for update in graph.stream({"question": DEMO_QUESTION}, stream_mode="updates"):
        for change in update.values():
            if not change:
                continue
            turns = change.get("turns")
            # start_run's reset of the transcript arrives as an Overwrite, not a list.
            for turn in turns if isinstance(turns, list) else []:
                print_turn(turn)
            final.update({k: v for k, v in change.items() if k in ("answer", "status")})
    print(f"\nAnswer: {final.get('answer')}\nStatus: {final.get('status')}")
    return 0 if final.get("status") == "answered" else 1


def make_parser() -> argparse.ArgumentParser:
    """The argument parser, one sub-command each."""
    parser = argparse.ArgumentParser(prog="reactgraph", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step (INFO)")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="offline demo with a scripted model")
    demo.set_defaults(handler=run_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = make_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
