"""The leaderboard's multi-turn rules (BFCL's ``multi_turn_checker``), reproduced, and the
package's stateful API classes that multi-turn tasks run against.

A task's calls are executed turn by turn on fresh instances of its API classes (loaded from its
initial configuration), beside the ground truth's calls on instances of their own, as the
checker does. After each turn whose ground truth has calls:

- the run must have made a call in that turn (``multi_turn:empty_turn_model_response``);
- every public attribute of every instance must equal the ground truth's
  (``multi_turn:instance_state_mismatch``);
- every result of the ground truth's calls of that turn must be among the results of the run's
  calls so far, each used once, in any order (``multi_turn:execution_response_mismatch``).

A turn whose ground truth has no call (``miss_func``'s held-out turn) is not checked, but its
calls run, so the next turn's state counts them. A run with fewer turns than the task fails
(``multi_turn:force_terminated``).

The ground truth's calls are Python source (``mv(source='a', destination='b')``): they are read
with ``ast`` (literal arguments only), never evaluated, and the run's calls are made by name on
the instance's public methods, so no call reaches ``eval``. Like the leaderboard, a call named
``kill``, ``exit``, ``quit``, ``remove``, ``unlink``, ``popen``, ``Popen`` or ``run`` is refused.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from reactgraph.app.eval.bfcl_ast import PASS, Verdict
from reactgraph.app.eval.bfcl_data import API_CLASSES, SOURCE_MODULE, STATELESS, Task

REFUSED = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})
RecordedCall = Mapping[str, Any]
"""A call as a run records it: ``{"name": ..., "arguments": {...}}``."""


def api_instances(task: Task) -> dict[str, Any]:
    """Fresh instances of the task's API classes, each loaded from its initial configuration."""
    long_context = "long_context" in task.category
    found: dict[str, Any] = {}
    for name in task.involved_classes:
        module = importlib.import_module(f"{SOURCE_MODULE}.{API_CLASSES[name][0]}")
        instance = getattr(module, name)()
        if name not in STATELESS:
            config = copy.deepcopy(task.initial_config.get(name, {}))
            instance._load_scenario(config, long_context=long_context)
        found[name] = instance
    return found


def methods_of(instances: Mapping[str, Any]) -> dict[str, Any]:
    """Each public method by name (a later class's wins a shared name, as in the checker)."""
    methods: dict[str, Any] = {}
    for instance in instances.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                methods[name] = method
    return methods


def result_text(result: Any) -> str:
    """A call's result as the checker keeps it: a string as is, a dict as JSON, else ``str``."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


def execute(
    methods: Mapping[str, Any], name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> str:
    """One call on the instances' methods, its result as text; an error as the checker words it."""
    try:
        if name in REFUSED:
            raise PermissionError(f"Function call {name} is not allowed.")
        if name not in methods:
            raise NameError(f"name '{name}' is not defined")
        return result_text(methods[name](*args, **dict(kwargs)))
    except Exception as error:  # the checker's words for any failure of the call
        return f"Error during execution: {error}"


def parse_source_call(source: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A ground-truth call's name and literal arguments (``name(a, k=v)``); ValueError else."""
    tree = ast.parse(source.strip(), mode="eval").body
    if not isinstance(tree, ast.Call) or not isinstance(tree.func, ast.Name):
        raise ValueError(f"not a call by name: {source!r}")
    args = [ast.literal_eval(a) for a in tree.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in tree.keywords if k.arg is not None}
    return tree.func.id, args, kwargs


def _differences(model: Any, truth: Any) -> list[str]:
    return [
        name
        for name in vars(truth)
        if not name.startswith("_") and getattr(model, name, None) != getattr(truth, name)
    ]


def multi_turn_check(task: Task, turns: Sequence[Sequence[RecordedCall]]) -> Verdict:
    """The leaderboard's verdict on a multi-turn task's calls, turn by turn."""
    answer: list[list[str]] = task.answer
    if len(turns) != len(answer):
        message = f"The run has {len(turns)} turn(s) of the task's {len(answer)}."
        return Verdict(False, "multi_turn:force_terminated", message)
    model, truth = api_instances(task), api_instances(task)
    model_methods, truth_methods = methods_of(model), methods_of(truth)
    so_far: list[str] = []
    for index, (calls, expected) in enumerate(zip(turns, answer, strict=True)):
        for call in calls:
            so_far.append(execute(model_methods, call["name"], (), call.get("arguments") or {}))
        expected_results = [
            execute(truth_methods, *parse_source_call(source)) for source in expected
        ]
        if not expected:
            continue
        if not calls:
            message = f"Model response list is empty for turn {index}"
            return Verdict(False, "multi_turn:empty_turn_model_response", message)
        for name, instance in truth.items():
            changed = _differences(model[name], instance)
            if changed:
                message = f"{name}'s state differs from the ground truth's after turn {index}: "
                return Verdict(False, "multi_turn:instance_state_mismatch", message + str(changed))
        remaining = list(so_far)
        missing = []
        for result in expected_results:
            try:
                remaining.remove(result)
            except ValueError:
                missing.append(result)
        if missing:
            message = f"Results of turn {index} missing from the run's: {missing[:3]}"
            return Verdict(False, "multi_turn:execution_response_mismatch", message)
    return PASS
