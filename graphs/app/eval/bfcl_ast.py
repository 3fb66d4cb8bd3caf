"""The leaderboard's single-turn rules (BFCL's ``ast_checker``, Python), reproduced: the calls a
run made against the possible answers, each a verdict with the leaderboard's error type.

- ``simple_python``, ``live_simple``: exactly one call; ``multiple``: exactly as many calls as
  answers (one), checked against the answer's function; ``parallel*``: as many calls as answers,
  matched in any order (each answer takes the first unmatched call that passes).
- A call passes when its name is the answer's, every required parameter is given, every given
  parameter is known and takes one of the possible values, and every parameter not given may be
  left out (``""`` among its values).
- Values as the leaderboard normalizes them: an int for a float parameter is a float; a string
  (and each string of a list or dict) is compared without spaces, ``,./-_*^`` and case, with
  ``'`` as ``"``; lists compare as wholes; dicts key by key; lists of dicts in order; a value of
  the answer's type rather than the parameter's is a variable's name (compared as is).
- ``irrelevance``: a run that calls no function is correct.

Function names are compared as the task writes them (the tools' names with ``.`` made ``_`` for
the OpenAI format are mapped back when a call is recorded), as the leaderboard's
``underscore_to_dot`` models are scored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
NESTED = ("array", "tuple")
_STRIPPED = re.compile(r"[ \,\.\/\-\_\*\^]")

Call = Mapping[str, Mapping[str, Any]]
"""One call as the checker reads it: ``{name: {argument: value}}``."""


class Verdict(NamedTuple):
    """Whether an answer passes, and if not the leaderboard's error type and its message."""

    valid: bool
    error_type: str = ""
    error: str = ""


PASS = Verdict(True)


def standardize(text: str) -> str:
    """The leaderboard's ``standardize_string``."""
    return _STRIPPED.sub("", text).lower().replace("'", '"')


def _answer_type(possible: Sequence[Any]) -> type | None:
    return next((type(a) for a in possible if a != ""), None)


def _types(
    param: str, value: Any, possible: Sequence[Any], expected: type, nested: type | None
) -> tuple[Verdict, bool]:
    """BFCL's ``type_checker``: (verdict, whether the value is a variable's name)."""
    answer_type = _answer_type(possible)
    variable = answer_type is not None and answer_type is not expected
    elements: Any = value  # a list when the type is checked (mypy narrows value to object)
    if type(value) is expected:
        if nested is None:
            return PASS, variable
        for item in possible:
            if type(item) is list and not all(
                _types(param, element, item, nested, None)[0].valid for element in elements
            ):
                continue
            return PASS, variable
    # Not the parameter's type (or its items are not): the answer's type is a variable's name.
    if answer_type is not None and type(value) is answer_type:
        return PASS, True
    message = f"Incorrect type for parameter {param!r}: got {type(value).__name__}."
    return Verdict(False, "type_error:simple", message), variable


def _string(param: str, value: str, possible: Sequence[Any]) -> Verdict:
    if standardize(value) in [standardize(p) for p in possible if type(p) is str]:
        return PASS
    return Verdict(False, "value_error:string", f"Invalid value for {param!r}: {value!r}.")


def _list(param: str, value: list[Any], possible: Sequence[Any]) -> Verdict:
    given = [standardize(v) if type(v) is str else v for v in value]
    answers = [[standardize(v) if type(v) is str else v for v in p] for p in possible]
    if given in answers:
        return PASS
    return Verdict(False, "value_error:list/tuple", f"Invalid value for {param!r}: {value!r}.")


def _dict(param: str, value: Mapping[str, Any], possible: Sequence[Any]) -> Verdict:
    verdict = Verdict(False, "dict_checker:unclear", f"Invalid value for {param!r}.")
    for answer in possible:
        if answer == "":
            continue
        verdict = PASS
        for key, given in value.items():
            if key not in answer:
                verdict = Verdict(False, "value_error:dict_key", f"Unexpected dict key {key!r}.")
                break
            values = [standardize(v) if type(v) is str else v for v in answer[key]]
            if (standardize(given) if type(given) is str else given) not in values:
                message = f"Invalid value for dict key {key!r}: {given!r}."
                verdict = Verdict(False, "value_error:dict_value", message)
                break
        if verdict.valid:
            for key, values in answer.items():
                if key not in value and "" not in values:
                    verdict = Verdict(False, "value_error:dict_key", f"Missing dict key {key!r}.")
                    break
        if verdict.valid:
            return PASS
    return verdict


def _list_of_dicts(param: str, value: list[Any], possible: Sequence[Any]) -> Verdict:
    verdict = Verdict(False, "list_dict_checker:unclear", f"Invalid value for {param!r}.")
    for answer in possible:
        if len(value) != len(answer):
            message = "Wrong number of dictionaries in the list."
            verdict = Verdict(False, "value_error:list_dict_count", message)
            continue
        ok = True
        for given, expected in zip(value, answer, strict=True):
            verdict = _dict(param, given, [expected])
            if not verdict.valid:
                ok = False
                break
        if ok:
            return PASS
    return verdict


def _value(param: str, value: Any, spec: Mapping[str, Any], possible: Sequence[Any]) -> Verdict:
    """One parameter's value against its possible values (``simple_function_checker``'s body)."""
    described = spec.get("type", "string")
    expected = TYPES.get(described, str)
    nested = (
        TYPES.get((spec.get("items") or {}).get("type", ""), str) if described in NESTED else None
    )
    if described == "float" and type(value) is int:
        value = float(value)  # an int for a float parameter is that float
    verdict, variable = _types(param, value, possible, expected, nested)
    if not verdict.valid:
        return verdict
    if not variable:
        if expected is dict:
            return _dict(param, value, possible)
        if expected is list and nested is dict:
            return _list_of_dicts(param, value, possible)
        if expected is str:
            return _string(param, value, possible)
        if expected is list:
            return _list(param, value, possible)
    if value not in possible:
        return Verdict(False, "value_error:others", f"Invalid value for {param!r}: {value!r}.")
    return PASS


def check_call(doc: Mapping[str, Any], call: Call, answer: Call) -> Verdict:
    """One call against one answer (``simple_function_checker``)."""
    name = doc["name"]
    possible = next(iter(answer.values()))
    if name not in call:
        message = f"Function name {name!r} not found in model output."
        return Verdict(False, "simple_function_checker:wrong_func_name", message)
    arguments = call[name]
    properties = doc["parameters"].get("properties") or {}
    for param in doc["parameters"].get("required") or []:
        if param not in arguments:
            message = f"Missing required parameter: {param!r}."
            return Verdict(False, "simple_function_checker:missing_required", message)
    for param, value in arguments.items():
        if param not in properties or param not in possible:
            message = f"Unexpected parameter: {param!r}."
            return Verdict(False, "simple_function_checker:unexpected_param", message)
        verdict = _value(param, value, properties[param], possible[param])
        if not verdict.valid:
            return verdict
    for param, values in possible.items():
        if param not in arguments and "" not in values:
            message = f"Optional parameter {param!r} not provided and not marked as optional."
            return Verdict(False, "simple_function_checker:missing_optional", message)
    return PASS


def _doc(docs: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((d for d in docs if d["name"] == name), None)


def _unordered(
    docs: Sequence[Mapping[str, Any]], calls: Sequence[Call], answers: Sequence[Call]
) -> Verdict:
    matched: list[int] = []
    for index, answer in enumerate(answers):
        doc = _doc(docs, next(iter(answer)))
        verdict = Verdict(False, "parallel_function_checker_no_order:cannot_find_match")
        for position, call in enumerate(calls):
            if position in matched or doc is None:
                continue
            verdict = check_call(doc, call, answer)
            if verdict.valid:
                matched.append(position)
                break
        if not verdict.valid:
            message = f"Could not find a matching function for index {index} of possible answers."
            return Verdict(False, "parallel_function_checker_no_order:cannot_find_match", message)
    return PASS


def ast_check(
    category: str, docs: Sequence[Mapping[str, Any]], calls: Sequence[Call], answers: Any
) -> Verdict:
    """The leaderboard's verdict on a single-turn task's calls (``ast_checker``, and the
    relevance rule for ``irrelevance``)."""
    if category == "irrelevance":
        if calls:
            message = "Valid syntax. Successfully decode AST when it should not."
            return Verdict(False, "irrelevance_error:decoder_success", message)
        return PASS
    if "parallel" in category:
        if len(calls) != len(answers):
            message = "Wrong number of functions."
            return Verdict(False, "parallel_function_checker_no_order:wrong_count", message)
        return _unordered(docs, calls, answers)
    if "multiple" in category:
        if len(calls) != len(answers):
            return Verdict(
                False, "multiple_function_checker:wrong_count", "Wrong number of functions."
            )
        doc = _doc(docs, next(iter(answers[0])))
        return check_call(doc or docs[0], calls[0], answers[0])
    if len(calls) != 1:
        return Verdict(False, "simple_function_checker:wrong_count", "Wrong number of functions.")
    return check_call(docs[0], calls[0], answers[0])
