"""The text forms of the content-based language: filters and publications as text, parsed and printed.

Text form of a filter (`parse_filter`, `Filter.to_text`)::

    symbol = "IBM" and price > 100 and volume exists and name prefix "IB"

    filter    := "true" | predicate ("and" predicate)*
    predicate := NAME ("=" | "!=" | "<" | "<=" | ">" | ">=") literal
               | NAME "prefix" STRING | NAME "exists"
    literal   := STRING | NUMBER
    NAME      := [A-Za-z_][A-Za-z0-9_.]*
    STRING    := a double-quoted JSON string (escapes \\" \\\\ \\n \\t \\uXXXX ...)
    NUMBER    := -?digits(.digits)?([eE][+-]?digits)?   (an int unless it has "." or an exponent)

Keywords (``and``, ``prefix``, ``exists``, ``true``) are case-insensitive; attribute names are
case-sensitive.  Publications have the text form ``symbol="IBM",price=101.5,volume=300``
(`parse_attrs`, `attrs_to_text`) or a JSON object (`attrs_from_json`).  Errors are
`FilterError` s naming the column.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Final

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import Predicate
from broker.cores.language.values import (
    INT_MAX,
    INT_MIN,
    MAX_ATTRIBUTES,
    MAX_NAME_LENGTH,
    MAX_PREDICATES,
    MAX_STRING_LENGTH,
    MAX_TEXT_LENGTH,
    FilterError,
    Publication,
    Value,
    check_value,
    format_value,
    validate_publication,
)


def attrs_to_text(pub: Publication) -> str:
    """``symbol="IBM",price=101.5`` -- `parse_attrs` reads it back."""
    return ",".join(f"{name}={format_value(value)}" for name, value in pub.items())


def attrs_from_json(text: str | bytes) -> dict[str, Value]:
    """A publication from a JSON object ``{"symbol": "IBM", "price": 101.5}``, or FilterError."""
    if len(text) > MAX_TEXT_LENGTH:
        raise FilterError(f"publication text longer than {MAX_TEXT_LENGTH} characters")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise FilterError(f"publication is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise FilterError("a publication in JSON is an object {\"name\": value, ...}")
    return validate_publication(obj)


# --------------------------------------------------------------------------- text parsing

_TOKEN_RE: Final = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![A-Za-z0-9_.]))
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op>!=|<=|>=|=|<|>)
  | (?P<comma>,)
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "string" "number" "name" "op" "comma" "end"
    text: str
    column: int  # 1-based
    value: Value | None = None


def _error(column: int, message: str) -> FilterError:
    return FilterError(f"column {column}: {message}")


def _tokenize(text: str, what: str) -> list[_Token]:
    if type(text) is not str:
        raise FilterError(f"{what} must be text, not {type(text).__name__}")
    if len(text) > MAX_TEXT_LENGTH:
        raise FilterError(f"{what} longer than {MAX_TEXT_LENGTH} characters")
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        column = pos + 1
        if m is None:
            char = text[pos]
            if char == '"':
                raise _error(column, "unterminated string (missing closing \")")
            if char == "-" or char.isdigit():
                raise _error(column, f"bad number starting {text[pos:pos + 12]!r}")
            raise _error(column, f"unexpected character {char!r}")
        kind = m.lastgroup
        assert kind is not None
        lexeme = m.group()
        pos = m.end()
        if kind == "ws":
            continue
        value: Value | None = None
        if kind == "string":
            try:
                string: str = json.loads(lexeme, strict=False)  # a JSON string literal (the token)
            except ValueError as exc:
                detail = getattr(exc, "msg", str(exc))
                raise _error(column + getattr(exc, "pos", 0), f"bad string escape ({detail})") from None
            if len(string) > MAX_STRING_LENGTH:
                raise _error(column, f"string longer than {MAX_STRING_LENGTH} characters")
            value = string
        elif kind == "number":
            value = _number(lexeme, column)
        tokens.append(_Token(kind, lexeme, column, value))
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


def _number(lexeme: str, column: int) -> int | float:
    if "." in lexeme or "e" in lexeme or "E" in lexeme:
        number = float(lexeme)
        if not math.isfinite(number):
            raise _error(column, f"number {lexeme} is out of range")
        return number
    integer = int(lexeme)
    if not INT_MIN <= integer <= INT_MAX:
        raise _error(column, f"integer {lexeme} does not fit in 64 bits")
    return integer


def _at(tokens: list[_Token], i: int) -> _Token:
    """Token i, or the end token past the end."""
    return tokens[i] if i < len(tokens) else tokens[-1]


def _describe(tok: _Token) -> str:
    return "end of input" if tok.kind == "end" else repr(tok.text)


def parse_filter(text: str) -> Filter:
    """A filter from its text form (see the module docstring); FilterError with the column."""
    tokens = _tokenize(text, "filter")
    if tokens[0].kind == "end":
        raise FilterError("empty filter (write `true` to match everything)")
    if tokens[0].kind == "name" and tokens[0].text.lower() == "true" and tokens[1].kind == "end":
        return Filter(())
    preds: list[Predicate] = []
    i = 0
    while True:
        if len(preds) >= MAX_PREDICATES:
            raise _error(tokens[i].column, f"more than {MAX_PREDICATES} predicates")
        pred, i = _parse_predicate(tokens, i)
        preds.append(pred)
        tok = tokens[i]
        if tok.kind == "end":
            break
        if tok.kind != "name" or tok.text.lower() != "and":
            raise _error(tok.column, f"expected 'and' or end of filter, found {_describe(tok)}")
        i += 1
    return Filter(tuple(preds))


def _parse_predicate(tokens: list[_Token], i: int) -> tuple[Predicate, int]:
    tok = _at(tokens, i)
    if tok.kind != "name":
        raise _error(tok.column, f"expected an attribute name, found {_describe(tok)}")
    attr = tok.text
    if len(attr) > MAX_NAME_LENGTH:
        raise _error(tok.column, f"attribute name longer than {MAX_NAME_LENGTH} characters")
    op_tok = _at(tokens, i + 1)
    if op_tok.kind == "name" and op_tok.text.lower() == "exists":
        return Predicate(attr, "exists"), i + 2
    if op_tok.kind == "name" and op_tok.text.lower() == "prefix":
        lit = _at(tokens, i + 2)
        if lit.kind != "string":
            raise _error(lit.column, f"prefix needs a double-quoted string, found {_describe(lit)}")
        return _predicate_at(lit.column, attr, "prefix", lit.value), i + 3
    if op_tok.kind != "op":
        raise _error(
            op_tok.column,
            f"expected an operator (= != < <= > >= prefix exists) after {attr}, "
            f"found {_describe(op_tok)}",
        )
    lit = _at(tokens, i + 2)
    if lit.kind not in ("string", "number"):
        hint = " (strings are double-quoted)" if lit.kind == "name" else ""
        raise _error(lit.column, f"expected a value after {attr} {op_tok.text}, found {_describe(lit)}{hint}")
    return _predicate_at(lit.column, attr, op_tok.text, lit.value), i + 3


def _predicate_at(column: int, attr: str, op: str, value: Value | None) -> Predicate:
    try:
        return Predicate(attr, op, value)
    except FilterError as exc:
        raise _error(column, str(exc)) from None


def parse_attrs(text: str) -> dict[str, Value]:
    """A publication from ``name=value,name=value`` (values as in filters); FilterError."""
    tokens = _tokenize(text, "publication")
    if tokens[0].kind == "end":
        raise FilterError("empty publication: give name=value pairs separated by commas")
    out: dict[str, Value] = {}
    i = 0
    while True:
        name, eq, lit = _at(tokens, i), _at(tokens, i + 1), _at(tokens, i + 2)
        if name.kind != "name":
            raise _error(name.column, f"expected an attribute name, found {_describe(name)}")
        _check_name_at(name)
        if eq.kind != "op" or eq.text != "=":
            raise _error(eq.column, f"expected '=' after {name.text}, found {_describe(eq)}")
        if lit.kind not in ("string", "number"):
            hint = " (strings are double-quoted)" if lit.kind == "name" else ""
            raise _error(lit.column, f"expected a value for {name.text}, found {_describe(lit)}{hint}")
        if name.text in out:
            raise _error(name.column, f"attribute {name.text} given twice")
        if len(out) >= MAX_ATTRIBUTES:
            raise _error(name.column, f"more than {MAX_ATTRIBUTES} attributes")
        try:
            out[name.text] = check_value(lit.value, f"value of {name.text}")
        except FilterError as exc:
            raise _error(lit.column, str(exc)) from None
        sep = _at(tokens, i + 3)
        if sep.kind == "end":
            return out
        if sep.kind != "comma":
            raise _error(sep.column, f"expected ',' or end of publication, found {_describe(sep)}")
        i += 4


def _check_name_at(tok: _Token) -> None:
    if len(tok.text) > MAX_NAME_LENGTH:
        raise _error(tok.column, f"attribute name longer than {MAX_NAME_LENGTH} characters")
