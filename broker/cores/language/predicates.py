"""One predicate of the content-based language: ``attr op value``, its operators and its match.

A `Predicate` is ``attr op value`` with ``op`` one of ``=``, ``!=``, ``<``, ``<=``, ``>``,
``>=``, ``prefix`` (string values only) and ``exists`` (no value).  Every predicate requires
its attribute to be present; every predicate other than ``exists`` also requires the
publication's value to be of the predicate's kind (numeric or string), so ``price != 5``
does not match ``price = "five"``.  Predicates are joined into filters by
`broker.cores.language.filters`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from broker.cores.language.values import (
    FilterError,
    Publication,
    Value,
    check_name,
    check_value,
    format_value,
    kind_of,
)

OPS: Final = ("=", "!=", "<", "<=", ">", ">=", "prefix", "exists")
COMPARISONS: Final = ("=", "!=", "<", "<=", ">", ">=")


def _startswith(value: str, prefix: str) -> bool:
    return value.startswith(prefix)


OP_FUNCS: Final[dict[str, Callable[[Any, Any], bool]]] = {
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
        value = check_value(self.value, f"value of {self.attr} {self.op}")
        if self.op == "prefix" and type(value) is not str:
            raise FilterError(f"{self.attr} prefix needs a string, not {format_value(value)}")

    def matches(self, pub: Publication) -> bool:
        if self.attr not in pub:
            return False
        if self.op == "exists":
            return True
        got = pub[self.attr]
        if kind_of(got) != self.kind:
            return False
        return OP_FUNCS[self.op](got, self.value)

    def to_text(self) -> str:
        if self.value is None:  # only ``exists`` has no value (`__post_init__`)
            return f"{self.attr} exists"
        return f"{self.attr} {self.op} {format_value(self.value)}"

    def to_wire(self) -> list[Any]:
        return [self.attr, self.op, self.value]
