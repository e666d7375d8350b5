"""A subscription's conditions, normalised for the matching indexes (`broker.cores.matching`).

Every subscription is first *normalised* into a few conditions, each on one attribute (after
checking the filter is satisfiable -- unsatisfiable filters are kept but never match):

- an ``=`` predicate implies all the others on its attribute: one ``eq`` condition;
- otherwise the tightest lower bound and the tightest upper bound (one each, per attribute,
  kind and open/closed end), the longest ``prefix``, and, if nothing else fixes the kind of
  the value, a ``kind`` condition (only ``!=`` predicates);
- only ``exists``: the attribute must be present;
- each ``!=`` value is a *kill*: a publication carrying that value disqualifies the subscription.

`normalise` computes them as `Entry` records, which the indexes keep to remove a subscription
again; `discard` is the indexes' shared removal from a map of slot sets.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import Predicate
from broker.cores.language.satisfiability import attribute_satisfiable
from broker.cores.language.values import STR, Value

# Range entry sides: a lower bound "x > c" / "x >= c", an upper bound "x < c" / "x <= c".
GT, GE, LT, LE = ">", ">=", "<", "<="


class Entry(NamedTuple):
    """One indexed condition of a subscription: where it lives, to remove it again."""

    attr: str
    where: str  # "eq" "range" "prefix" "kind" "exists" "kill"
    kind: str | None
    op: str | None
    value: Value | None


def normalise(f: Filter) -> tuple[list[Entry], list[Entry]] | None:
    """(counted entries, kill entries) of a filter -- see the module docstring -- or None if
    the filter is unsatisfiable."""
    counted: list[Entry] = []
    kills: list[Entry] = []
    by_attr: dict[str, list[Predicate]] = {}
    for p in f.predicates:
        by_attr.setdefault(p.attr, []).append(p)
    for preds in by_attr.values():
        if not attribute_satisfiable(preds):
            return None
    for attr, preds in by_attr.items():
        valued = [p for p in preds if p.op != "exists"]
        if not valued:
            counted.append(Entry(attr, "exists", None, None, None))
            continue
        kind = valued[0].kind
        eq = next((p for p in valued if p.op == "="), None)
        if eq is not None:
            counted.append(Entry(attr, "eq", kind, "=", eq.value))
            continue
        lower: Predicate | None = None
        upper: Predicate | None = None
        longest: Predicate | None = None
        for p in valued:
            v = p.value
            if p.op in (GT, GE):
                if lower is None or v > lower.value or (v == lower.value and p.op == GT):  # type: ignore[operator]
                    lower = p
            elif p.op in (LT, LE):
                if upper is None or v < upper.value or (v == upper.value and p.op == LT):  # type: ignore[operator]
                    upper = p
            elif p.op == "prefix":
                if longest is None or len(v) > len(longest.value):  # type: ignore[arg-type]
                    longest = p
            elif p.op == "!=":
                kills.append(Entry(attr, "kill", kind, "!=", v))
        for bound in (lower, upper):
            if bound is not None:
                counted.append(Entry(attr, "range", kind, bound.op, bound.value))
        if longest is not None:
            counted.append(Entry(attr, "prefix", STR, "prefix", longest.value))
        if lower is None and upper is None and longest is None:
            counted.append(Entry(attr, "kind", kind, None, None))
    return counted, kills


def discard(table: dict[Any, set[int]], key: object, sid: int) -> None:
    """Remove `sid` from the set under `key`, and the key once its set is empty."""
    members = table.get(key)
    if members is not None:
        members.discard(sid)
        if not members:
            del table[key]
