"""The ideal skip ring of a member set, and how far a reported node state is from it.

Paper 000, §2.1 (Definition 2.1): the members of a topic, sorted by r(label), form a ring
(ring edges join consecutive members, the minimum and the maximum close the cycle), and for
every level i below the longest label length L the members whose label has at most i bits
(K_i) form their own sorted cycle, whose edges are the shortcuts of level i.

The state a node stores (and reports in `snapshot` events, docs/events.md) is split the way
`pubsub.skipring.buildsr` splits it: ``left`` / ``right`` are the linear neighbours in the order by
r (the minimum has no left, the maximum no right), ``ring`` is the edge that closes the
cycle (held only by the two extremes), and ``shortcuts`` maps a label to the node holding
it.  A shortcut target is a K_i-cycle neighbour, for some level i at or above the node's
own label length, that is not already the node's ring predecessor on the left side or its
ring successor on the right side.

Everything here is pure Python over plain values (a core: no I/O) so the Spark job can run
it in its Python workers (`pubsub.ops.analysis`), the daemons may use it too, and the tests
can compare it with the independent oracle ``tests/checker.py``.
Ordering uses `pubsub.skipring.labels.Label` (exact integer arithmetic); members that share a label
are ordered by reference so that the ring is still defined (such a state is never
legitimate, but the fraction of correct edges stays meaningful).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from pubsub.skipring.labels import Label, LabelError, label_bits

#: A contact as stored by a node: (label bits, node reference).
Contact = tuple[str, str]
#: Stand-in for a contact that is present in a report but malformed: it never matches.
MALFORMED: Contact = ("<malformed>", "<malformed>")


@dataclass(frozen=True)
class IdealNode:
    """The explicit state one member holds in the ideal skip ring."""

    label: str
    left: Contact | None
    right: Contact | None
    ring: Contact | None
    shortcuts: Mapping[str, str] = field(default_factory=dict)

    def neighbours(self) -> set[str]:
        """Distinct references among left, right, ring and the shortcut targets."""
        refs = {c[1] for c in (self.left, self.right, self.ring) if c is not None}
        refs.update(self.shortcuts.values())
        return refs


@dataclass(frozen=True)
class NodeView:
    """What one node reported for one topic, normalised (see `from_report`)."""

    ref: str
    label: str | None
    left: Contact | None
    right: Contact | None
    ring: Contact | None
    shortcuts: Mapping[str, str | None]
    trie_root: str | None

    @staticmethod
    def from_report(
        ref: str,
        label: object,
        left: object,
        right: object,
        ring: object,
        shortcuts: object,
        trie_root: object,
    ) -> NodeView:
        """Build a view from the JSON-ish fields of a snapshot, never raising.

        A contact must be a two-element sequence of strings; anything else present becomes
        `MALFORMED` (it counts as a wrong edge).  Shortcut keys are stringified; a value
        that is not a string or null counts as an unknown holder (None).
        """
        table: dict[str, str | None] = {}
        if isinstance(shortcuts, Mapping):
            for key, value in shortcuts.items():
                table[str(key)] = value if isinstance(value, str) else None
        return NodeView(
            ref=ref,
            label=label if isinstance(label, str) else None,
            left=_contact(left),
            right=_contact(right),
            ring=_contact(ring),
            shortcuts=table,
            trie_root=trie_root if isinstance(trie_root, str) else None,
        )

    @staticmethod
    def from_fields(ref: str, fields: Mapping[str, object], trie_root: object = None) -> NodeView:
        """`from_report` of a node's ``label``, ``left``, ``right``, ``ring`` and ``shortcuts``
        as a status entry or a snapshot names them, never raising."""
        return NodeView.from_report(
            ref, fields.get("label"), fields.get("left"), fields.get("right"), fields.get("ring"),
            fields.get("shortcuts"), trie_root,
        )

    def neighbours(self) -> set[str]:
        """Distinct references this node stores (its degree is the size), itself excluded."""
        refs = {
            c[1] for c in (self.left, self.right, self.ring) if c is not None and c is not MALFORMED
        }
        refs.update(v for v in self.shortcuts.values() if v is not None)
        refs.discard(self.ref)
        return refs


def _contact(value: object) -> Contact | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and len(value) == 2:
        bits, ref = value
        if isinstance(bits, str) and isinstance(ref, str):
            return (bits, ref)
    return MALFORMED


@lru_cache(maxsize=4096)
def parse_label(bits: str) -> Label | None:
    """The label, or None when the bit string is not a well-formed label."""
    try:
        return Label(bits)
    except LabelError:
        return None


def is_canonical(labels: Iterable[str | None]) -> bool:
    """True when the labels are exactly l(0), ..., l(n-1), each once (Definition 2.1)."""
    given = list(labels)
    if any(bits is None for bits in given):
        return False
    return sorted(given) == sorted(label_bits(x) for x in range(len(given)))  # type: ignore[type-var]


def ring_order(members: Mapping[str, str]) -> list[str]:
    """Member references sorted by (r(label), label length, reference).

    Members whose label is malformed are left out: they have no place on the ring.
    """
    placed = [(parse_label(bits), ref) for ref, bits in members.items()]
    return [ref for label, ref in sorted((p for p in placed if p[0] is not None), key=_key)]


def _key(item: tuple[Label | None, str]) -> tuple[Label, str]:
    label, ref = item
    assert label is not None
    return (label, ref)


def ideal_ring(members: Mapping[str, str]) -> dict[str, IdealNode]:
    """The ideal explicit state of every member of the skip ring over ``members``.

    ``members`` maps a node reference to its label bit string.  Members with a malformed
    label are absent from the result.  Runs in O(n * L) for the longest label length L.
    """
    order = ring_order(members)
    n = len(order)
    if n == 0:
        return {}
    labels = {ref: members[ref] for ref in order}
    top = max(len(bits) for bits in labels.values())

    # Candidates per side, collected level by level: a member of K_i sees its two
    # neighbours on the sorted cycle of K_i (Definition 2.1, E_S).
    from_left: dict[str, set[str]] = {ref: set() for ref in order}
    from_right: dict[str, set[str]] = {ref: set() for ref in order}
    for level in range(1, top):
        cycle = [ref for ref in order if len(labels[ref]) <= level]
        size = len(cycle)
        if size < 2:
            continue
        for j, ref in enumerate(cycle):
            from_left[ref].add(cycle[j - 1])
            from_right[ref].add(cycle[(j + 1) % size])

    ideal: dict[str, IdealNode] = {}
    for p, ref in enumerate(order):
        before = order[p - 1]  # cyclic predecessor (the maximum for p == 0)
        after = order[(p + 1) % n]  # cyclic successor (the minimum for the last one)
        targets = (from_left[ref] - {before}) | (from_right[ref] - {after})
        targets.discard(ref)
        ring: Contact | None = None
        if n > 1 and p == 0:
            ring = (labels[order[-1]], order[-1])
        elif n > 1 and p == n - 1:
            ring = (labels[order[0]], order[0])
        ideal[ref] = IdealNode(
            label=labels[ref],
            left=(labels[before], before) if p > 0 else None,
            right=(labels[after], after) if p < n - 1 else None,
            ring=ring,
            shortcuts={labels[t]: t for t in targets},
        )
    return ideal


def edge_score(want: IdealNode | None, got: NodeView) -> tuple[int, int]:
    """(correct, compared) edge slots of one member's reported state.

    A slot is left, right, ring, or one shortcut label.  A slot is compared when the ideal
    or the report fills it; it is correct when both hold the same (label, reference).  A
    member absent from the ideal ring (malformed or missing label) has every reported slot
    wrong.  ``correct == compared`` iff the member's edges are exactly the ideal ones.
    """
    correct = 0
    compared = 0
    for name in ("left", "right", "ring"):
        have: Contact | None = getattr(got, name)
        expect: Contact | None = None if want is None else getattr(want, name)
        if have is None and expect is None:
            continue
        compared += 1
        if have is not None and have == expect:
            correct += 1
    expected_table: Mapping[str, str] = {} if want is None else want.shortcuts
    for bits in set(expected_table) | set(got.shortcuts):
        compared += 1
        holder = got.shortcuts.get(bits)
        if holder is not None and holder == expected_table.get(bits):
            correct += 1
    return correct, compared


def node_exact(want: IdealNode | None, got: NodeView) -> bool:
    """True when the member holds exactly its ideal label and edges."""
    if want is None or got.label != want.label:
        return False
    correct, compared = edge_score(want, got)
    return correct == compared


def is_legitimate(views: Mapping[str, NodeView]) -> bool:
    """Legitimacy of one topic from its members' reported states (pure reference version).

    Legitimate means: at least one member, labels exactly l(0..n-1), every member's edges
    equal its ideal ones, and all members report the same trie root.  The streaming scan in
    `pubsub.ops.analysis.timeline` computes the same incrementally.
    """
    if not views:
        return False
    if not is_canonical(v.label for v in views.values()):
        return False
    if len({v.trie_root for v in views.values()}) > 1:
        return False
    ideal = ideal_ring({ref: v.label for ref, v in views.items() if v.label is not None})
    return all(node_exact(ideal.get(ref), v) for ref, v in views.items())
