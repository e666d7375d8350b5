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

    @property
    def operand(self) -> Value:
        """The value of an "eq", "range", "prefix" or "kill" entry (each has one)."""
        assert self.value is not None
        return self.value

    @property
    def bound(self) -> tuple[str, str]:
        """(kind, op) of a "range" entry: the bound type it belongs to."""
        assert self.kind is not None and self.op is not None
        return self.kind, self.op

    @property
    def value_kind(self) -> str:
        """The kind of a "kind" entry (set from a valued predicate, never None there)."""
        assert self.kind is not None
        return self.kind


def _less(a: Value, b: Value) -> bool:
    """a < b for two values of one kind: all valued predicates on an attribute that passed
    `attribute_satisfiable` have the same kind (numbers compare with numbers, strings with
    strings)."""
    if isinstance(a, str):
        assert isinstance(b, str)
        return a < b
    assert not isinstance(b, str)
    return a < b


def _value_of(p: Predicate) -> Value:
    """The value of a predicate other than ``exists`` (the only one without a value)."""
    assert p.value is not None
    return p.value


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
        longest: str | None = None  # the longest prefix
        for p in valued:
            v = _value_of(p)
            if p.op in (GT, GE):
                if lower is None or _less(_value_of(lower), v) or (v == lower.value and p.op == GT):
                    lower = p
            elif p.op in (LT, LE):
                if upper is None or _less(v, _value_of(upper)) or (v == upper.value and p.op == LT):
                    upper = p
            elif p.op == "prefix":
                assert type(v) is str  # `Predicate` accepts only string prefixes
                if longest is None or len(v) > len(longest):
                    longest = v
            elif p.op == "!=":
                kills.append(Entry(attr, "kill", kind, "!=", v))
        for bound in (lower, upper):
            if bound is not None:
                counted.append(Entry(attr, "range", kind, bound.op, bound.value))
        if longest is not None:
            counted.append(Entry(attr, "prefix", STR, "prefix", longest))
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
