"""Filters of the content-based language: conjunctions of predicates, in canonical order.

A `Filter` is a conjunction of `Predicate` s (`broker.cores.language.predicates`).  Filters
serve as advertisements and as subscriptions.  The empty filter (text ``true``) matches
everything.  A filter's wire form is ``[[attr, op, value], ...]`` (`Filter.to_wire`,
`Filter.from_wire`); its text form is read by `broker.cores.language.text.parse_filter`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from broker.cores.language.predicates import OP_FUNCS, OPS, Predicate
from broker.cores.language.satisfiability import predicates_satisfiable
from broker.cores.language.values import KIND_OF_TYPE, MAX_PREDICATES, FilterError, Publication, Value


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
            tuple((p.attr, p.kind, OP_FUNCS.get(p.op), p.value) for p in unique),
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
        kinds = KIND_OF_TYPE
        for attr, kind, func, value in self._compiled:
            got = get(attr, _MISSING)
            if got is _MISSING:
                return False
            if kind is None or func is None:  # ``exists`` (the one operator without either)
                continue
            if kinds.get(type(got)) != kind or not func(got, value):
                return False
        return True

    def satisfiable(self) -> bool:
        """True iff some publication matches this filter (exact; `broker.cores.language.satisfiability`)."""
        return predicates_satisfiable(self.predicates)

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
