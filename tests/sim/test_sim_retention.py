"""Retention in the simulator (issue 13, item 6; `pubsub.publications.retention`).

A settled ring of subscribers, publications stamped with the virtual clock (as the daemons
stamp theirs with the wall clock), retention settings from the supervisor:

* with a max age, expired publications disappear at every node, the tries end equal --
  exactly the trie of the publications inside the window -- and none inside the window is
  lost;
* a node that was down while they expired comes back with them (its store), with or
  without the horizon it kept, and brings none of them back: no node holds an expired
  publication at any moment after the expiry, and the tries end equal again;
* a purge empties every trie of what was stamped before it, and what is published after
  it is kept;
* max count and max bytes leave the same publications at every node.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import Publication, Publish
from pubsub.publications.retention import order
from pubsub.publications.trie import PatriciaTrie
from pubsub.sim.scenarios import fresh_start
from pubsub.sim.world import SUPERVISOR, Simulation
from tests.simhelpers import retention_changed, settle

T = Topic("t")
N = 6


def ring(seed: int) -> tuple[Simulation, list[Ref]]:
    sim = Simulation(seed, dissemination="tree")
    refs = fresh_start(sim, N, T)
    settle(sim, T, max_intervals=600)
    return sim, refs


def publish(sim: Simulation, refs: list[Ref], count: int, tag: str) -> None:
    """`count` publications through client requests, one every second, from the nodes in turn."""
    for i in range(count):
        sim.publish_request(refs[i % len(refs)], T, f"{tag}{i}".encode(), request_id=i + 1)
        sim.run_for(1.0)


def held(sim: Simulation, ref: Ref) -> set[Publication]:
    return {p for _, p in sim.nodes[ref].publications[T].trie.items()}


def every_held(sim: Simulation) -> set[Publication]:
    out: set[Publication] = set()
    for ref in sim.nodes:
        out |= held(sim, ref)
    return out


def root_of(publications: set[Publication]) -> tuple[object, bytes]:
    trie: PatriciaTrie[Publication] = PatriciaTrie()
    for p in publications:
        trie.insert(p.key, p)
    return trie.root()


def roots(sim: Simulation) -> set[tuple[object, bytes]]:
    return {core.publications[T].trie.root() for core in sim.nodes.values()}


def configure(sim: Simulation, **limits: int) -> None:
    sim._dispatch(SUPERVISOR, retention_changed(sim.supervisor, T, **limits))


def run_until(
    sim: Simulation, predicate: Callable[[], bool], max_intervals: int = 200, each: Callable[[], None] | None = None
) -> None:
    """Run interval by interval until `predicate` holds (calling `each` before every look)."""
    for _ in range(max_intervals):
        if each is not None:
            each()
        if predicate():
            return
        sim.run_for(sim.interval)
    raise AssertionError("condition not reached")


def test_max_age_expires_everywhere_and_keeps_the_window() -> None:
    sim, refs = ring(11)
    start = sim.now
    publish(sim, refs, 10, "old")
    old = every_held(sim)
    assert len(old) == 10
    configure(sim, max_age_ms=30_000)
    sim.run_for(30.0)  # the old batch is now 30..40 s old
    publish(sim, refs, 10, "new")
    young = every_held(sim) - old
    assert len(young) == 10

    def expired() -> bool:
        return not (every_held(sim) & old)

    run_until(sim, expired)
    assert sim.now < start + 10 + 30 + 30 + 10, "expired about one step after the window"
    run_until(sim, lambda: len(roots(sim)) == 1)
    for ref in refs:
        assert held(sim, ref) == young, ref
    assert roots(sim) == {root_of(young)}
    counters = sim.nodes[refs[0]].publications[T].counters
    assert counters["retention_removed"] > 0


def expire_while_down(sim: Simulation, refs: list[Ref]) -> tuple[set[Publication], Ref, set[Publication]]:
    """Publications under a 20 s max age, held everywhere; then one node crashes and they
    expire at the others: (the publications, the node, what it still holds)."""
    configure(sim, max_age_ms=20_000)
    publish(sim, refs, 8, "old")
    old = every_held(sim)
    run_until(sim, lambda: all(held(sim, r) == old for r in refs))
    down = refs[3]
    kept = held(sim, down)
    sim.crash(down)
    run_until(sim, lambda: not (every_held(sim) & old))
    return old, down, kept


@pytest.mark.parametrize("keeps_horizon", [False, True])
def test_a_node_down_during_expiry_brings_nothing_back(keeps_horizon: bool) -> None:
    sim, refs = ring(12 + keeps_horizon)
    retention = sim.nodes[refs[3]].retention  # as it stands when the node crashes
    old, down, kept = expire_while_down(sim, refs)
    window = retention.window(T)
    assert window is not None
    policy, through = window.policy, window.through
    publish(sim, [r for r in refs if r != down], 6, "new")
    young = every_held(sim)
    assert len(young) == 6

    # it returns with its store: every old publication, all expired
    sim.crashed.discard(down)
    sim.add_node(down)
    core = sim.nodes[down]
    if keeps_horizon:
        core.load_retention(T, policy, through)
    sim.join(down, T)
    core.restore(T, kept)
    # and, before it learns anything, offers them to everyone
    for ref in refs:
        if ref != down:
            sim.inject(ref, Publish(T, sorted(kept, key=order)), src=down)

    def nothing_old() -> None:
        for ref in refs:
            if ref != down:
                assert not (held(sim, ref) & old), f"{ref} took back an expired publication"

    run_until(sim, lambda: held(sim, down) == young and len(roots(sim)) == 1, each=nothing_old)
    assert roots(sim) == {root_of(young)}
    refused = sum(sim.nodes[r].publications[T].counters["retention_refused"] for r in refs if r != down)
    assert refused >= len(kept)


def test_a_max_age_lifted_while_a_node_is_down_keeps_what_it_removed_removed() -> None:
    """The node that was down still holds what expired meanwhile; the limit is gone when it
    returns, yet it removes those too (the lifted limit's horizon became a purge point),
    instead of keeping them and offering them forever to nodes that refuse them."""
    sim, refs = ring(15)
    old, down, kept = expire_while_down(sim, refs)
    sim._dispatch(SUPERVISOR, retention_changed(sim.supervisor, T, max_age_ms=0, wall_ms=int(sim.now * 1000)))
    publish(sim, [r for r in refs if r != down], 6, "new")
    young = every_held(sim)
    assert len(young) == 6

    sim.crashed.discard(down)  # it returns with its store and no limit in force
    sim.add_node(down)
    sim.join(down, T)
    sim.nodes[down].restore(T, kept)
    run_until(sim, lambda: held(sim, down) == young and len(roots(sim)) == 1)
    assert roots(sim) == {root_of(young)}
    assert sim.supervisor.retention.get(T).max_age_ms == 0  # type: ignore[union-attr]


def test_purge_removes_what_was_published_before_it() -> None:
    sim, refs = ring(14)
    publish(sim, refs, 8, "before")
    before = every_held(sim)
    sim.run_for(1.0)
    sim._dispatch(SUPERVISOR, retention_changed(sim.supervisor, T, purge_ms=int(sim.now * 1000)))
    run_until(sim, lambda: not every_held(sim))
    sim.run_for(1.0)
    publish(sim, refs, 5, "after")
    run_until(sim, lambda: len(roots(sim)) == 1 and len(every_held(sim)) == 5)
    assert not (every_held(sim) & before)
    status = sim.nodes[refs[0]].status()["topics"][T]  # type: ignore[index]
    assert status["retention"]["purged_ms"] > 0


def test_count_and_bytes_leave_the_same_publications_everywhere() -> None:
    sim, refs = ring(15)
    configure(sim, max_count=7)
    publish(sim, refs, 12, "c")
    run_until(sim, lambda: len(roots(sim)) == 1 and all(len(held(sim, r)) == 7 for r in refs))
    kept = held(sim, refs[0])
    assert [p.payload for p in sorted(kept, key=order)] == [f"c{i}".encode() for i in range(5, 12)]
    configure(sim, max_count=0, max_bytes=10)  # c11, c10 (3 bytes), c9, c8 (2 bytes) fit
    run_until(sim, lambda: len(roots(sim)) == 1 and all(len(held(sim, r)) == 4 for r in refs))
    assert [p.payload for p in sorted(held(sim, refs[1]), key=order)] == [f"c{i}".encode() for i in range(8, 12)]
