"""Satisfiability in the content-based language: can some value satisfy these predicates?

The decision is exact over the real value domain -- signed 64-bit integers and finite doubles
for numbers, all code-point strings for strings -- including the discrete corners: ``x > 1 and
x < 2`` is satisfiable (by 1.5) but ``x > 1.0 and x < math.nextafter(1.0, 2)`` is not, and
``s > "a" and s < "a\\x00"`` is not.  The one documented gap: string lengths are not bounded
here, while publications are limited to `MAX_STRING_LENGTH` characters
(`broker.cores.language.values`), so a constraint only satisfiable by over-long strings
(``s > "<1024 times U+10FFFF>"``) counts as satisfiable, hence as overlapping
(`broker.cores.language.relations`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from typing import Final

from broker.cores.language.predicates import Predicate
from broker.cores.language.values import INT_MAX, NUM

_MAX_CHAR: Final = chr(0x10FFFF)


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
        assert isinstance(v, (int, float))  # `attribute_satisfiable` passes only numeric predicates
        if op == "!=":
            excluded.add(v)
            continue
        if op in ("=", ">", ">="):
            closed = op != ">"
            if lo is None or v > lo or (v == lo and not closed):
                lo, lo_closed = v, closed
        if op in ("=", "<", "<="):
            closed = op != "<"
            if hi is None or v < hi or (v == hi and not closed):
                hi, hi_closed = v, closed
    x: int | float | None
    if lo is None:  # noqa: SIM108 - a nested conditional expression would hide the comment
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


def by_attribute(preds: Iterable[Predicate]) -> dict[str, list[Predicate]]:
    """The predicates grouped by the attribute they constrain."""
    groups: dict[str, list[Predicate]] = {}
    for p in preds:
        groups.setdefault(p.attr, []).append(p)
    return groups


def predicates_satisfiable(preds: Iterable[Predicate]) -> bool:
    """True iff some publication satisfies every predicate (on any attributes)."""
    return all(attribute_satisfiable(group) for group in by_attribute(preds).values())
