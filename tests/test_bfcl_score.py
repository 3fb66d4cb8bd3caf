"""The BFCL scorer on the package's own ground-truth answers: a perfect answer scores 1 in every
task of every category (but the two the leaderboard's data makes unpassable), a wrong argument
0, a missing parallel call 0, a call where none fits 0; multi-turn: the ground truth's calls
pass, a turn left out, a wrong argument or a call too many fail by the state or the results;
the ground truth's source read without evaluating it; Wilson's interval."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reactgraph.app.eval.bfcl_ast import ast_check, standardize
from reactgraph.app.eval.bfcl_data import CATEGORIES, MULTI_TURN, load_category
from reactgraph.app.eval.bfcl_report import wilson
from reactgraph.app.eval.bfcl_run import failure_kind, verdict_of
from reactgraph.app.eval.bfcl_state import parse_source_call
from tests.fakes import bfcl_perfect_calls, bfcl_wrong_calls

# Required parameters with no accepted value in the leaderboard's own answers: no call passes.
UNPASSABLE = {"live_simple_106-63-0", "live_simple_112-68-0"}


def recorded(task: Any, plan: Any = bfcl_perfect_calls) -> list[list[dict[str, Any]]]:
    """A run's recorded calls, per turn, as the tools record them."""
    return [
        [{"name": n, "arguments": a} for n, a in plan(task, turn)]
        for turn in range(len(task.turns))
    ]


@pytest.mark.parametrize("category", CATEGORIES)
def test_the_ground_truth_passes_every_task(category: str) -> None:
    tasks = load_category(category)
    assert len(tasks) >= 200
    failed = {t.id for t in tasks if not verdict_of(t, recorded(t)).valid}
    assert failed == (UNPASSABLE if category == "live_simple" else set())


@pytest.mark.parametrize("category", ["simple_python", "multiple", "parallel", "live_simple"])
def test_a_wrong_argument_scores_0(category: str) -> None:
    for task in load_category(category, 40):
        calls = recorded(task)
        name, arguments = calls[0][0]["name"], calls[0][0]["arguments"]
        if not arguments:
            continue
        key = next(iter(arguments))
        wrong = {**arguments, key: bfcl_wrong_calls(task)[0][1][key]}
        calls[0][0] = {"name": name, "arguments": wrong}
        verdict = verdict_of(task, calls)
        assert not verdict.valid, (task.id, wrong)
        assert failure_kind(verdict, calls, 0) in {"wrong_argument", "wrong_call"}


def test_a_wrong_function_and_a_wrong_count_score_0() -> None:
    task = load_category("multiple", 1)[0]
    calls = recorded(task)
    other = next(d["name"] for d in task.functions if d["name"] != calls[0][0]["name"])
    renamed = [[{**calls[0][0], "name": other}]]
    verdict = verdict_of(task, renamed)
    assert not verdict.valid and failure_kind(verdict, renamed, 0) == "wrong_function"
    twice = [calls[0] * 2]
    verdict = verdict_of(task, twice)
    assert not verdict.valid and failure_kind(verdict, twice, 0) == "wrong_count"


@pytest.mark.parametrize("category", ["parallel", "parallel_multiple"])
def test_a_missing_parallel_call_scores_0_in_any_order(category: str) -> None:
    for task in load_category(category, 30):
        calls = recorded(task)
        assert len(calls[0]) >= 2
        reversed_calls = [list(reversed(calls[0]))]
        assert verdict_of(task, reversed_calls).valid  # order-free
        missing = [calls[0][1:]]
        verdict = verdict_of(task, missing)
        assert not verdict.valid and verdict.error_type.endswith("wrong_count"), task.id
        assert failure_kind(verdict, missing, 0) == "wrong_count"


def test_irrelevance_passes_with_no_call_and_fails_with_one() -> None:
    for task in load_category("irrelevance", 20):
        assert verdict_of(task, [[]]).valid
        call = [[{"name": task.functions[0]["name"], "arguments": {}}]]
        verdict = verdict_of(task, call)
        assert not verdict.valid and failure_kind(verdict, call, 0) == "called_irrelevant"


def test_a_run_with_no_call_is_no_call_or_unreadable() -> None:
    task = load_category("simple_python", 1)[0]
    verdict = verdict_of(task, [[]])
    assert not verdict.valid
    assert failure_kind(verdict, [[]], 0) == "no_call"
    assert failure_kind(verdict, [[]], 2) == "unreadable"


def test_the_leaderboards_normalization() -> None:
    task = copy.deepcopy(load_category("simple_python", 1)[0])  # base 10, height 5
    assert task.answer[0]["calculate_triangle_area"]["base"] == [10]
    as_float = {"calculate_triangle_area": {"base": 10, "height": 5, "unit": "units"}}
    assert ast_check(task.category, task.functions, [as_float], task.answer).valid
    as_text = {"calculate_triangle_area": {"base": "10", "height": 5}}
    assert ast_check(task.category, task.functions, [as_text], task.answer).error_type == (
        "type_error:simple"
    )
    unknown = {"calculate_triangle_area": {"base": 10, "height": 5, "colour": "red"}}
    verdict = ast_check(task.category, task.functions, [unknown], task.answer)
    assert verdict.error_type == "simple_function_checker:unexpected_param"
    missing = {"calculate_triangle_area": {"base": 10}}
    verdict = ast_check(task.category, task.functions, [missing], task.answer)
    assert verdict.error_type == "simple_function_checker:missing_required"
    assert standardize("April 1, 2024") == standardize("april 1 2024") == "april12024"


@pytest.mark.parametrize("category", MULTI_TURN)
def test_multi_turn_wrong_arguments_or_a_turn_left_out_fail(category: str) -> None:
    for task in load_category(category, 15):
        calls = recorded(task)
        if any(call["arguments"] for turn in calls for call in turn):
            assert not verdict_of(task, recorded(task, bfcl_wrong_calls)).valid, task.id
        first = next(i for i, turn in enumerate(calls) if turn)
        left_out = [[] if i == first else turn for i, turn in enumerate(calls)]
        verdict = verdict_of(task, left_out)
        assert not verdict.valid and verdict.error_type == "multi_turn:empty_turn_model_response"
        assert failure_kind(verdict, left_out, 0) == "no_call"
        short = calls[:-1]
        assert verdict_of(task, short).error_type == "multi_turn:force_terminated"


def test_a_call_that_changes_the_state_fails_by_the_state() -> None:
    task = load_category("multi_turn_base", 1)[0]  # a file system: cd, mkdir, mv, ...
    calls = recorded(task)
    extra = [*calls[0], {"name": "mkdir", "arguments": {"dir_name": "zz9"}}]
    verdict = verdict_of(task, [extra, *calls[1:]])
    assert verdict.error_type == "multi_turn:instance_state_mismatch"
    assert failure_kind(verdict, [extra], 0) == "wrong_state"


def test_ground_truth_source_is_read_never_evaluated() -> None:
    assert parse_source_call("mv(source='a.txt', destination='b')") == (
        "mv",
        [],
        {"source": "a.txt", "destination": "b"},
    )
    assert parse_source_call("sort('f.pdf')") == ("sort", ["f.pdf"], {})
    for source in ("__import__('os').system('true')", "x.y(1)", "f(g())", "f(a=open('x'))"):
        with pytest.raises(ValueError):
            parse_source_call(source)


def test_wilson_interval() -> None:
    low, high = wilson(0, 25)
    assert low == 0.0 and 0.13 < high < 0.14
    low, high = wilson(25, 25)
    assert high == 1.0 and 0.86 < low < 0.87
    low, high = wilson(10, 20)
    assert 0.29 < low < 0.30 and 0.70 < high < 0.71
