"""Arithmetic without code execution: a whitelist evaluator over Python's expression syntax,
with every operation bounded so no input can hang or exhaust memory."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, tool

MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
MAX_RESULT_BITS = 20_000  # about 6,000 decimal digits
MAX_FACTORIAL = 1_000


class CalculatorError(ValueError):
    """An expression the calculator refuses; its message is meant for the model."""


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _factorial(n: Any) -> int:
    if not float(n).is_integer() or n < 0:
        raise CalculatorError("factorial needs a non-negative whole number")
    if n > MAX_FACTORIAL:
        raise CalculatorError(f"factorial is limited to n <= {MAX_FACTORIAL}")
    return math.factorial(int(n))


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
    "factorial": _factorial,
}


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise CalculatorError("the result is too large")
    if isinstance(value, complex):
        raise CalculatorError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError(
            "the result is too large" if not math.isnan(value) else "not a number"
        )
    return value


def _power(base: Any, exponent: Any) -> Any:
    # Bound the work before doing it: 9**9**9 is refused, not computed.
    whole = isinstance(base, int) and isinstance(exponent, int)
    if (
        whole
        and exponent > 0
        and abs(base) > 1
        and exponent * math.log2(abs(base)) > MAX_RESULT_BITS
    ):
        raise CalculatorError("the result is too large")
    return operator.pow(base, exponent)


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check_size(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _check_size(_power(_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _check_size(_BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check_size(_UNARY[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _check_size(_FUNCTIONS[node.func.id](*(_evaluate(a) for a in node.args)))
    raise CalculatorError(f"unsupported expression element: {ast.unparse(node)[:40]!r}")


def _normalise(expression: str) -> str:
    text = expression.strip().rstrip("=").strip()
    # Models write the typographic signs, and ^ for a power.
    for symbol, replacement in (("\u00d7", "*"), ("\u00f7", "/"), ("\u2212", "-"), ("^", "**")):
        text = text.replace(symbol, replacement)
    return text


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression; CalculatorError says why one is refused."""
    text = _normalise(expression)
    if not text:
        raise CalculatorError("empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise CalculatorError(
            f"not an arithmetic expression: {expression.strip()[:60]!r}"
        ) from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculatorError("expression too complex")
    try:
        value = _evaluate(tree)
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        raise CalculatorError("the result is too large") from None
    except (TypeError, ValueError) as exc:
        if isinstance(exc, CalculatorError):
            raise
        raise CalculatorError(f"math error: {exc}") from None
    return value


def format_number(value: int | float) -> str:
    """Whole numbers without a decimal point; others to 12 significant digits."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    if isinstance(value, float):
        return format(value, ".12g")
    return str(value)


def _calculator(expression: str) -> str:
    """Evaluate an arithmetic expression, e.g. 1937-1889 or sqrt(2)*3^2. Supports + - * / // %
    ** (or ^), parentheses, pi, e and abs round min max sqrt exp log log10 log2 sin cos tan floor
    ceil factorial."""
    try:
        return format_number(evaluate(expression))
    except CalculatorError as exc:
        return f"Error: {exc}"


calculator: BaseTool = tool("calculator", parse_docstring=False)(_calculator)
