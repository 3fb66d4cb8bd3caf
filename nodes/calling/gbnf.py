"""Writing GBNF, the grammar language llama.cpp's server reads (and vLLM's xgrammar backend):
escaped literals, bounded text, and a JSON schema as a grammar for a JSON value.

Pure, and bounded: a grammar's size is linear in what it is built from (names, properties, enum
values), every repetition has an upper bound (so a model under it always finishes within a
known length), and a schema's nesting is read to a fixed depth only. Whatever the model is
allowed to write can be read by this loop's parser: no text holds ``n:`` or ``N:`` (so never
``Observation:``, the stop sequence, which would cut a reply mid-way, nor the parser's
``observation:`` in any case), a JSON string never holds a raw line break. A JSON value written
as a literal (a ``const``, an ``enum`` value, a property's name) keeps that promise too: an
``n`` before a colon in it is written as its escape ``\\u006e``, the same JSON value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

MAX_DEPTH = 4
"""How deep a JSON schema is followed; deeper values are any JSON value of bounded size."""
MAX_ENUM = 64
"""Enum values beyond this many make the value any JSON of its type (a grammar stays small)."""
MAX_PROPERTIES = 64
"""Properties of one object beyond this many are left out of the grammar (and of the value)."""
MAX_ITEMS = 16
"""Items of an array the grammar allows at most (fewer when the schema says ``maxItems``)."""
MAX_DIGITS = 15
"""Digits of an integer or of a number's integer part."""

_RULE_NAME = re.compile(r"[^a-z0-9-]+")


# The characters a literal writes as GBNF's own escapes.
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _literal_char(char: str) -> str:
    """One character as a GBNF literal holds it: a quote, a backslash, a line break or a tab
    as its escape, a control or invisible character (a lone surrogate too) as its code."""
    escape = _ESCAPES.get(char)
    if escape is not None:
        return escape
    code = ord(char)
    if code < 0x20 or 0x7F <= code < 0xA0:
        return f"\\x{code:02X}"
    if not char.isprintable() or 0xD800 <= code <= 0xDFFF:
        return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"
    return char


def literal(text: str) -> str:
    """``text`` as a GBNF string literal: quotes, backslashes and every control or invisible
    character escaped, so no name can end the literal or the rule."""
    return '"' + "".join(map(_literal_char, text)) + '"'


def repeat(item: str, most: int, least: int = 0) -> str:
    """``item`` repeated ``least`` to ``most`` times (GBNF's bounded repetition)."""
    return f"({item}){{{least},{most}}}"


class Grammar:
    """Named rules, written once each: a rule with the same body as an earlier one is that
    rule (a hundred tools taking one string share one input rule)."""

    def __init__(self) -> None:
        self._rules: dict[str, str] = {}
        self._bodies: dict[str, str] = {}

    def rule(self, hint: str, body: str) -> str:
        """A rule for ``body``: its name (a fresh one from ``hint``, or the earlier rule's)."""
        found = self._bodies.get(body)
        if found is not None:
            return found
        base = _RULE_NAME.sub("-", hint.lower()).strip("-")[:24] or "r"
        name, n = base, 1
        while name in self._rules or name == "root":
            n += 1
            name = f"{base}-{n}"
        self._rules[name] = body
        self._bodies[body] = name
        return name

    def text(self, root: str) -> str:
        """The grammar: ``root ::= ...`` first, then every rule."""
        lines = [f"root ::= {root}"]
        lines.extend(f"{name} ::= {body}" for name, body in self._rules.items())
        return "\n".join(lines) + "\n"


# A line's characters: never "n:" (so never "Observation:", in any case): an n (or N), or a
# run of up to three, is followed by a character that is neither n nor a colon, or ends it.
_CONTROL = r"\n\r\x00-\x08\x0B\x0C\x0E-\x1F"
_N = "[nN]"


def _class(banned: str) -> str:
    """A negated character class: no line break or control character, nor ``banned``."""
    escaped = "".join("\\" + c if c in "[]\\^-" else c for c in banned)
    return f"[^{_CONTROL}{escaped}]"


def line_text(grammar: Grammar, hint: str, most: int, first: str = "", banned: str = "") -> str:
    """A rule for one line of text, about 1 to ``most`` characters (a run of n's counts
    once), never "n:", none of ``banned``; its first character is not blank nor one of
    ``first`` (what the parser would strip or read otherwise)."""
    unit = grammar.rule("unit", f"{_class('nN' + banned)} | {_N}{{1,3}} {_class('nN:' + banned)}")
    lead = grammar.rule(
        f"{hint}-first",
        f"{_class('nN: ' + chr(9) + first + banned)} | {_N}{{1,3}} {_class('nN:' + banned)}",
    )
    body = f"{lead} {repeat(unit, max(0, most - 1))} {_N}{{0,3}} | {_N}{{1,3}}"
    return grammar.rule(hint, body)


# A JSON string's characters: anything printable but a quote, a backslash or a control
# character, or an escape; never "n:" either (a string of exact lengths writes a colon as its
# escape: each character is one unit there).
_STRING_NOT_N = r'[^"\\\x00-\x1FnN]'
_STRING_NOT_N_COLON = r'[^"\\\x00-\x1FnN:]'
_STRING_NOT_COLON = r'[^"\\\x00-\x1F:]'
_ESCAPE = r'"\\" ["\\/bfnrt]'
_COLON_ESCAPE = r'"\\u003a"'


def json_string(grammar: Grammar, most: int, least: int = 0, exact: bool = False) -> str:
    """A rule for a JSON string on one line of about ``least`` to ``most`` characters (a run
    of n's counts once: never "n:"), or, ``exact``, of ``least`` to ``most`` characters as a
    schema's ``minLength``/``maxLength`` say (an escape counts once; a colon is written
    ``\\u003a``)."""
    if exact:
        unit = grammar.rule("char", f"{_STRING_NOT_COLON} | {_ESCAPE} | {_COLON_ESCAPE}")
        body = f'"\\"" {repeat(unit, most, least)} "\\""'
        return grammar.rule(f"string-exact-{least}-{most}", body)
    unit = grammar.rule(
        "char",
        f"{_STRING_NOT_N} | {_ESCAPE} | {_N}{{1,3}} ({_STRING_NOT_N_COLON} | {_ESCAPE})",
    )
    body = f'"\\"" {repeat(unit, most, least)} {_N}{{0,3}} "\\""'
    return grammar.rule(f"string-{least}-{most}", body)


def _integer() -> str:
    return f'"-"? ("0" | [1-9] [0-9]{{0,{MAX_DIGITS - 1}}})'


def _number() -> str:
    return f'{_integer()} ("." [0-9]{{1,{MAX_DIGITS}}})? ([eE] [-+]? [0-9]{{1,3}})?'


# In JSON text, an n or N right before a colon is inside a string (a key's colon follows its
# closing quote): written as its \u escape, the same value; and the escape \n before a colon.
_LABEL_COLON = re.compile(r"(?P<lf>\\n(?=:))|(?P<escape>\\(?:u[0-9a-fA-F]{4}|.))|(?P<n>[nN](?=:))")


def _escaped(found: re.Match[str]) -> str:
    if found.lastgroup == "lf":
        return "\\u000a"
    if found.lastgroup == "n":
        return f"\\u{ord(found.group()):04x}"
    return found.group()  # any other escape, as it is


def json_literal(value: Any) -> str:
    """A JSON value written as ``json.dumps`` writes it, as a GBNF literal; an ``n`` right
    before a colon written as its escape (``Observatio\\u006e:``), so no literal holds ``n:``:
    a ``const`` of ``"Observation: x"`` is that value, never the stop sequence."""
    return literal(_LABEL_COLON.sub(_escaped, json.dumps(value, ensure_ascii=False)))


WS = '" "?'
"""Where JSON may have a space: at most one, so a model cannot pad a value forever."""


def any_json(grammar: Grammar, depth: int, string_chars: int, kind: str = "value") -> str:
    """A rule for any JSON value (``kind``: or any object, or any array) nested at most
    ``depth`` levels."""
    string = json_string(grammar, string_chars)
    scalars = f'{string} | {_number()} | "true" | "false" | "null"'
    if depth <= 0:
        if kind == "object":
            return grammar.rule("empty-object", f'"{{" {WS} "}}"')
        if kind == "array":
            return grammar.rule("empty-array", f'"[" {WS} "]"')
        return grammar.rule("scalar", scalars)
    inner = any_json(grammar, depth - 1, string_chars)
    more = f"{{0,{MAX_ITEMS - 1}}}"
    items = f'"[" {WS} ({inner} ({WS} "," {WS} {inner}){more})? {WS} "]"'
    member = f'{string} {WS} ":" {WS} {inner}'
    members = f'"{{" {WS} ({member} ({WS} "," {WS} {member}){more})? {WS} "}}"'
    if kind == "object":
        return grammar.rule(f"object-{depth}", members)
    if kind == "array":
        return grammar.rule(f"array-{depth}", items)
    return grammar.rule(f"json-{depth}", f"{scalars} | {items} | {members}")


def _bound(schema: Mapping[str, Any], key: str, default: int, cap: int) -> int:
    value = schema.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return min(value, cap)
    return min(default, cap)


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def _listed(
    grammar: Grammar, schema: Mapping[str, Any], string_chars: int, depth: int, hint: str
) -> str | None:
    """A rule for a schema that lists what the value may be: a ``const``, an ``enum`` of at
    most ``MAX_ENUM`` values, ``anyOf``/``oneOf`` options; None for a schema that does not."""
    if "const" in schema:
        return grammar.rule(hint, json_literal(schema["const"]))
    enum = schema.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= MAX_ENUM:
        return grammar.rule(hint, " | ".join(json_literal(v) for v in enum))
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            rules = [
                json_value(grammar, o, string_chars, depth - 1, f"{hint}-{i}")
                for i, o in enumerate(options[:MAX_ENUM])
            ]
            return grammar.rule(hint, " | ".join(rules))
    return None


def json_value(
    grammar: Grammar, schema: Any, string_chars: int, depth: int = MAX_DEPTH, hint: str = "value"
) -> str:
    """A rule for a JSON value following ``schema`` (its type, ``enum``/``const``, an object's
    properties and required ones, an array's items, ``anyOf``/``oneOf``, strings' lengths);
    what the grammar cannot say (patterns, formats, numeric ranges, ``$ref``) is left to the
    tool's own check. A string holds at most ``string_chars`` characters unless its schema
    says fewer."""
    if not isinstance(schema, Mapping) or depth <= 0:
        return any_json(grammar, 2 if depth > 0 else 0, string_chars)
    listed = _listed(grammar, schema, string_chars, depth, hint)
    if listed is not None:
        return listed
    types = _types(schema)
    if not types and isinstance(schema.get("properties"), Mapping):
        types = ["object"]
    if not types:
        return any_json(grammar, min(2, depth), string_chars)
    bodies = [_typed(grammar, schema, t, string_chars, depth, hint) for t in types]
    return grammar.rule(hint, " | ".join(bodies))


def _string(schema: Mapping[str, Any], grammar: Grammar, chars: int) -> str:
    """A string of the lengths the schema says (``minLength``, ``maxLength``), at most
    ``chars`` characters."""
    exact = "maxLength" in schema or "minLength" in schema
    most = _bound(schema, "maxLength", chars, chars)
    least = min(_bound(schema, "minLength", 0, chars), most)
    return json_string(grammar, most, least, exact)


def _array(grammar: Grammar, schema: Mapping[str, Any], chars: int, depth: int, hint: str) -> str:
    """An array of the schema's ``items``, as many as ``minItems`` and ``maxItems`` say (at
    most ``MAX_ITEMS``)."""
    most = _bound(schema, "maxItems", MAX_ITEMS, MAX_ITEMS)
    least = min(_bound(schema, "minItems", 0, most), most)
    item = json_value(grammar, schema.get("items"), chars, depth - 1, f"{hint}-item")
    if most == 0:
        return f'"[" {WS} "]"'
    more = f'({WS} "," {WS} {item}){{{max(0, least - 1)},{most - 1}}}'
    listed = f"{item} {more}"
    return f'"[" {WS} {listed if least else f"({listed})?"} {WS} "]"'


# The types whose grammar the schema does not change.
_FIXED = {
    "integer": _integer(),
    "number": _number(),
    "boolean": '"true" | "false"',
    "null": '"null"',
}


def _typed(
    grammar: Grammar, schema: Mapping[str, Any], kind: str, chars: int, depth: int, hint: str
) -> str:
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed
    if kind == "string":
        return _string(schema, grammar, chars)
    if kind == "array":
        return _array(grammar, schema, chars, depth, hint)
    if kind == "object":
        return json_object(grammar, schema, chars, depth, hint)
    return any_json(grammar, min(2, depth), chars)


def json_object(
    grammar: Grammar, schema: Mapping[str, Any], chars: int, depth: int = MAX_DEPTH, hint: str = "o"
) -> str:
    """The body of an object following ``schema``: its properties in their order, each
    required one always, each other one optionally; an object without properties is any
    JSON object."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return any_json(grammar, min(2, depth), chars, "object")
    required_names = schema.get("required")
    required = set(required_names) if isinstance(required_names, list) else set()
    pairs: list[tuple[str, bool]] = []
    for n, (name, spec) in enumerate(list(properties.items())[:MAX_PROPERTIES]):
        value = json_value(grammar, spec, chars, depth - 1, f"{hint}-{n}")
        pair = f'{json_literal(str(name))} {WS} ":" {WS} {value}'
        pairs.append((grammar.rule(f"{hint}-kv", pair), name in required))
    return '"{" ' + WS + " " + _members(grammar, pairs, hint) + " " + WS + ' "}"'


def _members(grammar: Grammar, pairs: Sequence[tuple[str, bool]], hint: str) -> str:
    """Members in order with commas between: a required one always, an optional one maybe.
    Linear in the properties: ``rest[i]`` is what may follow member ``i - 1``."""
    comma = f'{WS} "," {WS}'
    rest = [""] * (len(pairs) + 1)
    for i in range(len(pairs) - 1, 0, -1):  # what may follow the first member on
        pair, needed = pairs[i]
        step = f"{comma} {pair}" if needed else f"({comma} {pair})?"
        rest[i] = grammar.rule(f"{hint}-rest", f"{step} {rest[i + 1]}".strip())
    # The first member written: the first required one, or an optional one before it.
    starts: list[str] = []
    for i, (pair, needed) in enumerate(pairs):
        starts.append(f"{pair} {rest[i + 1]}".strip())
        if needed:
            return "(" + " | ".join(starts) + ")"
    return "(" + " | ".join(starts) + ")?"
