"""An independent oracle for the skip ring SR(n) (paper 000, §2.1 and §3.2.2).

The tests use this module to decide whether a running system is *exactly* the skip ring
over a given membership.  It deliberately shares nothing with the protocol's own shortcut
code (``pubsub.skipring.buildsr``): the ideal state of every node is derived straight from the
definition of the graph, level by level, using plain ``Fraction`` arithmetic.  The only
thing borrowed from the project is ``pubsub.skipring.labels.Label``, and only to validate that a
bit string is a well-formed label.

Vocabulary used below:

* ``members`` maps a node reference (e.g. ``"127.0.0.1:7001"``) to its label bit string.
* A *contact* is a pair ``(label_bits, ref)``.
* The *ideal state* of a node is a dict with keys ``label``, ``left``, ``right``, ``ring``
  (contacts or ``None``) and ``shortcuts`` (``{label_bits: ref}``).
* A *reported state* has the same keys, but contacts are ``[bits, ref]`` lists, shortcut
  refs may be ``None`` (label known, node not yet found) and ``label`` may be ``None``.

How the ideal is built:

* Members are sorted by ``r(label)`` (ties, which never occur among distinct images of
  ``l``, are broken by label length).  ``left``/``right`` are the linear predecessor and
  successor in that order; the extreme nodes additionally hold ``ring``, an edge to the
  opposite extreme that closes the cycle.
* Let ``L`` be the longest label length present and ``K_i`` the members whose label has at
  most ``i`` bits.  A node with a ``k``-bit label looks, for every level ``i`` in
  ``k .. L-1``, at its two neighbours on the sorted cycle formed by ``K_i``.  Neighbours
  reached going left form the left-side shortcut set, those reached going right the
  right-side set; the node's cyclic ring predecessor is removed from the left set, its
  cyclic ring successor from the right set, and the node itself never counts.  The union
  of both sets is the node's shortcut table.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from pubsub.skipring.labels import Label, label_bits

#: A contact as the ideal state stores it: (label bits, node reference).
Contact = tuple[str, str]
#: The ideal state of one node (see the module docstring for the keys).
NodeState = dict[str, Any]

#: The keys every node state (ideal or reported) carries.
STATE_KEYS: tuple[str, ...] = ("label", "left", "right", "ring", "shortcuts")
#: The keys whose value is a single contact.
CONTACT_KEYS: tuple[str, ...] = ("left", "right", "ring")


# --------------------------------------------------------------------------------------
# label arithmetic (own Fractions; Label is used only to validate the bit string)
# --------------------------------------------------------------------------------------
def _validate(bits: str) -> str:
    """Return ``bits`` unchanged, raising ``LabelError`` if it is not a well-formed label."""
    Label(bits)
    return bits


def r_value(bits: str) -> Fraction:
    """The point of [0, 1) that a label denotes: its bits read as a binary fraction."""
    return Fraction(int(bits, 2), 1 << len(bits))


def _order_key(bits: str) -> tuple[Fraction, int]:
    """Sort key of the ring order: by r, ties broken by length."""
    return (r_value(bits), len(bits))


def ring_order_of(labels: Iterable[str]) -> list[str]:
    """The given label bit strings sorted into ring order (by r, ties by length).

    Every element is validated; duplicates are kept.
    """
    return sorted((_validate(b) for b in labels), key=_order_key)


def sr_members(n: int, port_base: int = 7000, host: str = "127.0.0.1") -> dict[str, str]:
    """A canonical membership of SR(n): ``host:(port_base + x)`` holds label l(x), x < n."""
    return {f"{host}:{port_base + x}": label_bits(x) for x in range(n)}


def canonical_label_problems(members: Mapping[str, str]) -> list[str]:
    """Why the labels of ``members`` are not exactly {l(0), ..., l(n-1)} (empty if they are).

    Definition 2.1 asks for unique labels whose preimage under l is below n; with n
    members that is the same as the label set being exactly l(0..n-1).
    """
    n = len(members)
    expected = {label_bits(x) for x in range(n)}
    present = list(members.values())
    problems: list[str] = []
    seen: dict[str, str] = {}
    for ref in sorted(members):
        bits = members[ref]
        if bits in seen:
            problems.append(f"label {bits!r} is held by both {seen[bits]} and {ref}")
        seen[bits] = ref
    for bits in sorted(set(present) - expected, key=lambda b: (len(b), b)):
        problems.append(f"label {bits!r} is not among l(0..{n - 1})")
    for bits in sorted(expected - set(present), key=lambda b: (len(b), b)):
        problems.append(f"label {bits!r} (= l({_preimage_hint(bits)})) is held by nobody")
    return problems


def _preimage_hint(bits: str) -> str:
    """l^-1 of an image of l, computed independently, as text (for messages only)."""
    if bits == "0":
        return "0"
    return str(int("1" + bits[:-1], 2))


# --------------------------------------------------------------------------------------
# the ideal
# --------------------------------------------------------------------------------------
def _sorted_refs(members: Mapping[str, str]) -> list[str]:
    """Member references in ring order; validates labels and rejects duplicates."""
    seen: dict[str, str] = {}
    for ref, bits in members.items():
        _validate(bits)
        if bits in seen:
            raise ValueError(f"label {bits!r} is held by both {seen[bits]} and {ref}")
        seen[bits] = ref
    key = _ring_key(members.values())
    return sorted(members, key=lambda ref: key(members[ref]))


def _ring_key(labels: Iterable[str]) -> Any:
    """A sort key equal in order to `_order_key` over `labels`, in integers: with L the
    longest length, r(b) = int(b, 2) * 2^(L - |b|) / 2^L, so comparing int(b, 2) << (L - |b|)
    compares r exactly (no Fraction per label; the oracle's cost at n = 10^5)."""
    top = max((len(bits) for bits in labels), default=0)

    def key(bits: str) -> tuple[int, int]:
        return (int(bits, 2) << (top - len(bits)), len(bits))

    return key


def ideal_skip_ring(members: Mapping[str, str]) -> dict[str, NodeState]:
    """The ideal explicit state of every member of the skip ring over ``members``.

    Returns ``{ref: {"label", "left", "right", "ring", "shortcuts"}}`` where the contacts
    are ``(bits, ref)`` tuples or ``None`` and ``shortcuts`` maps label bits to refs.
    Raises ``LabelError`` for a malformed label and ``ValueError`` for a duplicated one.
    """
    order = _sorted_refs(members)
    n = len(order)
    if n == 0:
        return {}

    def contact(ref: str) -> Contact:
        return (members[ref], ref)

    position = {ref: p for p, ref in enumerate(order)}
    top = max(len(bits) for bits in members.values())
    # The sorted cycle over K_i is the global order restricted to short-enough labels.
    levels: dict[int, tuple[list[str], dict[str, int]]] = {}
    for i in range(1, top):
        cycle = [ref for ref in order if len(members[ref]) <= i]
        levels[i] = (cycle, {ref: j for j, ref in enumerate(cycle)})

    ideal: dict[str, NodeState] = {}
    for p, ref in enumerate(order):
        bits = members[ref]
        ring: Contact | None = None
        if n > 1 and p == 0:
            ring = contact(order[-1])
        elif n > 1 and p == n - 1:
            ring = contact(order[0])
        predecessor = order[(p - 1) % n]
        successor = order[(p + 1) % n]

        left_side: set[str] = set()
        right_side: set[str] = set()
        for i in range(len(bits), top):
            cycle, index = levels[i]
            if len(cycle) < 2:
                continue
            j = index[ref]
            left_side.add(cycle[(j - 1) % len(cycle)])
            right_side.add(cycle[(j + 1) % len(cycle)])
        left_side.discard(predecessor)
        right_side.discard(successor)
        targets = (left_side | right_side) - {ref}

        ideal[ref] = {
            "label": bits,
            "left": contact(order[p - 1]) if p > 0 else None,
            "right": contact(order[p + 1]) if p < n - 1 else None,
            "ring": ring,
            "shortcuts": {members[u]: u for u in sorted(targets, key=position.__getitem__)},
        }
    return ideal


def ideal_edges(members: Mapping[str, str]) -> set[tuple[str, str]]:
    """The directed edge set E_R ∪ E_S of the skip ring over ``members``.

    Ring edges join cyclically consecutive members in both directions; shortcut edges go
    from each node to every entry of its ideal shortcut table.  No self-loops.
    """
    order = _sorted_refs(members)
    n = len(order)
    edges: set[tuple[str, str]] = set()
    if n >= 2:
        for p, ref in enumerate(order):
            nxt = order[(p + 1) % n]
            edges.add((ref, nxt))
            edges.add((nxt, ref))
    for ref, state in ideal_skip_ring(members).items():
        for target in state["shortcuts"].values():
            edges.add((ref, target))
    return edges


def degree_stats(members: Mapping[str, str]) -> tuple[float, int]:
    """(average, maximum) number of distinct neighbours per node in undirected E_R ∪ E_S."""
    if not members:
        return (0.0, 0)
    neighbours: dict[str, set[str]] = {ref: set() for ref in members}
    for u, v in ideal_edges(members):
        neighbours[u].add(v)
        neighbours[v].add(u)
    degrees = [len(s) for s in neighbours.values()]
    return (sum(degrees) / len(degrees), max(degrees))


def to_reported(ideal: Mapping[str, NodeState]) -> dict[str, dict[str, Any]]:
    """Convert ideal states into the reported format (contacts as ``[bits, ref]`` lists)."""
    out: dict[str, dict[str, Any]] = {}
    for ref, state in ideal.items():
        out[ref] = {
            "label": state["label"],
            **{key: None if state[key] is None else list(state[key]) for key in CONTACT_KEYS},
            "shortcuts": dict(state["shortcuts"]),
        }
    return out


# --------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------
def _normalise_contact(value: Any) -> Contact | None | str:
    """A reported contact as a tuple, ``None``, or a string describing why it is malformed."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and len(value) == 2:
        bits, ref = value
        if isinstance(bits, str) and isinstance(ref, str):
            return (bits, ref)
    return f"malformed contact {value!r}"


def _show(contact: Contact | None) -> str:
    """Human-readable rendering of a contact."""
    return "None" if contact is None else f"({contact[0]}, {contact[1]})"


def compare(
    members: Mapping[str, str],
    node_states: Mapping[str, Mapping[str, Any]],
    *,
    require_canonical_labels: bool = True,
) -> list[str]:
    """Every way in which ``node_states`` differs from the ideal skip ring over ``members``.

    ``node_states`` maps ref -> reported state (see the module docstring).  Returns a list
    of human-readable differences; an empty list means the system is exactly SR(n).  With
    ``require_canonical_labels`` (the default) it is also a difference when the labels in
    ``members`` are not exactly l(0..n-1).  Extra keys in a reported state are ignored.
    """
    diffs: list[str] = []
    if require_canonical_labels:
        diffs.extend(f"membership: {p}" for p in canonical_label_problems(members))
    try:
        ideal = ideal_skip_ring(members)
    except ValueError as exc:  # LabelError is a ValueError
        return diffs + [f"membership: cannot build the ideal ring: {exc}"]

    for ref in ideal:
        if ref not in node_states:
            diffs.append(f"{ref}: member (label {ideal[ref]['label']}) reported no state")
    for ref in sorted(set(node_states) - set(ideal)):
        diffs.append(f"{ref}: reported a state but is not a member")

    for ref, want in ideal.items():
        got = node_states.get(ref)
        if got is None:
            continue
        if not isinstance(got, Mapping):
            diffs.append(f"{ref}: state is not a mapping: {got!r}")
            continue
        missing = [key for key in STATE_KEYS if key not in got]
        for key in missing:
            diffs.append(f"{ref}: state has no {key!r} field")

        if "label" in got and got["label"] != want["label"]:
            diffs.append(f"{ref}: label is {got['label']!r}, expected {want['label']!r}")

        for key in CONTACT_KEYS:
            if key not in got:
                continue
            have = _normalise_contact(got[key])
            if isinstance(have, str):
                diffs.append(f"{ref}: {key} is a {have}, expected {_show(want[key])}")
            elif have != want[key]:
                diffs.append(f"{ref}: {key} is {_show(have)}, expected {_show(want[key])}")

        if "shortcuts" not in got:
            continue
        table = got["shortcuts"]
        if not isinstance(table, Mapping):
            diffs.append(f"{ref}: shortcuts is not a mapping: {table!r}")
            continue
        expected = want["shortcuts"]
        if table == expected:
            continue
        for bits in expected:  # built in ring order
            if bits not in table:
                diffs.append(f"{ref}: missing shortcut ({bits}, {expected[bits]})")
            elif table[bits] is None:
                diffs.append(f"{ref}: shortcut {bits} has no node, expected {expected[bits]}")
            elif table[bits] != expected[bits]:
                diffs.append(
                    f"{ref}: shortcut {bits} points to {table[bits]}, expected {expected[bits]}"
                )
        extras = [b for b in table if b not in expected]
        for bits in sorted(extras, key=lambda b: (len(str(b)), str(b))):
            diffs.append(f"{ref}: extra shortcut ({bits}, {table[bits]})")
    return diffs
