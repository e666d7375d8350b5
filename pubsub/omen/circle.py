"""The identifier circle (paper 003 §3.3): every node has a place on a circle, by the hash
of its reference, and with it an immediate predecessor and successor.  A churn event at
node v' is coordinated by v''s closest live successor; it is announced to v''s L successors
(the L-successor range), and each node keeps the views of its L predecessors (its
L-predecessor range).

Positions are xxh3-64 of the reference (a DHT's consistent hashing, which paper 003 assumes
and does not specify); two references with one hash are ordered by the reference, so the
circle is a total order.  Tests may give positions of their own (``position=``), e.g. the
node numbers of §4.4's example.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable

import xxhash

Node = str


def hashed(ref: Node) -> int:
    """A reference's place on the circle."""
    return xxhash.xxh3_64_intdigest(ref.encode())


class Circle:
    """The live members in circle order (the supervisor's copy stands in for the DHT)."""

    def __init__(self, members: Iterable[Node] = (), position: Callable[[Node], int] = hashed) -> None:
        self._position = position
        self._keys: list[tuple[int, Node]] = []
        for member in members:
            self.add(member)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, node: object) -> bool:
        return isinstance(node, str) and self._index(node) is not None

    def members(self) -> list[Node]:
        return [node for _, node in self._keys]

    def add(self, node: Node) -> None:
        key = (self._position(node), node)
        i = bisect.bisect_left(self._keys, key)
        if i == len(self._keys) or self._keys[i] != key:
            self._keys.insert(i, key)

    def remove(self, node: Node) -> None:
        i = self._index(node)
        if i is not None:
            del self._keys[i]

    def _index(self, node: Node) -> int | None:
        key = (self._position(node), node)
        i = bisect.bisect_left(self._keys, key)
        return i if i < len(self._keys) and self._keys[i] == key else None

    def _around(self, node: Node, count: int, step: int) -> list[Node]:
        """Up to `count` members after (step 1) or before (step -1) `node`'s place, nearest
        first; `node` need not be a member (a departed node's successors)."""
        if not self._keys:
            return []
        key = (self._position(node), node)
        start = bisect.bisect_right(self._keys, key) if step > 0 else bisect.bisect_left(self._keys, key) - 1
        found: list[Node] = []
        n = len(self._keys)
        for k in range(n):
            candidate = self._keys[(start + step * k) % n][1]
            if candidate == node or candidate in found:
                continue
            found.append(candidate)
            if len(found) == count:
                break
        return found

    def successors(self, node: Node, count: int) -> list[Node]:
        """`node`'s L-successor range (count = L), nearest first."""
        return self._around(node, count, 1)

    def predecessors(self, node: Node, count: int) -> list[Node]:
        """`node`'s L-predecessor range (count = L), nearest first (getPreds, Alg. 6)."""
        return self._around(node, count, -1)

    def coordinator(self, node: Node) -> Node | None:
        """The coordinator of a churn event at `node`: its immediate live successor."""
        found = self.successors(node, 1)
        return found[0] if found else None
