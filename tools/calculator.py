"""Arithmetic without code execution: a whitelist evaluator over Python's expression syntax,
with every operation bounded so no input can hang or exhaust memory.

CPython holds the GIL through a single big-int operation, so a thread-based tool timeout cannot
interrupt one: each operation's cost must be bounded before it runs. Values are ints of at most
MAX_RESULT_BITS bits or finite floats. On such operands +, -, *, /, //, %, comparisons and the
math functions cost at most milliseconds (* checked before multiplying); what can blow up is
refused from the operands' sizes: **, round() with negative digits, factorial, str() of it."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, tool

Number = int | float

MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
MAX_RESULT_BITS = 20_000  # about 6,000 decimal digits
MAX_SHOWN_DIGITS = 4_000  # Python's str() of an int raises above 4,300 digits
MAX_FACTORIAL = 1_000
_LOG10_2 = math.log10(2)
_TOO_LARGE = "the result is too large"


class CalculatorError(ValueError):
    """An expression the calculator refuses; its message is meant for the model."""


def _digits_at_most(value: int) -> int:
    """Decimal digits of |value|, possibly one too many; costs nothing however big value is."""
    return int(value.bit_length() * _LOG10_2) + 1


def _checked(value: Any) -> Number:
    if isinstance(value, complex):
        raise CalculatorError("the result is not a real number")
    if isinstance(value, float) and math.isnan(value):
        raise CalculatorError("the result is not a number")
    if isinstance(value, float) and math.isinf(value):
        raise CalculatorError(_TOO_LARGE)
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise CalculatorError(_TOO_LARGE)
    return value


def _multiply(left: Number, right: Number) -> Number:
    # A product has at least bits(left) + bits(right) - 1 bits; refuse without allocating it.
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and left.bit_length() + right.bit_length() - 1 > MAX_RESULT_BITS
    ):
        raise CalculatorError(_TOO_LARGE)
    return left * right


def _power(base: Number, exponent: Number) -> Number:
    if base < 0 and isinstance(exponent, float) and not exponent.is_integer():
        # Python would answer with a complex number, e.g. (-8)**(1/3).
        raise CalculatorError("a negative number to a fractional power is not a real number")
    growing = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    # With |base| >= 2 the result has at least `exponent` bits: 9**9**9 is refused, not computed,
    # and the float product below cannot overflow.
    if (
        growing
        and abs(base) > 1
        and (exponent > MAX_RESULT_BITS or exponent * math.log2(abs(base)) > MAX_RESULT_BITS + 1)
    ):
        raise CalculatorError(_TOO_LARGE)
    return base**exponent


def _round(value: Number, digits: Number | None = None) -> Number:
    if digits is None:
        return round(value)
    if isinstance(digits, float):
        if not digits.is_integer():
            raise CalculatorError("round needs a whole number of digits")
        digits = int(digits)
    if isinstance(value, int) and digits < 0 and -digits > _digits_at_most(value):
        # Python would compute 10**-digits first (round(2, -10**9) holds the GIL for minutes);
        # rounding to more places than the number has digits always gives 0.
        return 0
    return round(value, digits)


def _factorial(n: Number) -> int:
    if (isinstance(n, float) and not n.is_integer()) or n < 0:
        raise CalculatorError("factorial needs a non-negative whole number")
    if n > MAX_FACTORIAL:
        raise CalculatorError(f"factorial is limited to n <= {MAX_FACTORIAL}")
    return math.factorial(int(n))


def _minimum(*values: Number) -> Number:
    return min(values)


def _maximum(*values: Number) -> Number:
    return max(values)


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _multiply,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
# name: (function, fewest arguments, most arguments); MAX_NODES caps min and max anyway.
_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (_minimum, 1, MAX_NODES),
    "max": (_maximum, 1, MAX_NODES),
    "sqrt": (math.sqrt, 1, 1),
    "exp": (math.exp, 1, 1),
    "log": (math.log, 1, 2),
    "log10": (math.log10, 1, 1),
    "log2": (math.log2, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "factorial": (_factorial, 1, 1),
}


def _call(node: ast.Call) -> Number:
    name = node.func.id if isinstance(node.func, ast.Name) else ""
    if name not in _FUNCTIONS or node.keywords:
        raise _unsupported(node)
    function, fewest, most = _FUNCTIONS[name]
    if not fewest <= len(node.args) <= most:
        wanted = f"{fewest}" if fewest == most else f"{fewest} to {most}"
        raise CalculatorError(f"{name} takes {wanted} argument(s), not {len(node.args)}")
    return function(*(_evaluate(argument) for argument in node.args))


def _unsupported(node: ast.AST) -> CalculatorError:
    return CalculatorError(f"unsupported expression element: {ast.unparse(node)[:40]!r}")


def _constant(node: ast.Constant) -> Number:
    if type(node.value) not in (int, float):
        raise _unsupported(node)
    return _checked(node.value)


def _binary(node: ast.BinOp) -> Number:
    if type(node.op) not in _BINARY:
        raise _unsupported(node)
    operation = _BINARY[type(node.op)]
    return _checked(operation(_evaluate(node.left), _evaluate(node.right)))


def _unary(node: ast.UnaryOp) -> Number:
    if type(node.op) not in _UNARY:
        raise _unsupported(node)
    return _checked(_UNARY[type(node.op)](_evaluate(node.operand)))


def _name(node: ast.Name) -> Number:
    if node.id not in _CONSTANTS:
        raise _unsupported(node)
    return _CONSTANTS[node.id]


# How each kind of syntax node the calculator takes is evaluated; any other is refused.
_EVALUATORS: dict[type[ast.AST], Callable[[Any], Number]] = {
    ast.Expression: lambda node: _evaluate(node.body),
    ast.Constant: _constant,
    ast.BinOp: _binary,
    ast.UnaryOp: _unary,
    ast.Name: _name,
    ast.Call: lambda node: _checked(_call(node)),
}


def _evaluate(node: ast.AST) -> Number:
    evaluator = _EVALUATORS.get(type(node))
    if evaluator is None:
        raise _unsupported(node)
    return evaluator(node)


def _normalise(expression: str) -> str:
    text = expression.strip().rstrip("=").strip()
    # Models write the typographic signs, and ^ for a power.
    for symbol, replacement in (("\u00d7", "*"), ("\u00f7", "/"), ("\u2212", "-"), ("^", "**")):
        text = text.replace(symbol, replacement)
    return text


def _parsed(expression: str) -> ast.Expression:
    """The syntax tree of an expression, refused when too long, empty, not Python syntax, or
    too deep or too big to evaluate within bounds."""
    too_long = CalculatorError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    if len(expression) > 4 * MAX_EXPRESSION_CHARS:  # refuse a huge input before copying it
        raise too_long
    text = _normalise(expression)
    if not text:
        raise CalculatorError("empty expression")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise too_long
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        shown = expression.strip()[:60]
        raise CalculatorError(f"not an arithmetic expression ({reason}): {shown!r}") from None
    except (RecursionError, MemoryError):
        # Python's parser reports some too-deep nesting this way rather than by SyntaxError.
        raise CalculatorError("expression nested too deeply") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculatorError("expression too complex")
    return tree


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; CalculatorError says why one is refused."""
    tree = _parsed(expression)
    try:
        return _evaluate(tree)
    except CalculatorError:
        raise
    except ZeroDivisionError:
        raise CalculatorError("division by zero") from None
    except OverflowError:
        # Also raised when an operand cannot become a float, as in sin(2**19999).
        raise CalculatorError("a number is too large for floating point (over 1.8e308)") from None
    except RecursionError:
        raise CalculatorError("expression nested too deeply") from None
    except (TypeError, ValueError) as exc:
        raise CalculatorError(f"math error: {exc}") from None


def format_number(value: Number) -> str:
    """Whole numbers without a decimal point; others to 12 significant digits. An int too long
    to show raises CalculatorError with its size and leading digits instead."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    if isinstance(value, float):
        return format(value, ".12g")
    digits = _digits_at_most(value)
    if abs(value) < 10 ** (digits - 1):  # the estimate was one too many
        digits -= 1
    if digits <= MAX_SHOWN_DIGITS:
        try:
            return str(value)
        except ValueError:  # the host lowered sys.set_int_max_str_digits(); fall through
            pass
    leading = str(abs(value) // 10 ** (digits - 8))
    sign = "-" if value < 0 else ""
    shown = f"about {sign}{leading[0]}.{leading[1:]}e+{digits - 1}"
    raise CalculatorError(f"the result has {digits} digits, too many to show ({shown})")


def _calculator(expression: str) -> str:
    """Evaluate an arithmetic expression, e.g. 1937-1889 or sqrt(2)*3^2. Supports + - * / // %
    ** (or ^), parentheses, pi, e and abs round min max sqrt exp log log10 log2 sin cos tan floor
    ceil factorial."""
    try:
        return format_number(evaluate(expression))
    except CalculatorError as exc:
        return f"Error: {exc}"
    except Exception as exc:
        # The tool's answer is the model's next observation: an unforeseen failure must still
        # read as one, not end the agent's run.
        return f"Error: the calculator failed ({type(exc).__name__}: {str(exc)[:80]})"


calculator: BaseTool = tool("calculator", parse_docstring=False)(_calculator)
