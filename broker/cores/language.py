"""The content-based language of the SCOT broker mode (OctopiA §1-§2, §6-§9).

OctopiA is an advertisement-based publish/subscribe system: a publisher first announces what it
will publish (an *advertisement*), a subscriber states what it wants (a *subscription*), and
brokers route a *publication* towards subscriptions it *matches*; advertisements and
subscriptions are related by *overlap* (PADRES and SIENA use the same vocabulary).  The paper
does not fix a language; this module defines a small, exact one.

Publications
    A map from attribute names to typed values: ``str`` (valid Unicode), ``int`` (signed 64
    bits) or ``float`` (finite).  ``bool`` is not a value.  Integers and floats are one
    numeric domain and compare numerically with each other (``1 == 1.0``); strings compare
    only with strings
    (lexicographically, by code point).

Filters
    A `Filter` is a conjunction of `Predicate` s ``attr op value`` with ``op`` one of ``=``,
    ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``prefix`` (string values only) and ``exists`` (no
    value).  Filters serve as advertisements and as subscriptions.  Every predicate requires
    its attribute to be present; every predicate other than ``exists`` also requires the
    publication's value to be of the predicate's kind (numeric or string), so ``price != 5``
    does not match ``price = "five"``.  The empty filter (text ``true``) matches everything.

Text form (`parse_filter`, `Filter.to_text`)::

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
(`parse_attrs`) or a JSON object (`attrs_from_json`).

Overlap (`overlaps`) -- the convention, following PADRES: an advertisement lists the
attributes its publisher emits, so a publication under an advertisement carries only attributes
the advertisement names.  ``overlaps(adv, sub)`` is true iff some publication whose attributes
are all named by ``adv`` matches both ``adv`` and ``sub``; in particular a subscription that
constrains an attribute the advertisement does not mention never overlaps it.  (`intersects`
drops the convention: some publication, with any attributes, matches both.)

The decision is exact over the real value domain -- signed 64-bit integers and finite doubles
for numbers, all code-point strings for strings -- including the discrete corners: ``x > 1 and
x < 2`` is satisfiable (by 1.5) but ``x > 1.0 and x < math.nextafter(1.0, 2)`` is not, and
``s > "a" and s < "a\\x00"`` is not.  The one documented gap: string lengths are not bounded
here, while publications are limited to `MAX_STRING_LENGTH` characters, so a constraint only
satisfiable by over-long strings (``s > "<1024 times U+10FFFF>"``) counts as overlapping.

Limits (`MAX_PREDICATES`, `MAX_ATTRIBUTES`, `MAX_NAME_LENGTH`, `MAX_STRING_LENGTH`,
`MAX_TEXT_LENGTH`) are enforced everywhere a filter or publication is built; every violation
raises `FilterError` (a `ValueError`) with a one-line message.
"""

from __future__ import annotations

import json
import math
import operator
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

Value = str | int | float
Publication = Mapping[str, Value]

MAX_PREDICATES: Final = 32
"""Predicates in one filter."""
MAX_ATTRIBUTES: Final = 64
"""Attributes in one publication."""
MAX_NAME_LENGTH: Final = 64
"""Characters in an attribute name."""
MAX_STRING_LENGTH: Final = 1024
"""Characters in a string value."""
MAX_TEXT_LENGTH: Final = 16384
"""Characters in the text of a filter or of a publication."""
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1

OPS: Final = ("=", "!=", "<", "<=", ">", ">=", "prefix", "exists")
COMPARISONS: Final = ("=", "!=", "<", "<=", ">", ">=")

NUM: Final = "num"
"""The numeric kind (int and float)."""
STR: Final = "str"
"""The string kind."""

_KIND_OF_TYPE: Final[dict[type, str]] = {int: NUM, float: NUM, str: STR}
_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_MAX_CHAR: Final = chr(0x10FFFF)


class FilterError(ValueError):
    """A filter, predicate or publication that is not valid in this language."""


def kind_of(value: object) -> str | None:
    """`NUM`, `STR`, or None for anything that is not a value (bool, None, bytes, ...)."""
    return _KIND_OF_TYPE.get(type(value))


def check_name(name: object) -> str:
    """An attribute name, or FilterError."""
    if type(name) is not str:
        raise FilterError(f"attribute name must be a string, not {type(name).__name__}")
    if len(name) > MAX_NAME_LENGTH:
        raise FilterError(f"attribute name longer than {MAX_NAME_LENGTH} characters")
    if not _NAME_RE.match(name):
        raise FilterError(f"bad attribute name {name!r}: use letters, digits, '_' and '.'")
    return name


def check_value(value: object, where: str = "value") -> Value:
    """A value (str, int in 64 bits, finite float), or FilterError."""
    kind = kind_of(value)
    if kind is None:
        raise FilterError(
            f"{where} must be a string, integer or float, not {type(value).__name__}"
        )
    if type(value) is int and not INT_MIN <= value <= INT_MAX:
        raise FilterError(f"{where} {value} does not fit in 64 bits")
    if type(value) is float and not math.isfinite(value):
        raise FilterError(f"{where} must be finite, not {value!r}")
    if type(value) is str:
        if len(value) > MAX_STRING_LENGTH:
            raise FilterError(f"{where} longer than {MAX_STRING_LENGTH} characters")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise FilterError(f"{where} is not valid Unicode (a lone surrogate)") from None
    return value  # type: ignore[return-value]


def format_value(value: Value) -> str:
    """The literal of a value in the text forms (parsed back to an equal value of the same type)."""
    if type(value) is str:
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def _startswith(value: str, prefix: str) -> bool:
    return value.startswith(prefix)


_OP_FUNCS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "prefix": _startswith,
}


@dataclass(frozen=True, slots=True)
class Predicate:
    """One constraint ``attr op value`` on a publication (``value`` is None for ``exists``)."""

    attr: str
    op: str
    value: Value | None = None
    kind: str | None = field(init=False, default=None, compare=False, repr=False)
    """The kind of value this predicate accepts: `NUM`, `STR`, or None (``exists``: any kind)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", kind_of(self.value))
        check_name(self.attr)
        if self.op not in OPS:
            raise FilterError(f"unknown operator {self.op!r} (use one of {' '.join(OPS)})")
        if self.op == "exists":
            if self.value is not None:
                raise FilterError(f"{self.attr} exists takes no value")
            return
        check_value(self.value, f"value of {self.attr} {self.op}")
        if self.op == "prefix" and type(self.value) is not str:
            raise FilterError(f"{self.attr} prefix needs a string, not {format_value(self.value)}")  # type: ignore[arg-type]

    def matches(self, pub: Publication) -> bool:
        if self.attr not in pub:
            return False
        if self.op == "exists":
            return True
        got = pub[self.attr]
        if kind_of(got) != self.kind:
            return False
        return _OP_FUNCS[self.op](got, self.value)

    def to_text(self) -> str:
        if self.op == "exists":
            return f"{self.attr} exists"
        return f"{self.attr} {self.op} {format_value(self.value)}"  # type: ignore[arg-type]

    def to_wire(self) -> list[Any]:
        return [self.attr, self.op, self.value]


def _sort_key(pred: Predicate) -> tuple[Any, ...]:
    kind = pred.kind
    return (pred.attr, OPS.index(pred.op), kind or "", 0 if pred.value is None else pred.value)


@dataclass(frozen=True, slots=True)
class Filter:
    """A conjunction of predicates in canonical order (sorted, duplicates removed); hashable.

    Used both as an advertisement and as a subscription.  ``Filter(())`` matches everything.
    """

    predicates: tuple[Predicate, ...] = ()
    _compiled: tuple[tuple[str, str | None, Callable[[Any, Any], bool] | None, Value | None], ...] = field(
        init=False, repr=False, compare=False, hash=False, default=()
    )

    def __post_init__(self) -> None:
        preds = self.predicates
        if not isinstance(preds, (tuple, list)):
            raise FilterError(f"a filter is a sequence of predicates, not {type(preds).__name__}")
        for pred in preds:
            if not isinstance(pred, Predicate):
                raise FilterError(f"not a predicate: {pred!r}"[:200])
        unique = sorted(dict.fromkeys(preds), key=_sort_key)
        if len(unique) > MAX_PREDICATES:
            raise FilterError(f"a filter has at most {MAX_PREDICATES} predicates, not {len(unique)}")
        object.__setattr__(self, "predicates", tuple(unique))
        object.__setattr__(
            self,
            "_compiled",
            tuple((p.attr, p.kind, _OP_FUNCS.get(p.op), p.value) for p in unique),
        )

    @classmethod
    def of(cls, *predicates: Predicate) -> Filter:
        return cls(tuple(predicates))

    @property
    def attributes(self) -> frozenset[str]:
        """The attributes this filter constrains (each must be present in a match)."""
        return frozenset(p.attr for p in self.predicates)

    def on(self, attr: str) -> tuple[Predicate, ...]:
        """The predicates on one attribute."""
        return tuple(p for p in self.predicates if p.attr == attr)

    def matches(self, pub: Publication) -> bool:
        """True iff the publication satisfies every predicate."""
        get = pub.get
        kinds = _KIND_OF_TYPE
        for attr, kind, func, value in self._compiled:
            got = get(attr, _MISSING)
            if got is _MISSING:
                return False
            if kind is None:
                continue
            if kinds.get(type(got)) != kind or not func(got, value):  # type: ignore[misc]
                return False
        return True

    def satisfiable(self) -> bool:
        """True iff some publication matches this filter (exact; see the module docstring)."""
        return _satisfiable(self.predicates)

    def to_text(self) -> str:
        """The text form; `parse_filter` reads it back to an equal filter."""
        if not self.predicates:
            return "true"
        return " and ".join(p.to_text() for p in self.predicates)

    def __str__(self) -> str:
        return self.to_text()

    def to_wire(self) -> list[list[Any]]:
        """``[[attr, op, value], ...]`` (value nil for ``exists``), msgpack-friendly."""
        return [p.to_wire() for p in self.predicates]

    @classmethod
    def from_wire(cls, obj: object) -> Filter:
        """The inverse of `to_wire`; FilterError on anything else."""
        if not isinstance(obj, (list, tuple)):
            raise FilterError(f"a filter on the wire is an array, not {type(obj).__name__}")
        if len(obj) > MAX_PREDICATES:
            raise FilterError(f"a filter has at most {MAX_PREDICATES} predicates, not {len(obj)}")
        preds = []
        for item in obj:
            if not isinstance(item, (list, tuple)) or len(item) != 3:
                raise FilterError("a predicate on the wire is an array [attr, op, value]")
            attr, op, value = item
            if type(op) is not str:
                raise FilterError(f"operator must be a string, not {type(op).__name__}")
            preds.append(Predicate(attr, op, value))
        return cls(tuple(preds))


_MISSING: Final = object()


# --------------------------------------------------------------------------- publications


def validate_publication(obj: object) -> dict[str, Value]:
    """A publication (a map of 1..`MAX_ATTRIBUTES` valid attributes) as a dict, or FilterError.

    This is also the wire form of a publication's attributes (a msgpack map).
    """
    if not isinstance(obj, Mapping):
        raise FilterError(f"a publication is a map of attributes, not {type(obj).__name__}")
    if not obj:
        raise FilterError("a publication needs at least one attribute")
    if len(obj) > MAX_ATTRIBUTES:
        raise FilterError(f"a publication has at most {MAX_ATTRIBUTES} attributes, not {len(obj)}")
    out: dict[str, Value] = {}
    for name, value in obj.items():
        out[check_name(name)] = check_value(value, f"value of {name}")
    return out


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
                value = json.loads(lexeme, strict=False)
            except ValueError as exc:
                detail = getattr(exc, "msg", str(exc))
                raise _error(column + getattr(exc, "pos", 0), f"bad string escape ({detail})") from None
            if len(value) > MAX_STRING_LENGTH:  # type: ignore[arg-type]
                raise _error(column, f"string longer than {MAX_STRING_LENGTH} characters")
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


# --------------------------------------------------------------------------- satisfiability


def _next_number(x: int | float) -> int | float | None:
    """The smallest value of the numeric domain (int64 and finite doubles) greater than x."""
    if type(x) is int:
        integer = x + 1
        double = float(x)
        if not double > x:
            double = math.nextafter(double, math.inf)
    else:
        integer = math.floor(x) + 1
        double = math.nextafter(x, math.inf)
    best: int | float | None = None
    if integer <= INT_MAX:
        best = integer
    if math.isfinite(double) and (best is None or double < best):
        best = double
    return best


def prefix_upper(prefix: str) -> str | None:
    """The least string above every string starting with ``prefix`` (None: no such string).

    ``s.startswith(p)`` iff ``p <= s < prefix_upper(p)`` in code-point order, for valid
    strings (no surrogates).
    """
    stripped = prefix.rstrip(_MAX_CHAR)
    if not stripped:
        return None
    following = ord(stripped[-1]) + 1
    if 0xD800 <= following <= 0xDFFF:
        following = 0xE000  # surrogates are not characters of a valid string
    return stripped[:-1] + chr(following)


def _numbers_satisfiable(preds: Iterable[Predicate]) -> bool:
    lo: int | float | None = None  # lower bound value
    lo_closed = True
    hi: int | float | None = None
    hi_closed = True
    excluded: set[int | float] = set()
    for p in preds:
        op, v = p.op, p.value
        if op == "!=":
            excluded.add(v)  # type: ignore[arg-type]
            continue
        if op in ("=", ">", ">="):
            closed = op != ">"
            if lo is None or v > lo or (v == lo and not closed):  # type: ignore[operator]
                lo, lo_closed = v, closed  # type: ignore[assignment]
        if op in ("=", "<", "<="):
            closed = op != "<"
            if hi is None or v < hi or (v == hi and not closed):  # type: ignore[operator]
                hi, hi_closed = v, closed  # type: ignore[assignment]
    x: int | float | None
    if lo is None:
        x = -sys.float_info.max  # the least value of the domain
    else:
        x = lo if lo_closed else _next_number(lo)
    # Walk the domain upwards from the lower bound: among |excluded| + 1 consecutive values
    # one is not excluded, so the loop decides.
    for _ in range(len(excluded) + 1):
        if x is None:
            return False
        if hi is not None and (x > hi or (x == hi and not hi_closed)):
            return False
        if x not in excluded:
            return True
        x = _next_number(x)
    return False  # pragma: no cover - unreachable, see above


def _strings_satisfiable(preds: Iterable[Predicate]) -> bool:
    # Normalised to the half-open interval [lo, hi); the successor of s is s + "\0".
    lo = ""
    hi: str | None = None
    excluded: set[str] = set()

    def below(bound: str | None) -> None:
        nonlocal hi
        if bound is not None and (hi is None or bound < hi):
            hi = bound

    for p in preds:
        op, v = p.op, p.value
        assert type(v) is str
        if op == "!=":
            excluded.add(v)
            continue
        if op in ("=", ">=", "prefix"):
            lo = max(lo, v)
        elif op == ">":
            lo = max(lo, v + "\0")
        if op in ("=", "<="):
            below(v + "\0")
        elif op == "<":
            below(v)
        elif op == "prefix":
            below(prefix_upper(v))
    x = lo
    for _ in range(len(excluded) + 1):
        if hi is not None and x >= hi:
            return False
        if x not in excluded:
            return True
        x += "\0"
    return False  # pragma: no cover - unreachable


def attribute_satisfiable(preds: Iterable[Predicate]) -> bool:
    """True iff one value satisfies every predicate (all on the same attribute)."""
    preds = list(preds)
    if len(preds) == 1 and preds[0].op not in ("<", ">"):
        return True  # only a strict bound can be empty on its own (x < "", x > max double)
    kinds = {p.kind for p in preds if p.op != "exists"}
    if len(kinds) > 1:
        return False
    if not kinds:
        return True
    if kinds.pop() == NUM:
        return _numbers_satisfiable(p for p in preds if p.op != "exists")
    return _strings_satisfiable(p for p in preds if p.op != "exists")


def _by_attribute(preds: Iterable[Predicate]) -> dict[str, list[Predicate]]:
    groups: dict[str, list[Predicate]] = {}
    for p in preds:
        groups.setdefault(p.attr, []).append(p)
    return groups


def _satisfiable(preds: Iterable[Predicate]) -> bool:
    return all(attribute_satisfiable(group) for group in _by_attribute(preds).values())


def intersects(a: Filter, b: Filter) -> bool:
    """True iff some publication (with any attributes) matches both filters."""
    return _satisfiable(a.predicates + b.predicates)


def overlaps(adv: Filter, sub: Filter) -> bool:
    """True iff a publication under advertisement ``adv`` can match subscription ``sub``.

    Exact: some publication carrying only attributes ``adv`` names matches both.  So ``sub``
    must constrain no attribute outside ``adv`` and the two must be jointly satisfiable.
    """
    if not sub.attributes <= adv.attributes:
        return False
    return intersects(adv, sub)


_COMPLEMENT: Final = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def covers(a: Filter, b: Filter) -> bool:
    """True iff every publication matching ``b`` also matches ``a`` (exact)."""
    if not b.satisfiable():
        return True
    if not a.attributes <= b.attributes:
        return False
    groups = _by_attribute(b.predicates)
    for p in a.predicates:
        if p.op == "exists":
            continue  # b constrains p.attr, so it is present in every match of b
        mine = groups[p.attr]
        kinds = {q.kind for q in mine if q.op != "exists"}
        if kinds != {p.kind}:
            return False  # b admits values of another kind (b is satisfiable)
        # b's values on this attribute must avoid the complement of p.
        if p.op == "prefix":
            assert type(p.value) is str
            outside = [Predicate(p.attr, "<", p.value)]
            upper = prefix_upper(p.value)
            if upper is not None:
                outside.append(Predicate(p.attr, ">=", upper))
        else:
            outside = [Predicate(p.attr, _COMPLEMENT[p.op], p.value)]
        if any(attribute_satisfiable(mine + [c]) for c in outside):
            return False
    return True
