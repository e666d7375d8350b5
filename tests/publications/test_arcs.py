"""The arc broadcast (`pubsub.publications.arcs`) on ideal skip rings built by the independent
oracle (`tests/checker.py`): the closed-form distance equals breadth-first search, and the
broadcast tree reaches every member exactly once, n - 1 messages, no deeper than the
publisher's eccentricity."""

from __future__ import annotations

import random
from collections import deque

import pytest

from pubsub.kernel.message import Ref
from pubsub.publications.arcs import RING, in_arc, skip_distance, split_arc
from pubsub.skipring.labels import Label, l
from tests.checker import ideal_skip_ring


def ideal(n: int) -> tuple[dict[str, str], dict[str, set[str]]]:
    """Members ref -> label bits of SR(n), and each member's explicit neighbours."""
    members = {f"n{x}": l(x).bits for x in range(n)}
    neighbours: dict[str, set[str]] = {}
    for ref, state in ideal_skip_ring(members).items():
        found = {c[1] for c in (state["left"], state["right"], state["ring"]) if c}
        found |= set(state["shortcuts"].values())
        found.discard(ref)
        neighbours[ref] = found
    return members, neighbours


def bfs(neighbours: dict[str, set[str]], origin: str) -> dict[str, int]:
    dist = {origin: 0}
    queue = deque([origin])
    while queue:
        x = queue.popleft()
        for y in neighbours[x]:
            if y not in dist:
                dist[y] = dist[x] + 1
                queue.append(y)
    return dist


def levels_of(members: dict[str, str]) -> int:
    return max(len(bits) for bits in members.values())


def broadcast(members: dict[str, str], neighbours: dict[str, set[str]], origin: str) -> dict[str, int]:
    """Run the arc broadcast from `origin` as the nodes would; ref -> hops.  Fails on a
    duplicate delivery or a piece that does not hold its receiver."""
    pos = {ref: Label(bits).position for ref, bits in members.items()}
    levels = levels_of(members)
    hops = {origin: 0}
    todo = [(origin, (pos[origin] + 1) % RING, pos[origin])]
    while todo:
        x, start, end = todo.pop()
        contacts = [(pos[y], Ref(y)) for y in sorted(neighbours[x])]
        for piece in split_arc(pos[x], start, end, contacts, levels):
            assert in_arc(pos[piece.ref], piece.start, piece.end), (x, piece)
            assert in_arc(pos[piece.ref], start, end)
            assert piece.ref not in hops, f"{piece.ref} received twice"
            hops[piece.ref] = hops[x] + 1
            todo.append((piece.ref, piece.start, piece.end))
    return hops


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 20, 32, 40])
def test_distance_equals_breadth_first_search_for_every_pair(n: int) -> None:
    members, neighbours = ideal(n)
    k = levels_of(members)
    grid = {ref: Label(bits).position >> (64 - k) for ref, bits in members.items()}
    for a in members:
        dist = bfs(neighbours, a)
        for b in members:
            assert skip_distance(grid[a], grid[b], k) == dist[b], (n, members[a], members[b])


@pytest.mark.parametrize("n", [100, 257, 600, 1024])
def test_distance_equals_breadth_first_search_on_sampled_pairs(n: int) -> None:
    members, neighbours = ideal(n)
    k = levels_of(members)
    grid = {ref: Label(bits).position >> (64 - k) for ref, bits in members.items()}
    rng = random.Random(n)
    refs = sorted(members)
    for a in rng.sample(refs, 8):
        dist = bfs(neighbours, a)
        for b in rng.sample(refs, 60):
            assert skip_distance(grid[a], grid[b], k) == dist[b]


@pytest.mark.parametrize("n", list(range(1, 41)))
def test_tree_reaches_everyone_once_no_deeper_than_the_eccentricity(n: int) -> None:
    members, neighbours = ideal(n)
    for origin in members:
        hops = broadcast(members, neighbours, origin)
        assert set(hops) == set(members)  # everyone, and (asserted inside) once: n - 1 sends
        eccentricity = max(bfs(neighbours, origin).values())
        assert max(hops.values()) == eccentricity


@pytest.mark.parametrize("n", [100, 255, 256, 300, 1000])
def test_tree_depth_on_larger_rings(n: int) -> None:
    members, neighbours = ideal(n)
    rng = random.Random(7)
    for origin in rng.sample(sorted(members), 6):
        hops = broadcast(members, neighbours, origin)
        assert len(hops) == n
        assert max(hops.values()) == max(bfs(neighbours, origin).values())


def test_arc_membership_wraps_around_zero() -> None:
    assert in_arc(5, RING - 10, 20) and in_arc(RING - 1, RING - 10, 20)
    assert not in_arc(20, RING - 10, 20) and not in_arc(RING - 11, RING - 10, 20)
    assert not in_arc(3, 7, 7)  # empty arc


def test_split_ignores_neighbours_outside_the_arc_and_is_deterministic() -> None:
    me = Label("0").position
    contacts = [(Label(b).position, Ref(f"h:{i + 1}")) for i, b in enumerate(["1", "01", "11", "001"])]
    arc = (Label("01").position, Label("11").position)  # [1/4, 3/4)
    pieces = split_arc(me, *arc, contacts, 3)
    assert [p.ref for p in pieces] == [Ref("h:2"), Ref("h:1")]  # 01 and 1 lie in it
    assert pieces == split_arc(me, *arc, list(reversed(contacts)), 3)
    assert pieces[0].start == arc[0] and pieces[-1].end == arc[1]
    assert pieces[0].end == pieces[1].start
