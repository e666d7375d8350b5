"""Duplicate-free dissemination over a skip ring: the arc broadcast and the distance it uses.

Flooding (paper 000, §4.3) sends every new publication over every ring and shortcut edge:
about the sum of all degrees per publication, most of it duplicates.  The *arc broadcast*
(in the manner of El-Ansary et al., "Efficient Broadcast in Structured P2P Networks") sends
it over a spanning tree instead, n - 1 messages in a legitimate ring:

* Every node is responsible for an *arc* of the ring, a clockwise interval of positions
  [start, end).  The publisher's arc is the whole ring but itself.
* A node splits its arc among the neighbours that lie inside it (`split_arc`): sorted
  clockwise, each neighbour gets the piece of the arc around it up to a *boundary* between
  it and the next neighbour, and forwards only inside that piece.
* In a legitimate ring every node's ring successor and predecessor are neighbours, so no
  node lies between a node and its nearest neighbour on either side; the pieces therefore
  partition the arc's nodes, each node receives the publication exactly once, and every node
  of the arc is reached.  Where the boundaries fall does not matter for that, only for how
  deep the tree is.

Where the boundaries fall.  Splitting at the next neighbour (El-Ansary's clockwise arcs)
or at midpoints gives trees about twice as deep as the ring's diameter: a node with a long
label has only short edges, so a far piece must first climb to a node with a short label.
Here a boundary between neighbours a and b is where the skip-ring *distance* from b becomes
smaller than from a, so each node's piece is the part of the arc it reaches in the fewest
hops.  The distance is exact and cheap (`skip_distance`): in SR(n) the node at position
p / 2^k (labels of at most k bits; p != 0) has edges to p +- 2^j for every j <= v2(p), the
number of trailing zero bits of p (ring edges are j = 0, the shortcuts of §3.2.2 the rest;
p = 0 has every j < k).  A shortest path climbs (each hop adds +-2^v2, clearing the lowest
set bit, the carry possibly clearing more) to an apex z, then descends to the target; the
fewest hops from a to z is a minimum over signed-digit representations, computed bit by
bit with a carry (`_climbs`), and the distance is the minimum over apexes z = multiples of
2^s of the two climbs.  Tests check it against breadth-first search over the independent
oracle's SR(n) (`tests/checker.py`) and that the resulting trees are exactly as deep as the
publisher's eccentricity, which is at most about log2 n.

Positions travel as integers in units of 2^-64 (`POSITION_BITS`), exact for every label;
distances are computed at the ring's top level k (`levels`, the longest label a node knows
of), on positions rounded down to that resolution.  A node with a label longer than the
resolution only makes the tree less shallow, never incorrect.

Outside legitimate states nothing here is trusted to deliver: anti-entropy (§4.2) remains
the guarantee, and the receiver of an arc that does not contain its own position falls back
to flooding for that publication (`pubsub.publications.dissemination`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from pubsub.kernel.message import Ref

#: Resolution of a position on the wire: units of 2^-64 of the ring (the skip ring's labels
#: have at most as many bits, so each label is a position, `pubsub.skipring.overlay`).
POSITION_BITS = 64
RING = 1 << POSITION_BITS
_INF = 1 << 30


def in_arc(point: int, start: int, end: int) -> bool:
    """Whether `point` lies in the clockwise arc [start, end) (empty when start == end)."""
    return (point - start) % RING < (end - start) % RING


class ArcView(NamedTuple):
    """What a node knows that the arc broadcast needs: its own position, the positions of
    its neighbours (ring and shortcuts), the longest label among them (`levels`), and
    whether it knows a ring successor (without one, arcs cannot be trusted to it)."""

    me: int
    levels: int
    neighbours: tuple[tuple[int, Ref], ...]
    has_successor: bool


def origin_arc(me: int) -> tuple[int, int]:
    """The publisher's arc: the whole ring but its own position."""
    return (me + 1) % RING, me


class Piece(NamedTuple):
    """One neighbour's share of an arc: forward to `ref`, responsible for [start, end)."""

    ref: Ref
    start: int
    end: int


@lru_cache(maxsize=1 << 14)
def _climbs(p: int, k: int) -> tuple[tuple[int, int], ...]:
    """For s = 0..k: (fewest hops clearing bits 0..s-1 of p with no carry into bit s, the
    same with a carry).  A hop adds or subtracts 2^(lowest set bit): a set bit (with the
    incoming carry) is cleared by -1 (no carry on) or by +1 (carry on); a 0 or a 2 needs no
    hop."""
    row = (0, _INF)
    table = [row]
    for i in range(k):
        bit = (p >> i) & 1
        no_carry = carry = _INF
        for incoming, cost in ((0, row[0]), (1, row[1])):
            if cost >= _INF:
                continue
            value = bit + incoming
            if value == 0:
                no_carry = min(no_carry, cost)
            elif value == 2:
                carry = min(carry, cost)
            else:
                no_carry = min(no_carry, cost + 1)
                carry = min(carry, cost + 1)
        row = (no_carry, carry)
        table.append(row)
    return tuple(table)


def skip_distance(a: int, b: int, k: int) -> int:
    """Hops between positions a and b (units of 2^-k, 0 <= a, b < 2^k) in the skip ring
    whose labels have at most k bits (see the module docstring)."""
    if a == b:
        return 0
    mask = (1 << k) - 1
    ca, cb = _climbs(a, k), _climbs(b, k)
    best = _INF
    for s in range(k + 1):
        ra, rb = ca[s], cb[s]
        if min(ra) + min(rb) >= best:
            continue
        high_a, high_b = a >> s, b >> s
        for x in (0, 1):
            for y in (0, 1):
                cost = ra[x] + rb[y]
                if cost < best and ((high_a + x) << s) & mask == ((high_b + y) << s) & mask:
                    best = cost
    return best


def split_arc(
    me: int, start: int, end: int, neighbours: Sequence[tuple[int, Ref]], levels: int
) -> list[Piece]:
    """The pieces of the arc [start, end) for the neighbours inside it (positions in units
    of 2^-64; `levels` the top label length for the distances).

    Sorted clockwise from `start`, consecutive points (the neighbours, and `me` when it lies
    in the arc) share the stretch between them at the first position where the later one is
    strictly closer (`skip_distance`); nothing lies between `me` and its nearest neighbours,
    so those boundaries sit right after `me`.  The first point takes the stretch before it,
    the last the stretch after it.  Deterministic: the same arc and neighbours always give
    the same pieces.
    """
    length = (end - start) % RING
    shift = POSITION_BITS - levels
    points: dict[int, Ref | None] = {}
    for pos, ref in neighbours:
        if (pos - start) % RING < length and pos != me:
            points.setdefault((pos - start) % RING, ref)
    if not points:
        return []
    mine = (me - start) % RING
    if mine < length:
        points[mine] = None
    order = sorted(points)
    bounds = [0]
    for a, b in zip(order, order[1:], strict=False):
        if points[a] is None:
            bounds.append(a + 1)
        elif points[b] is None:
            bounds.append(b)
        else:
            bounds.append(_boundary(start, a, b, shift, levels))
    bounds.append(length)
    out: list[Piece] = []
    for i, offset in enumerate(order):
        holder = points[offset]
        if holder is not None:
            out.append(Piece(holder, (start + bounds[i]) % RING, (start + bounds[i + 1]) % RING))
    return out


@lru_cache(maxsize=1 << 12)
def pieces(view: ArcView, start: int, end: int, levels: int) -> tuple[Piece, ...]:
    """`split_arc` for a node's view, longest piece first, memoized: a node forwards every
    publication of one publisher down the same arc, so the split is computed once per arc
    and neighbourhood.  The longest piece holds the most nodes and the deepest subtree;
    sent first, it starts first (a node's sends leave one by one)."""
    split = split_arc(view.me, start, end, view.neighbours, max(levels, view.levels))
    return tuple(sorted(split, key=lambda piece: (piece.end - piece.start) % RING, reverse=True))


def _boundary(start: int, a: int, b: int, shift: int, levels: int) -> int:
    """The first offset in (a, b] (from `start`) at which b is strictly closer than a, at
    the resolution of `levels` bits (binary search; the nodes between a and b, which the
    resolution distinguishes, go to the nearer of the two)."""
    mask = (1 << levels) - 1
    pa = ((start + a) % RING) >> shift
    pb = ((start + b) % RING) >> shift
    steps = (pb - pa) & mask  # grid steps from a to b
    if steps <= 1:
        return b
    lo, hi = 1, steps  # b is closer at `steps` (distance 0)
    while lo < hi:
        mid = (lo + hi) // 2
        w = (pa + mid) & mask
        if skip_distance(pb, w, levels) < skip_distance(pa, w, levels):
            hi = mid
        else:
            lo = mid + 1
    boundary = (((pa + lo) & mask) << shift) - start
    return max(a + 1, min(b, boundary % RING))
