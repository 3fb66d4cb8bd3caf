"""The model ladder's pure parts and its middleware alone (issue 54): the rungs made and named
from ``escalate_to``, the rungs a run's context may name, the unusable replies counted in a
row, and ``Ladder.settle`` on one node's update (the stuck ending taken back on every rung but
the last, the move written into the update)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from reactgraph import Rung, build_graph
from reactgraph.nodes.loop.middleware.ladder import Ladder, rung_of, unusable_in_a_row
from reactgraph.nodes.loop.middleware.rungs import (
    MAX_RUNGS,
    check_run,
    chosen,
    parse_address,
    rungs_of,
)
from reactgraph.nodes.loop.middleware.scope import Scope
from tests.fakes import FakeChatModel, ToolLog, answer


def named(name: str) -> FakeChatModel:
    return FakeChatModel(replies=[answer("x")], model_name=name)


def made(name: str, url: str | None) -> BaseChatModel:
    return FakeChatModel(replies=[], model_name=f"{name}|{url}")


def test_rungs_are_named_by_their_models_and_unique() -> None:
    base, a = named("small"), named("big")
    rungs, names = rungs_of([a, Rung(a, constrained_decoding="gbnf"), a], base, made)
    assert names == ("small", "big", "big (constrained_decoding=gbnf)", "big #3")
    assert [r.model for r in rungs] == [a, a, a]
    _, names = rungs_of([Rung(a, name="the big one")], base, made)
    assert names == ("small", "the big one")


def test_one_model_is_a_ladder_of_one_rung() -> None:
    big = named("big")
    assert rungs_of(big, named("small"), made)[1] == ("small", "big")
    assert rungs_of("big", named("small"), made)[1] == ("small", "big")
    assert rungs_of([], named("small"), made) == ((), ("small",))


def test_a_name_given_as_text_is_made_on_the_base_models_server_unless_it_names_one() -> None:
    base = named("small")
    rungs, names = rungs_of(["big", "large@http://127.0.0.1:8080/v1"], base, made)
    assert names == ("small", "big", "large@http://127.0.0.1:8080/v1")
    assert rungs[0].model.model_name == "big|None"
    assert rungs[1].model.model_name == "large|http://127.0.0.1:8080/v1"
    assert parse_address("org/m@v2") == ("org/m@v2", None)  # no URL after the @
    assert parse_address(" m@https://h/v1 ") == ("m", "https://h/v1")


@pytest.mark.parametrize(
    ("entries", "error", "match"),
    [
        (b"big", TypeError, "a list of chat models"),
        ({"big"}, TypeError, "a list of chat models"),
        ([3], TypeError, "chat models or MODEL"),
        ([""], TypeError, "chat models or MODEL"),
        ([named("m")] * (MAX_RUNGS + 1), ValueError, "at most"),
        ([Rung(named("a"), name="x"), Rung(named("b"), name="x")], ValueError, "two rungs"),
        ([Rung(named("a"), name="all")], ValueError, "cannot be named"),
    ],
)
def test_a_bad_ladder_is_refused_when_the_graph_is_built(
    entries: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        rungs_of(entries, named("small"), made)


def test_a_rung_has_only_call_settings_of_its_own() -> None:
    with pytest.raises(ValueError, match="cannot have 'action_format'"):
        Rung(named("a"), action_format="tool_calls")
    with pytest.raises(TypeError, match="BaseChatModel"):
        Rung("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="constrained_decoding must be one of"):
        build_graph(
            "transcript",
            model=named("s"),
            tools=[ToolLog().echo()],
            escalate_to=[Rung(named("b"), constrained_decoding="json")],
        )


def test_a_run_names_fewer_rungs_never_others() -> None:
    built = ("a", "b", "c")
    assert chosen(built, ("c", "a")) == (0, 2)  # the built order
    assert chosen(built, ("all",)) == (0, 1, 2)
    assert chosen(built, ()) == ()
    check_run(built, ("b",))
    with pytest.raises(ValueError, match=r"'d'.*never others"):
        check_run(built, ("b", "d"))


def test_unusable_replies_are_counted_in_a_row_for_one_model() -> None:
    turns = [
        {"kind": "invalid", "model": "s"},
        {"kind": "action", "model": "s"},
        {"kind": "invalid", "model": "s"},
        {"kind": "invalid", "model": "s"},
    ]
    assert unusable_in_a_row(turns, "s") == 2
    assert unusable_in_a_row(turns, "b") == 0
    assert unusable_in_a_row([*turns, {"kind": "invalid", "model": "b"}], "b") == 1
    assert rung_of({}) == 0 and rung_of({"rung": 2}) == 2 and rung_of({"rung": -1}) == 0


def scope_of(graph: Any, state: dict[str, Any], node: str) -> tuple[Ladder, Scope]:
    deps = graph.nodes["call_model"].bound.deps
    (ladder,) = [m for m in deps.chain.middleware if isinstance(m, Ladder)]
    return ladder, Scope(node, state, {}, deps.run_settings(state), deps)


def stuck_turn(n: int) -> dict[str, Any]:
    return {"turn": n, "kind": "stuck", "text": "Action: echo[x]", "model": "s"}


def test_settle_takes_back_the_stuck_ending_on_every_rung_but_the_last() -> None:
    graph = build_graph(
        "transcript", model=named("s"), tools=[ToolLog().echo()], escalate_to=[named("b")]
    )
    settings = graph.nodes["call_model"].bound.deps.settings.as_dict()
    state: dict[str, Any] = {"settings": settings, "turns": [], "rung": 0, "escalations": []}
    ladder, scope = scope_of(graph, state, "parse_reply")
    update = {"parsed": {"kind": "action"}, "turns": [stuck_turn(1)], "status": "stuck"}
    settled = ladder.settle(state, update, scope)
    assert "status" not in settled and "turns" not in settled
    assert settled["rung"] == 1
    (move,) = settled["escalations"]
    assert (move["reason"], move["turn"], move["to_model"]) == ("stuck", 1, "b")
    # On the last rung the stuck ending stands.
    top = {**state, "rung": 1, "escalations": settled["escalations"]}
    ladder, scope = scope_of(graph, top, "parse_reply")
    assert ladder.settle(top, dict(update), scope)["status"] == "stuck"
    assert "rung" not in ladder.settle(top, dict(update), scope)
