"""The benchmarks' fast cores against the reference, choice for choice:

* the numpy Low-ODA (`pubsub.tco.fastoda`) builds exactly the reference's overlay, edge for
  edge and in the same order of choice, on workloads of every popularity, for several ρ,
  at two shapes (small sets of few topics, and the paper's 10-90 of 200 topics);
* `FastNaiveDynAlg` (`pubsub.tco.fastnaive`) makes the reference NaiveDynAlg's repairs,
  round for round under churn;
* `FastBackupTable` (`pubsub.tco.fastbackups`) builds the reference's backups -- the same
  nodes in the same order, the same topics short, the same draws from the generator -- on a
  base TCO and under ShadowDynAlg's churn, for both methods and several λ.
"""

from __future__ import annotations

import random
from itertools import combinations

import pytest

from pubsub.tco.backups import BackupTable
from pubsub.tco.dynamic import NaiveDynAlg, Repair, ShadowDynAlg
from pubsub.tco.fastbackups import FastBackupTable
from pubsub.tco.fastnaive import FastNaiveDynAlg, crossing_pairs
from pubsub.tco.fastoda import low_oda_fast
from pubsub.tco.workload import POPULARITIES, Shape, Workload
from pubsub.topicgraph.graph import TopicOverlay
from pubsub.topicgraph.lowoda import construct_low_edges
from tests.tco.checker import split_topics


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("popularity", POPULARITIES)
@pytest.mark.parametrize("rho", [1.0, 3.0])
def test_the_numpy_low_oda_adds_the_reference_edges_in_the_reference_order(seed: int, popularity: str, rho: float) -> None:
    topics = Workload(Shape(nodes=45, topics=30, min_topics=1, max_topics=8, popularity=popularity), seed=seed).initial()
    reference = TopicOverlay(topics)
    done = construct_low_edges(reference, reference.subscribers, combinations(sorted(topics), 2), rho)
    fast, order = low_oda_fast(topics, rho)
    assert order == done.added
    assert fast.edges() == reference.edges()
    assert split_topics(topics, fast.edges()) == {}
    assert done.connected


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("popularity", POPULARITIES)
def test_the_numpy_low_oda_matches_the_reference_on_the_papers_subscription_sizes(seed: int, popularity: str) -> None:
    """10-90 topics of 200 each: many shared topics per pair, so contributions tie far less
    often and the degree conditions decide more of the choices."""
    topics = Workload(Shape(nodes=50, popularity=popularity), seed=seed).initial()
    reference = TopicOverlay(topics)
    done = construct_low_edges(reference, reference.subscribers, combinations(sorted(topics), 2), 3.0)
    assert low_oda_fast(topics, 3.0)[1] == done.added


def test_the_numpy_low_oda_handles_no_topics_and_one_node() -> None:
    assert low_oda_fast({"a": frozenset()})[0].edges() == set()
    assert low_oda_fast({"a": frozenset("x"), "b": frozenset("y")})[0].edges() == set()


def _same(a: Repair, b: Repair) -> bool:
    return (a.kind, a.node, a.added, a.removed, a.widened, a.shadow) == (b.kind, b.node, b.added, b.removed,
                                                                          b.widened, b.shadow)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("popularity", POPULARITIES)
def test_the_fast_naive_repairs_are_the_reference_repairs_round_for_round(seed: int, popularity: str) -> None:
    shape = Shape(nodes=40, topics=20, min_topics=1, max_topics=6, popularity=popularity)
    work = Workload(shape, seed)
    initial = work.initial()
    reference, fast = NaiveDynAlg(low_oda_fast(initial)[0]), FastNaiveDynAlg(low_oda_fast(initial)[0])
    leaves = 0
    for kind, node, topics in work.rounds(set(initial), 40):
        if kind == "join":
            assert _same(reference.join(node, topics), fast.join(node, topics))
        else:
            leaves += 1
            assert _same(reference.leave(node), fast.leave(node))
        assert reference.overlay.edges() == fast.overlay.edges()
    assert leaves >= 10
    assert split_topics(fast.overlay.topics, fast.overlay.edges()) == {}


def test_the_crossing_pairs_are_the_pairs_that_contribute() -> None:
    """Every pair of the nodes left that would join two components of the leaving node's
    topics is a crossing pair, and every crossing pair does."""
    work = Workload(Shape(nodes=40, topics=20, min_topics=1, max_topics=6), seed=4)
    base, _ = low_oda_fast(work.initial())
    splitting = 0
    for node in sorted(base.topics):
        overlay = base.copy()
        topics = overlay.topics[node]
        overlay.remove_node(node)
        pairs = crossing_pairs(overlay, topics)
        where = {t: {v: i for i, part in enumerate(overlay.components(t)) for v in part}
                 for t in topics if t in overlay.subscribers}
        contribute = {(u, v) for u, v in combinations(sorted(overlay.topics), 2)
                      if any(t in where and where[t][u] != where[t][v] for t in overlay.shared(u, v))}
        assert pairs == contribute
        splitting += bool(pairs)
    assert splitting >= 5


def _tables(a: BackupTable, b: BackupTable) -> None:
    assert a.backups == b.backups
    assert a.primaries == b.primaries
    assert a.short == b.short


@pytest.mark.parametrize("method", ["primal-dual", "greedy"])
@pytest.mark.parametrize("coverage", [1, 3, 4])
@pytest.mark.parametrize("popularity", POPULARITIES)
def test_the_fast_backup_table_builds_the_reference_backups_under_churn(method: str, coverage: int,
                                                                        popularity: str) -> None:
    shape = Shape(nodes=50, topics=25, min_topics=1, max_topics=8, popularity=popularity)
    work = Workload(shape, 7)
    initial = work.initial()
    runs = []
    for table in (BackupTable(), FastBackupTable()):
        dyn = ShadowDynAlg(low_oda_fast(initial)[0], rng=random.Random(7), coverage=coverage, method=method)
        dyn.table = table
        dyn.build_backups()
        runs.append(dyn)
    reference, fast = runs
    _tables(reference.table, fast.table)
    for kind, node, topics in work.rounds(set(initial), 40):
        if kind == "join":
            a, b = reference.join(node, topics), fast.join(node, topics)
        else:
            a, b = reference.leave(node), fast.leave(node)
        assert _same(a, b) and a.rebuilt == b.rebuilt
        _tables(reference.table, fast.table)
    assert reference.rng.random() == fast.rng.random()  # the same number of draws
    assert fast.table.check(fast.overlay) == []


@pytest.mark.parametrize("method", ["primal-dual", "greedy"])
def test_the_fast_backup_table_leaves_the_same_topics_short(method: str) -> None:
    """A topic nobody else subscribes to, and (primal-dual) candidates of weight 0 in an
    overlay without edges, where no cover can take anyone."""
    topics = {"a": frozenset({"x", "y", "lonely"}), "b": frozenset({"x"}), "c": frozenset({"y", "x"}),
              "d": frozenset({"y"})}
    for edges in ([], [("a", "b"), ("b", "c"), ("c", "d"), ("a", "c")]):
        tables = (BackupTable(), FastBackupTable())
        built = []
        for table in tables:
            overlay = TopicOverlay(topics, edges)
            rng = random.Random(3)
            built.append([table.build(overlay, v, 2, method, rng) for v in sorted(topics)])
        assert built[0] == built[1]
        assert any(b.short for b in built[0])
        _tables(*tables)
