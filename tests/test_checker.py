"""Tests for the independent SR(n) oracle in tests/checker.py."""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import pytest

from tests.checker import (
    compare,
    degree_stats,
    ideal_edges,
    ideal_skip_ring,
    r_value,
    ring_order_of,
    sr_members,
    to_reported,
)


def index_of(bits: str) -> int:
    """l^-1 computed here, independently of pubsub.skipring.labels."""
    return 0 if bits == "0" else int("1" + bits[:-1], 2)


def ref_with_label(members: dict[str, str], bits: str) -> str:
    """The member holding ``bits``."""
    (ref,) = [ref for ref, b in members.items() if b == bits]
    return ref


def doubling_shortcuts(members: dict[str, str], ref: str) -> dict[str, str]:
    """A second, independent derivation of a node's shortcuts (the §3.2.2 recursion).

    Starting from a ring neighbour w, while w's label is longer than the node's own, the
    point mirrored across w (at the same cyclic distance beyond w) must be a shortcut; the
    walk continues from that point.  Only valid for label sets l(0..n-1).
    """
    by_point = {r_value(b): r for r, b in members.items()}
    order = sorted(members, key=lambda x: (r_value(members[x]), len(members[x])))
    n = len(order)
    if n <= 2:
        return {}
    p = order.index(ref)
    own = members[ref]
    v = r_value(own)
    found: dict[str, str] = {}
    for neighbour, sign in ((order[(p - 1) % n], -1), (order[(p + 1) % n], 1)):
        w_bits = members[neighbour]
        while len(w_bits) > len(own):
            w = r_value(w_bits)
            gap = (sign * (w - v)) % 1
            s = (w + sign * gap) % 1
            target = by_point[s]
            w_bits = members[target]
            if target != ref:
                found[w_bits] = target
    return found


# --------------------------------------------------------------------------------------
# ring order / Figure 1
# --------------------------------------------------------------------------------------
def test_ring_order_sr16_figure1() -> None:
    """Sorting l(0..15) by r lists the indices in the order shown around Figure 1.

    The point k/16 holds x = l^-1 of the shortest name of k/16, e.g. 3/16 = "0011" = l(9)
    and 9/16 = "1001" = l(12).
    """
    labels = [sr_members(16)[f"127.0.0.1:{7000 + x}"] for x in range(16)]
    order = ring_order_of(labels)
    assert [index_of(b) for b in order] == [0, 8, 4, 9, 2, 10, 5, 11, 1, 12, 6, 13, 3, 14, 7, 15]
    assert [r_value(b) for b in order] == [Fraction(k, 16) for k in range(16)]


def test_ring_order_ties_by_length() -> None:
    """Equal points are ordered shorter label first."""
    assert ring_order_of(["010", "1", "01", "0"]) == ["0", "01", "010", "1"]


# --------------------------------------------------------------------------------------
# the ideal
# --------------------------------------------------------------------------------------
def test_worked_example_sr16() -> None:
    """§3.2.2: the node at 1/4 (ring neighbours 3/16, 5/16) has shortcuts 1/8, 0, 3/8, 1/2."""
    members = sr_members(16)
    me = ref_with_label(members, "01")
    state = ideal_skip_ring(members)[me]
    assert state["left"] == ("0011", ref_with_label(members, "0011"))
    assert state["right"] == ("0101", ref_with_label(members, "0101"))
    assert state["ring"] is None
    assert state["shortcuts"] == {b: ref_with_label(members, b) for b in ("001", "0", "011", "1")}


def test_small_rings() -> None:
    """n = 1 and n = 2 have no shortcuts; n = 2 closes the ring through both fields."""
    assert ideal_skip_ring({}) == {}
    one = ideal_skip_ring({"a": "0"})
    assert one == {"a": {"label": "0", "left": None, "right": None, "ring": None, "shortcuts": {}}}
    two = ideal_skip_ring({"a": "0", "b": "1"})
    assert two["a"] == {
        "label": "0", "left": None, "right": ("1", "b"), "ring": ("1", "b"), "shortcuts": {},
    }
    assert two["b"] == {
        "label": "1", "left": ("0", "a"), "right": None, "ring": ("0", "a"), "shortcuts": {},
    }


@pytest.mark.parametrize("n", range(1, 41))
def test_ring_fields_form_one_cycle(n: int) -> None:
    """left/right/ring close one cycle through all members, in r order."""
    members = sr_members(n)
    ideal = ideal_skip_ring(members)
    assert set(ideal) == set(members)
    ends = [ref for ref, s in ideal.items() if s["left"] is None]
    assert len(ends) == 1
    start = ends[0]
    walk = [start]
    while ideal[walk[-1]]["right"] is not None:
        nxt = ideal[walk[-1]]["right"][1]
        assert ideal[nxt]["left"] == (members[walk[-1]], walk[-1])
        walk.append(nxt)
    assert len(walk) == n and set(walk) == set(members)
    assert [members[r] for r in walk] == ring_order_of(members.values())
    if n > 1:
        assert ideal[walk[-1]]["ring"] == (members[start], start)
        assert ideal[start]["ring"] == (members[walk[-1]], walk[-1])
    assert all(ideal[r]["ring"] is None for r in walk[1:-1])
    assert all(s["label"] == members[r] for r, s in ideal.items())


@pytest.mark.parametrize("n", range(1, 101))
def test_shortcuts_agree_with_doubling(n: int) -> None:
    """The level-by-level definition and the §3.2.2 recursion give the same tables."""
    members = sr_members(n)
    ideal = ideal_skip_ring(members)
    for ref in members:
        assert ideal[ref]["shortcuts"] == doubling_shortcuts(members, ref), (n, members[ref])


@pytest.mark.parametrize("n", range(1, 101))
def test_shortcuts_symmetric_and_well_formed(n: int) -> None:
    """Shortcuts are mutual, never self, keyed by the target's own label."""
    members = sr_members(n)
    ideal = ideal_skip_ring(members)
    for ref, state in ideal.items():
        for bits, target in state["shortcuts"].items():
            assert target != ref
            assert members[target] == bits
            assert ideal[target]["shortcuts"].get(members[ref]) == ref


@pytest.mark.parametrize("j", range(2, 9))
def test_shortcut_counts_power_of_two(j: int) -> None:
    """For n = 2^j a k-bit node has two shortcuts per level k..j-1 (one on level 1)."""
    n = 2**j
    ideal = ideal_skip_ring(sr_members(n))
    for state in ideal.values():
        k = len(state["label"])
        expected = 2 * (j - k) - (1 if k == 1 else 0)
        assert len(state["shortcuts"]) == expected, state


@pytest.mark.parametrize("j", range(0, 13))
def test_lemma_2_2_degrees(j: int) -> None:
    """Lemma 2.2 for n = 2^j: average degree <= 4, maximum <= 2 * ceil(log2 n)."""
    n = 2**j
    members = sr_members(n)
    avg, top = degree_stats(members)
    assert avg <= 4
    assert top <= 2 * math.ceil(math.log2(n))
    if n >= 2:
        # Without duplicate edges, |E_R ∪ E_S| as undirected edges is 2n - 3 (n >= 4).
        undirected = {frozenset(e) for e in ideal_edges(members)}
        assert len(undirected) * 2 == round(avg * n)
        if n >= 4:
            assert len(undirected) == 2 * n - 3


def test_ideal_edges_contents() -> None:
    """E_R has both directions of each ring edge; E_S mirrors the shortcut tables."""
    members = sr_members(8)
    edges = ideal_edges(members)
    ideal = ideal_skip_ring(members)
    order = sorted(members, key=lambda r: r_value(members[r]))
    for p, ref in enumerate(order):
        nxt = order[(p + 1) % len(order)]
        assert (ref, nxt) in edges and (nxt, ref) in edges
    for ref, state in ideal.items():
        assert {(ref, t) for t in state["shortcuts"].values()} <= edges
    assert all(u != v for u, v in edges)


def test_ideal_rejects_bad_labels() -> None:
    """Duplicated or malformed labels cannot form a skip ring."""
    with pytest.raises(ValueError):
        ideal_skip_ring({"a": "01", "b": "01"})
    with pytest.raises(ValueError):
        ideal_skip_ring({"a": "012"})


# --------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------
@pytest.fixture
def sr16() -> tuple[dict[str, str], dict[str, dict]]:
    """SR(16) members with their ideal states in the reported format."""
    members = sr_members(16)
    return members, to_reported(ideal_skip_ring(members))


@pytest.mark.parametrize("n", range(0, 41))
def test_compare_accepts_ideal(n: int) -> None:
    """The ideal itself, in reported form, shows no difference."""
    members = sr_members(n)
    assert compare(members, to_reported(ideal_skip_ring(members))) == []


def test_compare_accepts_tuples(sr16: tuple[dict[str, str], dict[str, dict]]) -> None:
    """Contacts given as tuples are as good as lists."""
    members, _ = sr16
    assert compare(members, ideal_skip_ring(members)) == []


def test_compare_swapped_labels(sr16: tuple[dict[str, str], dict[str, dict]]) -> None:
    members, states = sr16
    a, b = ref_with_label(members, "01"), ref_with_label(members, "11")
    states[a]["label"], states[b]["label"] = states[b]["label"], states[a]["label"]
    diffs = compare(members, states)
    assert len(diffs) == 2
    assert any(d.startswith(f"{a}: label") for d in diffs)
    assert any(d.startswith(f"{b}: label") for d in diffs)


def test_compare_dropped_shortcut(sr16: tuple[dict[str, str], dict[str, dict]]) -> None:
    members, states = sr16
    me = ref_with_label(members, "01")
    del states[me]["shortcuts"]["001"]
    assert compare(members, states) == [
        f"{me}: missing shortcut (001, {ref_with_label(members, '001')})"
    ]


def test_compare_extra_shortcut(sr16: tuple[dict[str, str], dict[str, dict]]) -> None:
    members, states = sr16
    me = ref_with_label(members, "01")
    states[me]["shortcuts"]["111"] = ref_with_label(members, "111")
    diffs = compare(members, states)
    assert len(diffs) == 1 and "extra shortcut (111" in diffs[0]


def test_compare_shortcut_without_or_with_wrong_node(
    sr16: tuple[dict[str, str], dict[str, dict]],
) -> None:
    members, states = sr16
    me = ref_with_label(members, "01")
    states[me]["shortcuts"]["0"] = None
    states[me]["shortcuts"]["1"] = ref_with_label(members, "11")
    diffs = compare(members, states)
    assert len(diffs) == 2
    assert any("shortcut 0 has no node" in d for d in diffs)
    assert any("shortcut 1 points to" in d for d in diffs)


def test_compare_wrong_ring(sr16: tuple[dict[str, str], dict[str, dict]]) -> None:
    members, states = sr16
    zero = ref_with_label(members, "0")
    states[zero]["ring"] = ["111", ref_with_label(members, "111")]
    diffs = compare(members, states)
    assert len(diffs) == 1 and diffs[0].startswith(f"{zero}: ring is (111,")
    # A middle node must not hold a ring edge.
    mid = ref_with_label(members, "01")
    states[zero]["ring"] = ["1111", ref_with_label(members, "1111")]
    states[mid]["ring"] = ["0", zero]
    assert compare(members, states) == [f"{mid}: ring is (0, {zero}), expected None"]


def test_compare_contact_needs_label_and_ref(
    sr16: tuple[dict[str, str], dict[str, dict]],
) -> None:
    members, states = sr16
    me = ref_with_label(members, "01")
    bits, ref = states[me]["right"]
    states[me]["right"] = [bits, ref_with_label(members, "1")]  # right label, wrong node
    states[me]["left"] = ["0010", states[me]["left"][1]]  # right node, stale label
    diffs = compare(members, states)
    assert len(diffs) == 2
    assert any(d.startswith(f"{me}: right is") for d in diffs)
    assert any(d.startswith(f"{me}: left is") for d in diffs)


def test_compare_none_label(sr16: tuple[dict[str, str], dict[str, dict]]) -> None:
    members, states = sr16
    me = ref_with_label(members, "01")
    states[me]["label"] = None
    assert compare(members, states) == [f"{me}: label is None, expected '01'"]


def test_compare_missing_and_extra_nodes(sr16: tuple[dict[str, str], dict[str, dict]]) -> None:
    members, states = sr16
    me = ref_with_label(members, "01")
    gone = states.pop(me)
    states["127.0.0.1:9999"] = gone
    diffs = compare(members, states)
    assert len(diffs) == 2
    assert any(d.startswith(f"{me}: member") for d in diffs)
    assert any(d.startswith("127.0.0.1:9999: reported a state") for d in diffs)


def test_compare_malformed_state(sr16: tuple[dict[str, str], dict[str, dict]]) -> None:
    members, states = sr16
    me = ref_with_label(members, "01")
    del states[me]["shortcuts"]
    states[me]["left"] = ["0011"]
    diffs = compare(members, states)
    assert any("no 'shortcuts' field" in d for d in diffs)
    assert any("left is a malformed contact" in d for d in diffs)


def test_compare_every_single_mutation_detected() -> None:
    """Changing any one field of any node of SR(12) is always reported."""
    members = sr_members(12)
    base = to_reported(ideal_skip_ring(members))
    some_ref = next(iter(members))
    for ref, state in base.items():
        for key in ("left", "right", "ring"):
            mutated = copy.deepcopy(base)
            mutated[ref][key] = None if state[key] is not None else ["1", some_ref]
            assert compare(members, mutated), (ref, key)
        for bits in state["shortcuts"]:
            mutated = copy.deepcopy(base)
            del mutated[ref]["shortcuts"][bits]
            assert compare(members, mutated), (ref, bits)


def test_compare_non_canonical_membership() -> None:
    """Labels that are not l(0..n-1) are flagged unless explicitly allowed."""
    members = {"a": "0", "b": "01", "c": "1"}  # fine: l(0), l(2), l(1)
    assert compare(members, to_reported(ideal_skip_ring(members))) == []
    members = {"a": "0", "b": "11", "c": "1"}  # l(3) instead of l(2)
    states = to_reported(ideal_skip_ring(members))
    diffs = compare(members, states)
    assert any("'11' is not among" in d for d in diffs)
    assert any("'01'" in d and "held by nobody" in d for d in diffs)
    assert compare(members, states, require_canonical_labels=False) == []
    dup = {"a": "0", "b": "1", "c": "1"}
    assert any("cannot build" in d for d in compare(dup, {}))
