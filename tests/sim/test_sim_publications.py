"""Publications in the simulator (paper 000, §4.2-4.3, Theorems 5.19 and 5.28).

* Theorem 5.19 (convergence): with flooding off, publications stored at arbitrary
  subscribers of a settled skip ring end up in every subscriber's trie, by anti-entropy
  (CheckTrie / CheckAndPublish / Publish between ring neighbours) alone.
* Theorem 5.28 (closure): once all tries are equal, only the periodic root CheckTrie flows
  and no trie changes.
* §4.3 (flooding): a new publication reaches all n subscribers over ring and shortcut
  edges, each after at most ceil(log2 n) + 2 hops.  The hop count of the *first* copy a
  node receives equals its distance from the publisher only when every link is equally
  fast; with the simulator's default delays (0.01 to 0.5, so one link may be 50 times
  slower than another) the first copy often takes a longer but quicker path.  The hop
  bound is therefore checked with equal link delays -- and there, independently, against
  a breadth-first search over the contact graph -- and the default delays are checked for
  delivery only.
"""

from __future__ import annotations

import math
import random
from collections import deque

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import CheckTrie, Publication
from pubsub.publications.topicstate import ANTI_ENTROPY, FLOOD, LOCAL, make_publication
from pubsub.publications.trie import PatriciaTrie
from pubsub.sim.scenarios import fresh_start
from pubsub.sim.world import Simulation
from tests.simhelpers import is_legitimate, settle

TOPIC = Topic("t")
PUBLICATION_KINDS = ("check_trie", "check_and_publish", "publish", "publish_new")


def settled_ring(n: int, seed: int, **options: object) -> tuple[Simulation, list[Ref]]:
    sim = Simulation(seed, keep_rows=True, **options)  # type: ignore[arg-type]
    refs = fresh_start(sim, n, TOPIC)
    settle(sim, TOPIC, max_intervals=600)
    for ref in refs:
        sim.take_rows(ref)
    return sim, refs


def roots(sim: Simulation) -> set[tuple[object, bytes]]:
    return {node.publications[TOPIC].trie.root() for node in sim.nodes.values()}


def expected_root(publications: list[Publication]) -> tuple[object, bytes]:
    """The root every trie must reach, computed in a fresh trie of its own."""
    trie: PatriciaTrie[Publication] = PatriciaTrie()
    for p in publications:
        trie.insert(p.key, p)
    return trie.root()


def only_root_check_tries_in_flight(sim: Simulation) -> bool:
    for _, _dest, msg in sim.in_flight():
        if msg.kind not in PUBLICATION_KINDS:
            continue
        if not isinstance(msg, CheckTrie) or len(msg.tuples) != 1:
            return False
        sender_trie = sim.nodes[msg.sender].publications[TOPIC].trie
        if tuple(msg.tuples[0]) != sender_trie.root():
            return False
    return True


#: n = 1000: anti-entropy over level partners and eager rounds (`pubsub.skipring.partners`)
#: needs a few dozen intervals, but every interval of a 1,000-node ring costs, so slow.
@pytest.mark.parametrize("n", [16, 256, pytest.param(1000, marks=pytest.mark.slow)])
def test_theorem_5_19_and_5_28_anti_entropy_alone(n: int) -> None:
    sim, refs = settled_ring(n, seed=n, flooding=False)
    rng = random.Random(n)
    placed = []
    for i in range(40):  # Theorem 5.19's setting: publications stored at arbitrary subscribers
        holder = rng.choice(refs)
        publication = make_publication(holder, i, f"publication {i}".encode())
        assert sim.nodes[holder].anti_entropy(TOPIC).store(publication)
        placed.append(publication)
    goal = expected_root(placed)

    took = sim.run_intervals_until(lambda: roots(sim) == {goal}, max_intervals=8 * n + 200)
    assert took is not None, f"tries still differ: {len(roots(sim))} distinct roots"
    for ref in refs:
        core = sim.nodes[ref].publications[TOPIC]
        assert {p.key for p in core.publications()} == {p.key for p in placed}
        assert all(a.via in (LOCAL, ANTI_ENTROPY) for a in core.new)  # flooding is off
    assert sim.traffic.by_kind["publish_new"] == 0

    # Theorem 5.28: let replies of the last exchanges drain, then watch 25 intervals.
    sim.run_intervals_until(lambda: only_root_check_tries_in_flight(sim), max_intervals=5)
    cores = [node.publications[TOPIC] for node in sim.nodes.values()]
    sizes = [len(core.trie) for core in cores]
    before = sim.traffic.by_kind.copy()
    rounds = sum(core.counters["rounds"] for core in cores)
    roots_sent = sum(core.counters["sent_root_check_trie"] for core in cores)
    for _ in range(25):
        sim.run_for(sim.interval)
        assert only_root_check_tries_in_flight(sim)
        assert roots(sim) == {goal}
    delta = sim.traffic.by_kind - before
    assert delta["check_trie"] >= 20 * n
    assert delta["check_and_publish"] == delta["publish"] == delta["publish_new"] == 0
    # every CheckTrie sent was a PublishTimeout's root CheckTrie (no child comparisons)
    assert delta["check_trie"] == sum(core.counters["sent_root_check_trie"] for core in cores) - roots_sent
    # and the ring is quiet again: one root per round, nobody eager (partners module)
    assert not any(core.eager for core in cores)
    rounds, roots_sent = (sum(core.counters[k] for core in cores) for k in ("rounds", "sent_root_check_trie"))
    sim.run_for(sim.interval)
    assert sum(core.counters["sent_root_check_trie"] for core in cores) - roots_sent == (
        sum(core.counters["rounds"] for core in cores) - rounds
    ) >= n - 1
    assert [len(core.trie) for core in cores] == sizes
    assert is_legitimate(sim, TOPIC)


def contact_distances(sim: Simulation, source: Ref) -> dict[Ref, int]:
    """Hops from `source` along explicit edges (ring and shortcuts), by breadth-first search."""
    dist = {source: 0}
    queue = deque([source])
    while queue:
        ref = queue.popleft()
        for nxt in sim.nodes[ref].instances[TOPIC].contacts():
            if nxt not in dist:
                dist[nxt] = dist[ref] + 1
                queue.append(nxt)
    return dist


@pytest.mark.parametrize("n", [16, 256, 1000])
def test_flooding_reaches_everyone_within_log_n_hops(n: int) -> None:
    """Equal link delays: the first copy travels a shortest path (see module docstring)."""
    sim, refs = settled_ring(n, seed=n + 1, delay=(0.1, 0.1))
    bound = math.ceil(math.log2(n)) + 2
    rng = random.Random(n)
    for trial in range(3):
        publisher = rng.choice(refs)
        distances = contact_distances(sim, publisher)
        assert len(distances) == n and max(distances.values()) <= bound
        sim.publish(publisher, TOPIC, f"news {trial}".encode())
        sim.run_for((bound + 1) * 0.1)  # one link delay per hop
        hops: dict[Ref, int | None] = {}
        for ref in refs:
            for arrival in sim.take_rows(ref):
                assert ref not in hops
                assert arrival.via == (LOCAL if ref == publisher else FLOOD)
                hops[ref] = arrival.hops
        assert len(hops) == n, f"reached {len(hops)} of {n} subscribers"
        assert max(h for h in hops.values() if h is not None) <= bound
        assert hops == distances  # first copies follow shortest paths
        sim.run_for(2 * sim.interval)
        assert len(roots(sim)) == 1


def test_flooding_with_random_delays_reaches_everyone() -> None:
    n = 256
    sim, refs = settled_ring(n, seed=7)
    bound = math.ceil(math.log2(n)) + 2
    publisher = refs[0]
    sim.publish(publisher, TOPIC, b"news")
    sim.run_for(bound * sim.delay[1] + sim.interval)
    arrivals = {ref: a for ref in refs for a in sim.take_rows(ref)}
    assert len(arrivals) == n
    flooded = [a for a in arrivals.values() if a.via == FLOOD]
    assert len(flooded) >= 0.98 * (n - 1)  # a few may be repaired by anti-entropy first
    dropped = sum(node.publications[TOPIC].counters["dropped_duplicates"] for node in sim.nodes.values())
    assert dropped > 0  # every node hears it from several neighbours and drops the rest
