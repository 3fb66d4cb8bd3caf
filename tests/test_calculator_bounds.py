"""The calculator's cost is bounded for every input. Each attack runs in a child process with a
hard timeout: an unbounded big-int operation holds the GIL, so in-process it would freeze pytest
itself rather than fail one test."""

from __future__ import annotations

import importlib
import json
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import IO, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

STARTUP_SECONDS = 120  # importing langchain-core on a cold disk takes several seconds
CALL_SECONDS = 20  # the hard stop; each call really takes milliseconds
FAST_SECONDS = 2.0  # the bound asserted on each call's time, measured in the child

_CHILD = r"""
import json, sys, time
from reactgraph.tools import calculator
from reactgraph.tools.calculator import evaluate

print("ready", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    started = time.perf_counter()
    reply = {}
    try:
        if request["call"] == "tool":
            out = calculator.invoke(request["expression"])
        else:
            out = evaluate(request["expression"])
        reply.update(type=type(out).__name__, out=out if isinstance(out, str) else repr(out))
    except BaseException as exc:
        reply["raised"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    reply["seconds"] = time.perf_counter() - started
    print(json.dumps(reply), flush=True)
"""


class CalculatorProcess:
    """The calculator in a child process; a call that overruns kills it and fails its test."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    def _start(self) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self._lines = queue.Queue()
        # A reader thread turns a blocking readline into one that can time out.
        threading.Thread(target=_pump, args=(process.stdout, self._lines), daemon=True).start()
        self._process = process
        assert self._next("startup", STARTUP_SECONDS) == "ready"
        return process

    def _next(self, what: str, seconds: float) -> str:
        try:
            line = self._lines.get(timeout=seconds)
        except queue.Empty:
            self.close()
            pytest.fail(f"{what} did not finish within {seconds} s")
        if line is None:
            self.close()
            pytest.fail(f"the calculator process died during {what}")
        return line.strip()

    def ask(self, expression: str, call: str = "tool") -> dict[str, Any]:
        process = self._process or self._start()
        assert process.stdin is not None
        process.stdin.write(json.dumps({"call": call, "expression": expression}) + "\n")
        process.stdin.flush()
        return json.loads(self._next(f"{call}({expression[:60]!r})", CALL_SECONDS))

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


@pytest.fixture(scope="module")
def child() -> Iterator[CalculatorProcess]:
    process = CalculatorProcess()
    yield process
    process.close()


def answer(child: CalculatorProcess, expression: str) -> str:
    """The tool's output; it must be a str, and computed quickly."""
    reply = child.ask(expression)
    assert "raised" not in reply, f"the tool raised {reply['raised']}"
    assert reply["type"] == "str"
    assert reply["seconds"] < FAST_SECONDS, f"took {reply['seconds']:.2f} s"
    return reply["out"]


# Attacks that have an answer, which comes cheaply rather than being refused; before the bounds
# several of these hung the process or raised out of the tool.
ANSWERED = [
    ("round(2, -10**9)", "0"),  # Python builds 10**(10**9) first: minutes with the GIL held
    ("round(2, -2**19999)", "0"),
    ("round(2**1000, -300) // 10**299", "110"),  # rounding a big int really is done
    ("round(1.5, 10**9)", "1.5"),
    ("round(2, 2**19999)", "2"),
    ("log(10**5000)", "11512.925465"),
    ("log(2**19999, 2)", "19999"),
    ("2**19999 % 3", "2"),
    ("(2**19999 // 3) % 10", str((2**19999 // 3) % 10)),
    ("1**(2**19999)", "1"),
    ("(-1)**(2**19999 + 1)", "-1"),
    ("factorial(1000) // factorial(998)", "999000"),
    ("(2**9999 * 3**6000) % 1000", str(2**9999 * 3**6000 % 1000)),  # big products are fine
    ("max(3, 1e308, 2**1200) // 2**1199", "2"),
    ("ceil(1e308) % 1000", str(int(1e308) % 1000)),
    ("(-8)**2.0", "64"),
    ("1e308", "1e+308"),
    ("-1e308", "-1e+308"),
    ("1e-320", "9.99988867183e-321"),
    ("10**4000 - 1", "9" * 4000),  # the longest number shown
]

# Attacks refused with a reason the model can read, and the fragment that reason contains.
REFUSED = [
    ("10**5000", "5001 digits, too many to show (about 1.0000000e+5000)"),
    ("-2**19999", "6021 digits, too many to show (about -1.9901384e+6020)"),
    ("10**4300", "4301 digits"),  # str() of it raises ValueError in Python
    ("factorial(1000)**2", "5136 digits"),
    ("abs(-2**19999)", "too many to show"),
    ("floor(2**19999)", "too many to show"),
    ("ceil(2**19999)", "too many to show"),
    ("round(2**19000, -100)", "too many to show"),
    ("2**19999 // 3", "too many to show"),
    ("factorial(1000) * factorial(1000) * factorial(1000)", "the result is too large"),
    ("2**19999 * 2**19999", "the result is too large"),
    ("2**2**2**2**2", "the result is too large"),
    ("9**9**9", "the result is too large"),
    ("99999**99999", "the result is too large"),
    ("2**(2**19999)", "the result is too large"),
    ("(2**19999)**2", "the result is too large"),
    ("1e308 * 10", "the result is too large"),
    ("1e308 // 1e-308", "the result is too large"),
    ("1e999", "the result is too large"),
    ("exp(1000)", "too large for floating point"),
    ("exp(10**400)", "too large for floating point"),
    ("sqrt(2**19999)", "too large for floating point"),
    ("sin(2**19999)", "too large for floating point"),
    ("2**19999 / 3", "too large for floating point"),
    ("2**19999 % 0.5", "too large for floating point"),
    ("2.0**10000", "too large for floating point"),
    ("(-8)**(1/3)", "not a real number"),
    ("(-8.0)**0.5", "not a real number"),
    ("1 << 10**9", "unsupported"),
    ("1 >> 10**9", "unsupported"),
    ("min(" + "1," * 3000 + "1)", "longer than 500 characters"),
    ("max(" + "1," * 3000 + "1)", "longer than 500 characters"),
    ("x" * 1_000_000, "longer than 500 characters"),
    ("(" * 201 + "1" + ")" * 201, "nest"),  # the parser's own limit, not a crash
    ("(" * 250 + "1" + ")" * 250, "longer than 500 characters"),
    ("-" * 300 + "1", "too complex"),
    ("abs(" * 80 + "1" + ")" * 80, "too complex"),
    ("factorial(10**400)", "limited to n <= 1000"),
    ("round(2.5, 1.5)", "whole number of digits"),
    ("round(1, 2, 3)", "round takes 1 to 2 argument(s), not 3"),
]


@pytest.mark.parametrize(("expression", "expected"), ANSWERED, ids=lambda v: str(v)[:40])
def test_attacks_with_an_answer_get_it_quickly(
    child: CalculatorProcess, expression: str, expected: str
) -> None:
    out = answer(child, expression)
    assert out == expected


@pytest.mark.parametrize(("expression", "fragment"), REFUSED, ids=lambda v: str(v)[:40])
def test_attacks_are_refused_quickly_with_a_reason(
    child: CalculatorProcess, expression: str, fragment: str
) -> None:
    out = answer(child, expression)
    assert out.startswith("Error: ") and fragment in out, out


@pytest.mark.parametrize(
    "expression", ["9**9**9", "2**2**2**2**2", "factorial(factorial(10))", "99999**99999"]
)
def test_evaluate_refuses_with_a_calculator_error(
    child: CalculatorProcess, expression: str
) -> None:
    reply = child.ask(expression, call="evaluate")
    assert reply.get("raised", "").startswith("CalculatorError: "), reply
    assert reply["seconds"] < FAST_SECONDS


_NUMBER = re.compile(r"-?\d+(\.\d+)?(e[+-]\d+)?")
# The whitelist itself, so new functions are fuzzed too; min and max get up to three arguments.
_WHITELIST = importlib.import_module("reactgraph.tools.calculator")._FUNCTIONS
_FUNCTIONS = {name: min(most, 3) for name, (_, _, most) in _WHITELIST.items()}
_HUGE = ["2**19999", "10**4000", "factorial(1000)", "-10**9", "1e308", "9**9**9", "(2**19999-1)"]
_LEAVES = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.integers(0, 10**80).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["pi", "e", "tau", *_HUGE]),
)
_BINARY = ["+", "-", "*", "/", "//", "%", "**", "^", "<<", ">>"]


def _grow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.tuples(children, st.sampled_from(_BINARY), children).map(
        lambda parts: f"({parts[0]} {parts[1]} {parts[2]})"
    )
    unary = st.tuples(st.sampled_from("-+"), children).map("".join)
    call = st.sampled_from(sorted(_FUNCTIONS)).flatmap(
        lambda name: st.lists(children, min_size=1, max_size=_FUNCTIONS[name]).map(
            lambda args: f"{name}({', '.join(args)})"
        )
    )
    return st.one_of(binary, unary, call)


# The child times each call itself; Hypothesis' deadline would count the round trip too.
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=st.recursive(_LEAVES, _grow, max_leaves=12))
def test_any_expression_gives_a_string_quickly(child: CalculatorProcess, expression: str) -> None:
    out = answer(child, expression)
    assert out.startswith("Error: ") or _NUMBER.fullmatch(out), out
