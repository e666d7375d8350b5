"""Relations between filters of the content-based language: overlap, intersection, covering.

Overlap (`overlaps`) -- the convention, following PADRES: an advertisement lists the
attributes its publisher emits, so a publication under an advertisement carries only attributes
the advertisement names.  ``overlaps(adv, sub)`` is true iff some publication whose attributes
are all named by ``adv`` matches both ``adv`` and ``sub``; in particular a subscription that
constrains an attribute the advertisement does not mention never overlaps it.  (`intersects`
drops the convention: some publication, with any attributes, matches both.)  `covers` decides
whether every publication matching one filter matches another.

All three are exact, as the satisfiability decision they rest on
(`broker.cores.language.satisfiability`).
"""

from __future__ import annotations

from typing import Final

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import Predicate
from broker.cores.language.satisfiability import (
    attribute_satisfiable,
    by_attribute,
    predicates_satisfiable,
    prefix_upper,
)


def intersects(a: Filter, b: Filter) -> bool:
    """True iff some publication (with any attributes) matches both filters."""
    return predicates_satisfiable(a.predicates + b.predicates)


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
    groups = by_attribute(b.predicates)
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
