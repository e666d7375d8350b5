"""`SubscriptionIndex`: the vectorised matching index the brokers use (`broker.cores.matching`).

`SubscriptionIndex` stores the normalised conditions (`broker.cores.matching.conditions`) as
columns over subscription slots (numpy arrays): the code of the ``=`` value, the code of the
prefix, and for each bound type an order-preserving code of the threshold
(`broker.cores.matching.ordercodes`).  For a publication value, a bisection over the distinct
thresholds gives the boundary code, and one vectorised comparison marks every subscription
whose bound holds; ANDing the columns of the attributes the publication carries (and a count
check for attributes it lacks) leaves exactly the matches.  Cost per publication: a few passes
of machine-word operations over the slots per bound type touched, independent of how many
predicates each publication satisfies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from broker.cores.language.filters import Filter
from broker.cores.language.relations import overlaps
from broker.cores.language.values import NUM, STR, Publication, Value, kind_of
from broker.cores.matching.conditions import GE, GT, LT, Entry, discard, normalise
from broker.cores.matching.ordercodes import OrderCodes

K = TypeVar("K", bound=Hashable)

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
_KIND_CODE = {NUM: 1, STR: 2}
_DEFAULT_CAPACITY = 64


class _VRange:
    """One bound type (attribute, kind, operator): a code per slot, ordered like the thresholds.

    Lower bounds (``>``, ``>=``) are satisfied by a prefix of the threshold order, upper bounds
    (``<``, ``<=``) by a suffix; either way one comparison of the code array against the code
    of the first unsatisfied (or last satisfied) threshold.  Slots without this bound hold a
    sentinel that always passes.
    """

    __slots__ = ("op", "sentinel", "codes", "order", "value_of")

    def __init__(self, op: str, capacity: int) -> None:
        self.op = op
        self.sentinel = _I64_MIN if op in (GT, GE) else _I64_MAX
        self.codes = np.full(capacity, self.sentinel, dtype=np.int64)
        self.order = OrderCodes()
        self.value_of: dict[int, Value] = {}

    def grow(self, capacity: int) -> None:
        codes = np.full(capacity, self.sentinel, dtype=np.int64)
        codes[: len(self.codes)] = self.codes
        self.codes = codes

    def add(self, slot: int, value: Value) -> None:
        self.value_of[slot] = value
        if self.order.acquire(value):
            code = self.order.code
            slots = np.fromiter(self.value_of.keys(), dtype=np.int64, count=len(self.value_of))
            self.codes[slots] = np.fromiter(
                (code[v] for v in self.value_of.values()), dtype=np.int64, count=len(slots)
            )
        else:
            self.codes[slot] = self.order.code[value]

    def remove(self, slot: int) -> None:
        value = self.value_of.pop(slot)
        self.codes[slot] = self.sentinel
        self.order.release(value)

    def restrict(self, cand: np.ndarray, value: Value, n: int, tmp: np.ndarray) -> None:
        """cand &= (this bound is absent or ``value`` satisfies it)."""
        values = self.order.values
        op = self.op
        if op in (GT, GE):
            at = values.bisect_left(value) if op == GT else values.bisect_right(value)
            if at == len(values):
                return  # every threshold passes
            np.less(self.codes[:n], self.order.code[values[at]], out=tmp)
        else:
            at = values.bisect_right(value) if op == LT else values.bisect_left(value)
            if at == 0:
                return
            np.greater(self.codes[:n], self.order.code[values[at - 1]], out=tmp)
        np.logical_and(cand, tmp, out=cand)

    def exclude(self, cand: np.ndarray, n: int, tmp: np.ndarray) -> None:
        """cand &= (this bound is absent) -- for a value of the other kind."""
        np.equal(self.codes[:n], self.sentinel, out=tmp)
        np.logical_and(cand, tmp, out=cand)


class _ValueCodes:
    """Small integer codes for equality values (and prefixes), with reference counts."""

    __slots__ = ("code", "refs", "next")

    def __init__(self) -> None:
        self.code: dict[Value, int] = {}
        self.refs: dict[Value, int] = {}
        self.next = 0

    def acquire(self, value: Value) -> int:
        if value in self.refs:
            self.refs[value] += 1
            return self.code[value]
        self.refs[value] = 1
        self.code[value] = self.next
        self.next += 1
        return self.next - 1

    def release(self, value: Value) -> None:
        left = self.refs[value] - 1
        if left:
            self.refs[value] = left
        else:
            del self.refs[value]
            del self.code[value]

    def __len__(self) -> int:
        return len(self.refs)


class _VAttr:
    """Everything indexed about one attribute name, as arrays over subscription slots."""

    __slots__ = (
        "has", "valued", "members", "ranges", "eq", "eqcode", "prefix", "prefcode",
        "prefix_lengths", "kindcode", "n_kind", "kill",
    )

    def __init__(self, capacity: int) -> None:
        self.has = np.zeros(capacity, dtype=np.uint8)  # the subscription constrains this attribute
        self.valued = np.zeros(capacity, dtype=bool)  # ... with something other than `exists`
        self.members = 0
        self.ranges: dict[tuple[str, str], _VRange] = {}
        self.eq = _ValueCodes()
        self.eqcode = np.full(capacity, -1, dtype=np.int64)
        self.prefix = _ValueCodes()
        self.prefcode = np.full(capacity, -1, dtype=np.int64)
        self.prefix_lengths: Counter[int] = Counter()
        self.kindcode = np.zeros(capacity, dtype=np.int8)
        self.n_kind = 0
        self.kill: dict[Value, set[int]] = {}

    def grow(self, capacity: int) -> None:
        for name, fill in (("has", 0), ("valued", False), ("eqcode", -1), ("prefcode", -1), ("kindcode", 0)):
            old = getattr(self, name)
            new = np.full(capacity, fill, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        for r in self.ranges.values():
            r.grow(capacity)

    def restrict(self, cand: np.ndarray, value: Value, n: int, tmp: np.ndarray) -> None:
        """cand &= (every condition on this attribute holds for ``value``)."""
        kind = kind_of(value)
        if kind is None:
            np.logical_not(self.valued[:n], out=tmp)
            np.logical_and(cand, tmp, out=cand)
            return
        if self.eq:
            code = self.eq.code.get(value)
            eqcode = self.eqcode[:n]
            np.equal(eqcode, -1, out=tmp)
            if code is not None:
                tmp |= eqcode == code
            np.logical_and(cand, tmp, out=cand)
        if self.prefix:
            prefcode = self.prefcode[:n]
            np.equal(prefcode, -1, out=tmp)
            if kind == STR:
                assert type(value) is str
                codes = self.prefix.code
                for length in self.prefix_lengths:
                    if length <= len(value):
                        code = codes.get(value[:length])
                        if code is not None:
                            tmp |= prefcode == code
            np.logical_and(cand, tmp, out=cand)
        if self.n_kind:
            kindcode = self.kindcode[:n]
            np.equal(kindcode, 0, out=tmp)
            tmp |= kindcode == _KIND_CODE[kind]
            np.logical_and(cand, tmp, out=cand)
        for (range_kind, _), r in self.ranges.items():
            if range_kind == kind:
                r.restrict(cand, value, n, tmp)
            else:
                r.exclude(cand, n, tmp)
        if self.kill:
            dead = self.kill.get(value)
            if dead:
                cand[np.fromiter(dead, dtype=np.int64, count=len(dead))] = False


@dataclass(slots=True)
class _VSub(Generic[K]):
    filter: Filter
    slot: int | None  # None: unsatisfiable, never matches, not indexed
    entries: list[Entry]


class SubscriptionIndex(Generic[K]):
    """Subscriptions under caller-chosen keys; `match` finds exactly those a publication matches.

    The conditions of every subscription (normalised by `broker.cores.matching.conditions`) are
    stored as columns over subscription *slots* (numpy arrays): per attribute, a code for its
    ``=`` value, one for its longest prefix, one per bound type whose codes preserve the order of
    the thresholds, and a has-this-attribute flag.  Matching a publication is a handful of
    vectorised comparisons per attribute it carries (a bisection finds the boundary code of
    each bound type), an AND across them, and a count check that the subscription constrains
    no attribute the publication lacks.  Nothing is evaluated per subscription in Python.

    ``add`` replaces an existing subscription under the same key.  Adding and removing cost
    O(conditions x log n) (amortised; a relabelling of one bound type's codes is O(n)).
    """

    def __init__(self, capacity: int = _DEFAULT_CAPACITY) -> None:
        self._reset(capacity)

    def _reset(self, capacity: int) -> None:
        """The state of a new index with room for `capacity` slots."""
        self._subs: dict[K, _VSub[K]] = {}
        self._capacity = max(1, capacity)
        self._n = 0  # slots in use or freed: [0, n)
        self._free: list[int] = []
        self._key_of: list[K | None] = []
        self._alive = np.zeros(self._capacity, dtype=bool)
        self._natt = np.zeros(self._capacity, dtype=np.uint8)
        self._attrs: dict[str, _VAttr] = {}

    def __len__(self) -> int:
        return len(self._subs)

    def __contains__(self, key: object) -> bool:
        return key in self._subs

    def __iter__(self) -> Iterator[K]:
        return iter(self._subs)

    def get(self, key: K) -> Filter | None:
        sub = self._subs.get(key)
        return None if sub is None else sub.filter

    def items(self) -> Iterator[tuple[K, Filter]]:
        for key, sub in self._subs.items():
            yield key, sub.filter

    def clear(self) -> None:
        """Forget every subscription (the state of a new index, at the default capacity)."""
        self._reset(_DEFAULT_CAPACITY)

    def _grow(self) -> None:
        capacity = self._capacity * 2
        for name in ("_alive", "_natt"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)
        for attr in self._attrs.values():
            attr.grow(capacity)
        self._capacity = capacity

    def add(self, key: K, f: Filter) -> None:
        if not isinstance(f, Filter):
            raise TypeError(f"SubscriptionIndex.add needs a Filter, not {type(f).__name__}")
        if key in self._subs:
            self.remove(key)
        entries = normalise(f)
        if entries is None:
            self._subs[key] = _VSub(f, None, [])
            return
        counted, kills = entries
        if self._free:
            slot = self._free.pop()
            self._key_of[slot] = key
        else:
            if self._n == self._capacity:
                self._grow()
            slot = self._n
            self._n += 1
            self._key_of.append(key)
        self._subs[key] = _VSub(f, slot, counted + kills)
        self._alive[slot] = True
        names = f.attributes
        self._natt[slot] = len(names)
        for name in names:
            attr = self._attrs.get(name)
            if attr is None:
                attr = self._attrs[name] = _VAttr(self._capacity)
            attr.has[slot] = 1
            attr.members += 1
        for e in counted + kills:
            self._place(slot, e)

    def _place(self, slot: int, e: Entry) -> None:
        attr = self._attrs[e.attr]
        where = e.where
        if where != "exists":
            attr.valued[slot] = True
        if where == "eq":
            attr.eqcode[slot] = attr.eq.acquire(e.operand)
        elif where == "range":
            key = e.bound
            r = attr.ranges.get(key)
            if r is None:
                r = attr.ranges[key] = _VRange(key[1], self._capacity)
            r.add(slot, e.operand)
        elif where == "prefix":
            assert type(e.value) is str
            attr.prefcode[slot] = attr.prefix.acquire(e.value)
            attr.prefix_lengths[len(e.value)] += 1
        elif where == "kind":
            attr.kindcode[slot] = _KIND_CODE[e.value_kind]
            attr.n_kind += 1
        elif where == "kill":
            attr.kill.setdefault(e.operand, set()).add(slot)

    def remove(self, key: K) -> bool:
        """Forget the subscription under ``key``; False if there was none."""
        sub = self._subs.pop(key, None)
        if sub is None:
            return False
        slot = sub.slot
        if slot is None:
            return True
        for e in sub.entries:
            self._unplace(slot, e)
        for name in sub.filter.attributes:
            attr = self._attrs[name]
            attr.has[slot] = 0
            attr.valued[slot] = False
            attr.members -= 1
            if not attr.members:
                del self._attrs[name]
        self._alive[slot] = False
        self._natt[slot] = 0
        self._key_of[slot] = None
        self._free.append(slot)
        if not self._subs:
            self.clear()
        return True

    def _unplace(self, slot: int, e: Entry) -> None:
        attr = self._attrs[e.attr]
        where = e.where
        if where == "eq":
            attr.eqcode[slot] = -1
            attr.eq.release(e.operand)
        elif where == "range":
            key = e.bound
            r = attr.ranges[key]
            r.remove(slot)
            if not r.value_of:
                del attr.ranges[key]
        elif where == "prefix":
            assert type(e.value) is str
            attr.prefcode[slot] = -1
            attr.prefix.release(e.value)
            attr.prefix_lengths[len(e.value)] -= 1
            if not attr.prefix_lengths[len(e.value)]:
                del attr.prefix_lengths[len(e.value)]
        elif where == "kind":
            attr.kindcode[slot] = 0
            attr.n_kind -= 1
        elif where == "kill":
            discard(attr.kill, e.value, slot)

    def match(self, pub: Publication) -> set[K]:
        """The keys of the subscriptions ``pub`` matches (exactly those `Filter.matches` accepts)."""
        n = self._n
        if not self._subs or n == 0:
            return set()
        cand = self._alive[:n].copy()
        tmp = np.empty(n, dtype=bool)
        attrs = self._attrs
        carried = 0
        for name, value in pub.items():
            attr = attrs.get(name)
            if attr is not None:
                carried += 1
                attr.restrict(cand, value, n, tmp)
        if carried < len(attrs):
            # Some indexed attribute is missing from the publication: a subscription that
            # constrains one does not match.  Count the constrained attributes it carries.
            present = np.zeros(n, dtype=np.uint8)
            for name in pub:
                attr = attrs.get(name)
                if attr is not None:
                    present += attr.has[:n]
            np.equal(present, self._natt[:n], out=tmp)
            np.logical_and(cand, tmp, out=cand)
        key_of = self._key_of
        # `cand` starts from `_alive`, and every live slot has a key (freed slots hold None).
        return {key for slot in np.flatnonzero(cand).tolist() if (key := key_of[slot]) is not None}

    def overlapping(self, adv: Filter) -> set[K]:
        """The keys of the subscriptions that overlap advertisement ``adv`` (a scan)."""
        names = adv.attributes
        return {
            key
            for key, sub in self._subs.items()
            if sub.slot is not None and sub.filter.attributes <= names and overlaps(adv, sub.filter)
        }
