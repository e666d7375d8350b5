"""Which subscriptions match a publication: an index, not a scan (issue 4, item 2).

Every subscription is first *normalised* into a few conditions, each on one attribute (after
checking the filter is satisfiable -- unsatisfiable filters are kept but never match):

- an ``=`` predicate implies all the others on its attribute: one ``eq`` condition;
- otherwise the tightest lower bound and the tightest upper bound (one each, per attribute,
  kind and open/closed end), the longest ``prefix``, and, if nothing else fixes the kind of
  the value, a ``kind`` condition (only ``!=`` predicates);
- only ``exists``: the attribute must be present;
- each ``!=`` value is a *kill*: a publication carrying that value disqualifies the subscription.

Two indexes evaluate these conditions without visiting every subscription in Python:

`SubscriptionIndex` (the one the brokers use) stores the conditions as columns over
subscription slots (numpy arrays): the code of the ``=`` value, the code of the prefix, and
for each bound type an order-preserving code of the threshold.  For a publication value, a
bisection over the distinct thresholds gives the boundary code, and one vectorised comparison
marks every subscription whose bound holds; ANDing the columns of the attributes the
publication carries (and a count check for attributes it lacks) leaves exactly the matches.
Cost per publication: a few passes of machine-word operations over the slots per bound type
touched, independent of how many predicates each publication satisfies.

`CountingIndex` is the classic *counting algorithm* of content-based brokers in pure Python:
per attribute, a hash map for ``=``, sorted threshold lists for bounds, a prefix map, kind and
exists sets; each satisfied condition increments its subscription's counter, and a
subscription matches when its counter reaches its number of conditions.  Its cost grows with
the number of satisfied conditions, which for broad predicates approaches a scan.

`LinearIndex` has the same interface and scans (the baseline).  The tests check all three
agree; ``python -m bench matching`` measures them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

import numpy as np
from sortedcontainers import SortedKeyList, SortedList

from broker.cores.language import (
    NUM,
    STR,
    Filter,
    Predicate,
    Publication,
    Value,
    attribute_satisfiable,
    kind_of,
    overlaps,
)

K = TypeVar("K", bound=Hashable)

# Range entry sides: a lower bound "x > c" / "x >= c", an upper bound "x < c" / "x <= c".
_GT, _GE, _LT, _LE = ">", ">=", "<", "<="


class _Thresholds:
    """Subscriptions ordered by one threshold each (one per subscription), for one bound type."""

    __slots__ = ("value", "order")

    def __init__(self) -> None:
        self.value: dict[int, Value] = {}
        self.order: SortedKeyList = SortedKeyList(key=self.value.__getitem__)

    def add(self, sid: int, threshold: Value) -> None:
        self.value[sid] = threshold
        self.order.add(sid)

    def remove(self, sid: int) -> None:
        self.order.remove(sid)
        del self.value[sid]

    def __len__(self) -> int:
        return len(self.value)


class _AttrIndex:
    """The structures for one attribute name."""

    __slots__ = ("eq", "ranges", "prefix", "prefix_lengths", "kind", "exists", "kill")

    def __init__(self) -> None:
        self.eq: dict[Value, set[int]] = {}
        self.ranges: dict[tuple[str, str], _Thresholds] = {}  # (kind, op) -> thresholds
        self.prefix: dict[str, set[int]] = {}
        self.prefix_lengths: Counter[int] = Counter()
        self.kind: dict[str, set[int]] = {}
        self.exists: set[int] = set()
        self.kill: dict[Value, set[int]] = {}

    def empty(self) -> bool:
        return not (self.eq or self.ranges or self.prefix or self.kind or self.exists or self.kill)

    def collect(self, value: Value, kind: str, hits: list[Iterable[int]], killed: list[set[int]]) -> None:
        """Append to ``hits`` the subscriptions whose entries on this attribute ``value`` satisfies."""
        if self.exists:
            hits.append(self.exists)
        same = self.eq.get(value)
        if same:
            hits.append(same)
        if self.kind:
            of_kind = self.kind.get(kind)
            if of_kind:
                hits.append(of_kind)
        if self.ranges:
            for (range_kind, op), th in self.ranges.items():
                if range_kind != kind:
                    continue
                order = th.order
                if op == _GT:  # threshold < value
                    cut = order.bisect_key_left(value)
                    if cut:
                        hits.append(order[:cut])
                elif op == _GE:  # threshold <= value
                    cut = order.bisect_key_right(value)
                    if cut:
                        hits.append(order[:cut])
                elif op == _LT:  # threshold > value
                    cut = order.bisect_key_right(value)
                    if cut < len(order):
                        hits.append(order[cut:])
                else:  # _LE: threshold >= value
                    cut = order.bisect_key_left(value)
                    if cut < len(order):
                        hits.append(order[cut:])
        if self.prefix and kind == STR:
            assert type(value) is str
            prefix = self.prefix
            for length in self.prefix_lengths:
                if length <= len(value):
                    found = prefix.get(value[:length])
                    if found:
                        hits.append(found)
        if self.kill:
            dead = self.kill.get(value)
            if dead:
                killed.append(dead)


class _Entry(NamedTuple):
    """One indexed condition of a subscription: where it lives, to remove it again."""

    attr: str
    where: str  # "eq" "range" "prefix" "kind" "exists" "kill"
    kind: str | None
    op: str | None
    value: Value | None


def _entries(f: Filter) -> tuple[list[_Entry], list[_Entry]] | None:
    """(counted entries, kill entries) of a filter -- see the module docstring -- or None if
    the filter is unsatisfiable."""
    counted: list[_Entry] = []
    kills: list[_Entry] = []
    by_attr: dict[str, list[Predicate]] = {}
    for p in f.predicates:
        by_attr.setdefault(p.attr, []).append(p)
    for preds in by_attr.values():
        if not attribute_satisfiable(preds):
            return None
    for attr, preds in by_attr.items():
        valued = [p for p in preds if p.op != "exists"]
        if not valued:
            counted.append(_Entry(attr, "exists", None, None, None))
            continue
        kind = valued[0].kind
        eq = next((p for p in valued if p.op == "="), None)
        if eq is not None:
            counted.append(_Entry(attr, "eq", kind, "=", eq.value))
            continue
        lower: Predicate | None = None
        upper: Predicate | None = None
        longest: Predicate | None = None
        for p in valued:
            v = p.value
            if p.op in (_GT, _GE):
                if lower is None or v > lower.value or (v == lower.value and p.op == _GT):  # type: ignore[operator]
                    lower = p
            elif p.op in (_LT, _LE):
                if upper is None or v < upper.value or (v == upper.value and p.op == _LT):  # type: ignore[operator]
                    upper = p
            elif p.op == "prefix":
                if longest is None or len(v) > len(longest.value):  # type: ignore[arg-type]
                    longest = p
            elif p.op == "!=":
                kills.append(_Entry(attr, "kill", kind, "!=", v))
        for bound in (lower, upper):
            if bound is not None:
                counted.append(_Entry(attr, "range", kind, bound.op, bound.value))
        if longest is not None:
            counted.append(_Entry(attr, "prefix", STR, "prefix", longest.value))
        if lower is None and upper is None and longest is None:
            counted.append(_Entry(attr, "kind", kind, None, None))
    return counted, kills


@dataclass(slots=True)
class _Sub(Generic[K]):
    key: K
    filter: Filter
    counted: list[_Entry]
    kills: list[_Entry]
    live: bool  # satisfiable, hence indexed


class CountingIndex(Generic[K]):
    """The counting algorithm in pure Python (same interface as `SubscriptionIndex`).

    ``add`` replaces an existing subscription under the same key.  Cost of `match`: the
    publication's attributes times the structures on them, plus the satisfied entries.
    """

    def __init__(self) -> None:
        self._sid_of: dict[K, int] = {}
        self._subs: dict[int, _Sub[K]] = {}
        self._need: dict[int, int] = {}
        self._attrs: dict[str, _AttrIndex] = {}
        self._always: set[int] = set()  # live subscriptions with no entries (the empty filter)
        self._next_sid = 0

    def __len__(self) -> int:
        return len(self._sid_of)

    def __contains__(self, key: object) -> bool:
        return key in self._sid_of

    def __iter__(self) -> Iterator[K]:
        return iter(self._sid_of)

    def get(self, key: K) -> Filter | None:
        sid = self._sid_of.get(key)
        return None if sid is None else self._subs[sid].filter

    def items(self) -> Iterator[tuple[K, Filter]]:
        for sub in self._subs.values():
            yield sub.key, sub.filter

    def add(self, key: K, f: Filter) -> None:
        if not isinstance(f, Filter):
            raise TypeError(f"SubscriptionIndex.add needs a Filter, not {type(f).__name__}")
        if key in self._sid_of:
            self.remove(key)
        sid = self._next_sid
        self._next_sid += 1
        entries = _entries(f)
        live = entries is not None
        counted, kills = entries if entries is not None else ([], [])
        self._sid_of[key] = sid
        self._subs[sid] = _Sub(key, f, counted, kills, live)
        if not live:
            return
        self._need[sid] = len(counted)
        if not counted:
            self._always.add(sid)
        for entry in counted + kills:
            self._place(sid, entry)

    def remove(self, key: K) -> bool:
        """Forget the subscription under ``key``; False if there was none."""
        sid = self._sid_of.pop(key, None)
        if sid is None:
            return False
        sub = self._subs.pop(sid)
        if sub.live:
            del self._need[sid]
            self._always.discard(sid)
            for entry in sub.counted + sub.kills:
                self._unplace(sid, entry)
        return True

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]

    def _place(self, sid: int, e: _Entry) -> None:
        ai = self._attrs.get(e.attr)
        if ai is None:
            ai = self._attrs[e.attr] = _AttrIndex()
        where = e.where
        if where == "eq":
            ai.eq.setdefault(e.value, set()).add(sid)  # type: ignore[arg-type]
        elif where == "range":
            slot = (e.kind, e.op)
            th = ai.ranges.get(slot)  # type: ignore[arg-type]
            if th is None:
                th = ai.ranges[slot] = _Thresholds()  # type: ignore[index]
            th.add(sid, e.value)  # type: ignore[arg-type]
        elif where == "prefix":
            assert type(e.value) is str
            ai.prefix.setdefault(e.value, set()).add(sid)
            ai.prefix_lengths[len(e.value)] += 1
        elif where == "kind":
            ai.kind.setdefault(e.kind, set()).add(sid)  # type: ignore[arg-type]
        elif where == "exists":
            ai.exists.add(sid)
        else:
            ai.kill.setdefault(e.value, set()).add(sid)  # type: ignore[arg-type]

    def _unplace(self, sid: int, e: _Entry) -> None:
        ai = self._attrs[e.attr]
        where = e.where
        if where == "eq":
            _discard(ai.eq, e.value, sid)  # type: ignore[arg-type]
        elif where == "range":
            slot = (e.kind, e.op)
            th = ai.ranges[slot]  # type: ignore[index]
            th.remove(sid)
            if not th:
                del ai.ranges[slot]  # type: ignore[arg-type]
        elif where == "prefix":
            assert type(e.value) is str
            _discard(ai.prefix, e.value, sid)
            ai.prefix_lengths[len(e.value)] -= 1
            if not ai.prefix_lengths[len(e.value)]:
                del ai.prefix_lengths[len(e.value)]
        elif where == "kind":
            _discard(ai.kind, e.kind, sid)  # type: ignore[arg-type]
        elif where == "exists":
            ai.exists.discard(sid)
        else:
            _discard(ai.kill, e.value, sid)  # type: ignore[arg-type]
        if ai.empty():
            del self._attrs[e.attr]

    def match(self, pub: Publication) -> set[K]:
        """The keys of the subscriptions ``pub`` matches (exactly those `Filter.matches` accepts)."""
        hits: list[Iterable[int]] = []
        killed: list[set[int]] = []
        attrs = self._attrs
        for attr, value in pub.items():
            ai = attrs.get(attr)
            if ai is None:
                continue
            kind = kind_of(value)
            if kind is None:  # not a value: only `exists` holds
                if ai.exists:
                    hits.append(ai.exists)
                continue
            ai.collect(value, kind, hits, killed)
        counts: Counter[int] = Counter()
        for group in hits:
            counts.update(group)
        need = self._need
        found = [sid for sid, n in counts.items() if n == need[sid]]
        found.extend(self._always)
        if killed:
            dead = set().union(*killed)
            found = [sid for sid in found if sid not in dead]
        subs = self._subs
        return {subs[sid].key for sid in found}

    def overlapping(self, adv: Filter) -> set[K]:
        """The keys of the subscriptions that overlap advertisement ``adv`` (a scan)."""
        attrs = adv.attributes
        return {
            sub.key
            for sub in self._subs.values()
            if sub.live and sub.filter.attributes <= attrs and overlaps(adv, sub.filter)
        }


def _discard(table: dict, key: object, sid: int) -> None:
    members = table.get(key)
    if members is not None:
        members.discard(sid)
        if not members:
            del table[key]


class LinearIndex(Generic[K]):
    """The same interface as `SubscriptionIndex`, by scanning every subscription (the baseline)."""

    def __init__(self) -> None:
        self._filters: dict[K, Filter] = {}

    def __len__(self) -> int:
        return len(self._filters)

    def __contains__(self, key: object) -> bool:
        return key in self._filters

    def add(self, key: K, f: Filter) -> None:
        self._filters[key] = f

    def remove(self, key: K) -> bool:
        return self._filters.pop(key, None) is not None

    def get(self, key: K) -> Filter | None:
        return self._filters.get(key)

    def match(self, pub: Publication) -> set[K]:
        return {key for key, f in self._filters.items() if f.matches(pub)}

    def overlapping(self, adv: Filter) -> set[K]:
        return {key for key, f in self._filters.items() if overlaps(adv, f)}


# --------------------------------------------------------------------------- vectorised index

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
_CODE_LOW = -(2**62)
_CODE_HIGH = 2**62
_CODE_STEP = 2**32
_KIND_CODE = {NUM: 1, STR: 2}


class _OrderCodes:
    """Order-preserving int64 codes for a changing set of distinct values (order maintenance).

    A new value gets a code between its neighbours' (the midpoint, or a fixed step past the
    first/last); when no integer is free there, every value is relabelled evenly and the owner
    recodes its slots.  Equal values (``1`` and ``1.0``) share one code.
    """

    __slots__ = ("values", "code", "refs", "relabels")

    def __init__(self) -> None:
        self.values = SortedList()
        self.code: dict[Value, int] = {}
        self.refs: dict[Value, int] = {}
        self.relabels = 0

    def __len__(self) -> int:
        return len(self.values)

    def acquire(self, value: Value) -> bool:
        """Count one more use of ``value``; True if all codes changed (a relabelling)."""
        if value in self.refs:
            self.refs[value] += 1
            return False
        values = self.values
        values.add(value)
        self.refs[value] = 1
        at = values.index(value)
        lo = self.code[values[at - 1]] if at > 0 else None
        hi = self.code[values[at + 1]] if at + 1 < len(values) else None
        code: int | None
        if lo is None and hi is None:
            code = 0
        elif hi is None:
            code = lo + _CODE_STEP if lo + _CODE_STEP < _CODE_HIGH else None  # type: ignore[operator]
        elif lo is None:
            code = hi - _CODE_STEP if hi - _CODE_STEP > _CODE_LOW else None
        else:
            code = (lo + hi) // 2 if hi - lo >= 2 else None
        if code is not None:
            self.code[value] = code
            return False
        # Spread over the middle half of the range, leaving room to append at both ends.
        step = (_CODE_HIGH - _CODE_LOW) // 2 // (len(values) + 1)
        base = _CODE_LOW // 2
        self.code = {v: base + step * (i + 1) for i, v in enumerate(values)}
        self.relabels += 1
        return True

    def release(self, value: Value) -> None:
        left = self.refs[value] - 1
        if left:
            self.refs[value] = left
            return
        del self.refs[value]
        del self.code[value]
        self.values.remove(value)


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
        self.sentinel = _I64_MIN if op in (_GT, _GE) else _I64_MAX
        self.codes = np.full(capacity, self.sentinel, dtype=np.int64)
        self.order = _OrderCodes()
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
        if op == _GT or op == _GE:
            at = values.bisect_left(value) if op == _GT else values.bisect_right(value)
            if at == len(values):
                return  # every threshold passes
            np.less(self.codes[:n], self.order.code[values[at]], out=tmp)
        else:
            at = values.bisect_right(value) if op == _LT else values.bisect_left(value)
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
    entries: list[_Entry]


class SubscriptionIndex(Generic[K]):
    """Subscriptions under caller-chosen keys; `match` finds exactly those a publication matches.

    The conditions of every subscription (normalised as in the module docstring) are stored as
    columns over subscription *slots* (numpy arrays): per attribute, a code for its ``=`` value,
    one for its longest prefix, one per bound type whose codes preserve the order of the
    thresholds, and a has-this-attribute flag.  Matching a publication is a handful of
    vectorised comparisons per attribute it carries (a bisection finds the boundary code of
    each bound type), an AND across them, and a count check that the subscription constrains
    no attribute the publication lacks.  Nothing is evaluated per subscription in Python.

    ``add`` replaces an existing subscription under the same key.  Adding and removing cost
    O(conditions x log n) (amortised; a relabelling of one bound type's codes is O(n)).
    """

    def __init__(self, capacity: int = 64) -> None:
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
        self.__init__()  # type: ignore[misc]

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
        entries = _entries(f)
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

    def _place(self, slot: int, e: _Entry) -> None:
        attr = self._attrs[e.attr]
        where = e.where
        if where != "exists":
            attr.valued[slot] = True
        if where == "eq":
            attr.eqcode[slot] = attr.eq.acquire(e.value)  # type: ignore[arg-type]
        elif where == "range":
            key = (e.kind, e.op)
            r = attr.ranges.get(key)  # type: ignore[arg-type]
            if r is None:
                r = attr.ranges[key] = _VRange(e.op, self._capacity)  # type: ignore[index, arg-type]
            r.add(slot, e.value)  # type: ignore[arg-type]
        elif where == "prefix":
            assert type(e.value) is str
            attr.prefcode[slot] = attr.prefix.acquire(e.value)
            attr.prefix_lengths[len(e.value)] += 1
        elif where == "kind":
            attr.kindcode[slot] = _KIND_CODE[e.kind]  # type: ignore[index]
            attr.n_kind += 1
        elif where == "kill":
            attr.kill.setdefault(e.value, set()).add(slot)  # type: ignore[arg-type]

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

    def _unplace(self, slot: int, e: _Entry) -> None:
        attr = self._attrs[e.attr]
        where = e.where
        if where == "eq":
            attr.eqcode[slot] = -1
            attr.eq.release(e.value)  # type: ignore[arg-type]
        elif where == "range":
            key = (e.kind, e.op)
            r = attr.ranges[key]  # type: ignore[index]
            r.remove(slot)
            if not r.value_of:
                del attr.ranges[key]  # type: ignore[arg-type]
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
            _discard(attr.kill, e.value, slot)

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
        return {key_of[slot] for slot in np.flatnonzero(cand).tolist()}  # type: ignore[misc]

    def overlapping(self, adv: Filter) -> set[K]:
        """The keys of the subscriptions that overlap advertisement ``adv`` (a scan)."""
        names = adv.attributes
        return {
            key
            for key, sub in self._subs.items()
            if sub.slot is not None and sub.filter.attributes <= names and overlaps(adv, sub.filter)
        }
