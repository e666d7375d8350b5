"""`CountingIndex`: the classic *counting algorithm* of content-based brokers, in pure Python.

Per attribute, a hash map for ``=``, sorted threshold lists for bounds, a prefix map, kind and
exists sets (over the normalised conditions of `broker.cores.matching.conditions`); each
satisfied condition increments its subscription's counter, and a subscription matches when its
counter reaches its number of conditions.  Its cost grows with the number of satisfied
conditions, which for broad predicates approaches a scan.  The brokers use
`broker.cores.matching.vectorised.SubscriptionIndex`; this one is its reference and rival in
the tests and in ``python -m bench matching``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from sortedcontainers import SortedKeyList

from broker.cores.language.filters import Filter
from broker.cores.language.relations import overlaps
from broker.cores.language.values import STR, Publication, Value, kind_of
from broker.cores.matching.conditions import GE, GT, LT, Entry, discard, normalise

K = TypeVar("K", bound=Hashable)


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
                if op == GT:  # threshold < value
                    cut = order.bisect_key_left(value)
                    if cut:
                        hits.append(order[:cut])
                elif op == GE:  # threshold <= value
                    cut = order.bisect_key_right(value)
                    if cut:
                        hits.append(order[:cut])
                elif op == LT:  # threshold > value
                    cut = order.bisect_key_right(value)
                    if cut < len(order):
                        hits.append(order[cut:])
                else:  # LE: threshold >= value
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


@dataclass(slots=True)
class _Sub(Generic[K]):
    key: K
    filter: Filter
    counted: list[Entry]
    kills: list[Entry]
    live: bool  # satisfiable, hence indexed


class CountingIndex(Generic[K]):
    """The counting algorithm in pure Python (same interface as `SubscriptionIndex`).

    ``add`` replaces an existing subscription under the same key.  Cost of `match`: the
    publication's attributes times the structures on them, plus the satisfied entries.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """The state of a new index."""
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
        entries = normalise(f)
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
        """Forget every subscription (the state of a new index)."""
        self._reset()

    def _place(self, sid: int, e: Entry) -> None:
        ai = self._attrs.get(e.attr)
        if ai is None:
            ai = self._attrs[e.attr] = _AttrIndex()
        where = e.where
        if where == "eq":
            ai.eq.setdefault(e.operand, set()).add(sid)
        elif where == "range":
            slot = e.bound
            th = ai.ranges.get(slot)
            if th is None:
                th = ai.ranges[slot] = _Thresholds()
            th.add(sid, e.operand)
        elif where == "prefix":
            assert type(e.value) is str
            ai.prefix.setdefault(e.value, set()).add(sid)
            ai.prefix_lengths[len(e.value)] += 1
        elif where == "kind":
            ai.kind.setdefault(e.value_kind, set()).add(sid)
        elif where == "exists":
            ai.exists.add(sid)
        else:
            ai.kill.setdefault(e.operand, set()).add(sid)

    def _unplace(self, sid: int, e: Entry) -> None:
        ai = self._attrs[e.attr]
        where = e.where
        if where == "eq":
            discard(ai.eq, e.value, sid)
        elif where == "range":
            slot = e.bound
            th = ai.ranges[slot]
            th.remove(sid)
            if not th:
                del ai.ranges[slot]
        elif where == "prefix":
            assert type(e.value) is str
            discard(ai.prefix, e.value, sid)
            ai.prefix_lengths[len(e.value)] -= 1
            if not ai.prefix_lengths[len(e.value)]:
                del ai.prefix_lengths[len(e.value)]
        elif where == "kind":
            discard(ai.kind, e.kind, sid)
        elif where == "exists":
            ai.exists.discard(sid)
        else:
            discard(ai.kill, e.value, sid)
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
