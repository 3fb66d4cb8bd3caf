"""Every test is in exactly one of the make targets' runs that CI calls: the ``-m`` expressions
of the Makefile's test targets split the suite, none drops a test and none runs one twice."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests import collected
from tests.conftest import ROOT

# The targets `.ci/run` calls that select tests by marker (test-real-model runs two files with
# the llama.cpp server, which `make test` runs too: they skip there without it).
TARGETS = ("test", "test-kills", "test-servers", "test-cluster", "test-browser", "test-traces")
_TOKEN = re.compile(r"[()]|[A-Za-z_][A-Za-z_0-9-]*")


def selections(makefile: str) -> dict[str, str]:
    """Each target's ``-m`` expression, ``$(TEST_MARKERS)`` expanded."""
    variables = dict(re.findall(r"^([A-Z_]+) :?= (.*)$", makefile, re.MULTILINE))
    found: dict[str, str] = {}
    for target in TARGETS:
        body = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
        assert body is not None, f"no target {target}"
        expression = re.search(r'pytest .*?-m (?:"([^"]+)"|(\w+))', body.group(1))
        assert expression is not None, f"{target} selects no marker"
        written = expression[1] or expression[2]
        found[target] = re.sub(r"\$\((\w+)\)", lambda m: variables[m.group(1)], written)
    return found


def selects(expression: str, markers: frozenset[str]) -> bool:
    """Whether ``pytest -m expression`` runs a test with these markers: names, ``not``,
    ``and``, ``or`` and parentheses, with pytest's precedence."""
    tokens = _TOKEN.findall(expression)
    at = 0

    def take() -> str:
        nonlocal at
        at += 1
        return tokens[at - 1]

    def joined(word: str, operand: Callable[[], bool]) -> bool:
        """Operands joined by ``word`` (or, and), each read even where the value is known."""
        value = operand()
        while at < len(tokens) and tokens[at] == word:
            take()
            right = operand()
            value = (value or right) if word == "or" else (value and right)
        return value

    def either() -> bool:
        return joined("or", both)

    def both() -> bool:
        return joined("and", negated)

    def negated() -> bool:
        token = take()
        if token == "not":
            return not negated()
        if token == "(":
            value = either()
            assert take() == ")", expression
            return value
        return token in markers

    value = either()
    assert at == len(tokens), expression
    return value


def test_every_test_is_in_exactly_one_target(request: pytest.FixtureRequest) -> None:
    chosen = selections((ROOT / "Makefile").read_text())
    found = request.config.stash[collected.MARKERS]
    # Only what this session collected: run alone (`pytest tests/test_targets.py`), that is this
    # file; in the suite, every test.
    assert found
    for nodeid, markers in found.items():
        runs = [target for target, expression in chosen.items() if selects(expression, markers)]
        assert len(runs) == 1, f"{nodeid} ({', '.join(sorted(markers))}) runs in {runs}"


def test_ci_calls_every_target() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    for target in (*TARGETS, "test-real-model", "docs"):
        # `make test` runs in a fresh clone: `(cd "$fresh/reactgraph" && make test)`.
        assert re.search(rf"make {re.escape(target)}\)?$", ci, re.MULTILINE), target


def test_the_selection_reads_the_makefile() -> None:
    chosen = selections((ROOT / "Makefile").read_text())
    assert "not servers" in chosen["test"]
    assert selects(chosen["test-servers"], frozenset({"slow", "servers"}))
    assert not selects(chosen["test"], frozenset({"slow", "servers"}))
    assert selects(chosen["test"], frozenset())
    assert selects("(ray or cluster) and not browser", frozenset({"cluster"}))
    assert not selects("(ray or cluster) and not browser", frozenset({"ray", "browser"}))
