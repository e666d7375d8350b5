"""Interval broadcast over the skip ring: n - 1 transmissions per publication.

The paper's PublishNew (§4.3) floods a fresh publication over every ring and shortcut edge,
so each node receives it about once per neighbour and drops all but the first copy.  The
ring's own order gives a duplicate-free spread instead (the interval broadcast of
El-Ansary et al., "Efficient Broadcast in Structured P2P Networks", applied to r(label)):

* a node responsible for the open arc (me, limit) -- clockwise from its own label up to,
  not including, `limit` -- sorts those of its neighbours that lie inside the arc
  clockwise from itself, n_1 < n_2 < ... < n_k;
* it hands n_i the arc [n_i, n_{i+1}) (n_k gets [n_k, limit)), and n_i repeats the rule for
  (n_i, limit_i);
* the publisher starts with limit = its own label: the whole ring but itself.

In a legitimate skip ring every node's ring successor is a neighbour, so n_1 is the
successor and the sub-arcs partition (me, limit): every member receives the publication
exactly once, n - 1 transmissions in all, and the shortcuts (§3.2.2: on level i a node is
linked to its level-i ring neighbours, about 2^-i away) halve the arcs, so the depth is
O(log n).

Nothing here decides what happens when the ring is not legitimate; `arc_is_consistent`
lets the caller notice that a received arc does not fit (the receiver's label is not
where the sender believed it is) and fall back to flooding for that publication, while
anti-entropy (Alg. 5) remains the guarantee that every member eventually holds it.
"""

from __future__ import annotations

from collections.abc import Iterable

from pubsub.kernel.message import Ref
from pubsub.skipring.labels import Label


def in_arc(label: Label, start: Label, end: Label) -> bool:
    """Whether `label` lies strictly inside the clockwise arc (start, end).

    The arc wraps past 1 ≡ 0 when end <= start; (x, x) is the whole ring except x.
    """
    if start < end:
        return start < label < end
    return label > start or label < end


def _clockwise_key(me: Label, label: Label) -> tuple[int, Label]:
    """Sort key: labels after `me` first (ascending), then the wrapped ones."""
    return (0 if label > me else 1, label)


def interval_targets(
    me: Label, limit: Label, neighbours: Iterable[tuple[Label, Ref]]
) -> list[tuple[Ref, Label]]:
    """The (neighbour, its limit) pairs to which a node responsible for (me, limit) sends.

    `neighbours` are the node's ring and shortcut contacts as (label, reference); a
    neighbour outside the arc gets nothing, and one reference seen under several labels is
    used at its first label in clockwise order.
    """
    ordered = sorted(
        ((label, ref) for label, ref in neighbours if in_arc(label, me, limit)),
        key=lambda item: _clockwise_key(me, item[0]),
    )
    first: dict[Ref, Label] = {}
    for label, ref in ordered:
        first.setdefault(ref, label)
    inside = list(first.items())  # in clockwise order, one label per reference
    targets: list[tuple[Ref, Label]] = []
    for i, (ref, _) in enumerate(inside):
        end = inside[i + 1][1] if i + 1 < len(inside) else limit
        targets.append((ref, end))
    return targets


def arc_is_consistent(me: Label | None, start: Label, limit: Label) -> bool:
    """Whether a receiver labelled `me` may trust the arc [start, limit) it was handed.

    `start` is the label the sender believes the receiver has.  False when the receiver
    has no label yet, holds another label than the sender believes, or is handed itself
    as the limit (that would be the whole ring again): the sender's view of the ring
    disagrees with the receiver's.
    """
    return me is not None and me == start and limit != me
