"""The tco cores on paper 001's rules: findLowEdge's choice, Low-ODA's TCO, the backup
sets' properties, Figure 1's leave repair, and ShadowDynAlg / NaiveDynAlg under churn,
every overlay judged by the independent checker (tests/tco/checker.py)."""

from __future__ import annotations

import random

import pytest

from pubsub.tco.backups import BackupTable
from pubsub.tco.dynamic import NaiveDynAlg, ShadowDynAlg, recompute
from pubsub.tco.workload import Shape, Workload
from pubsub.topicgraph.graph import Components, TopicOverlay, edge
from pubsub.topicgraph.lowoda import construct_low_edges, find_low_edge, low_oda
from tests.tco.checker import split_topics


def tco_problems(overlay: TopicOverlay) -> dict[str, int]:
    return split_topics(overlay.topics, overlay.edges())


# --- findLowEdge ------------------------------------------------------------------------------
def _two_candidates() -> tuple[TopicOverlay, Components]:
    """e1 = (a, b) joins four topics but raises the maximum degree (a has it); e2 = (c, d)
    joins one topic and raises nothing."""
    overlay = TopicOverlay(
        {"a": "wxyz", "b": "wxyz", "c": "q", "d": "q", "h1": "", "h2": ""},
        [("a", "h1"), ("a", "h2")],
    )
    return overlay, Components(overlay, "wxyzq")


@pytest.mark.parametrize(("rho", "chosen"), [(1.0, ("a", "b")), (3.0, ("a", "b")), (3.99, ("a", "b")),
                                             (4.0, ("c", "d")), (10.0, ("c", "d"))])
def test_find_low_edge_takes_e1_exactly_when_its_contribution_exceeds_rho_times_e2s(
    rho: float, chosen: tuple[str, str]
) -> None:
    overlay, components = _two_candidates()
    assert components.contribution("a", "b") == 4 and components.contribution("c", "d") == 1
    assert find_low_edge(overlay, components, [("a", "b"), ("c", "d")], rho) == (
        chosen, components.contribution(*chosen))


def test_find_low_edge_finds_nothing_when_no_edge_contributes() -> None:
    overlay = TopicOverlay({"a": "x", "b": "x", "c": "y"}, [("a", "b")])
    assert find_low_edge(overlay, Components(overlay, "xy"), [("a", "c"), ("b", "c")], 3.0) is None


# --- Low-ODA -----------------------------------------------------------------------------------
@pytest.mark.parametrize("popularity", ["uniform", "zipf", "exponential"])
def test_low_oda_builds_a_topic_connected_overlay(popularity: str) -> None:
    topics = Workload(Shape(nodes=60, topics=20, min_topics=2, max_topics=8, popularity=popularity), seed=5).initial()
    overlay = low_oda(topics)
    assert tco_problems(overlay) == {}
    assert all(overlay.shared(u, v) for u, v in overlay.edges())  # every edge joins something
    assert overlay.max_degree() < len(topics) - 1


def test_a_topic_with_one_subscriber_gets_no_edge() -> None:
    overlay = low_oda({"a": frozenset("x"), "b": frozenset("y")})
    assert overlay.edges() == set()


# --- backups ------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["primal-dual", "greedy"])
@pytest.mark.parametrize("coverage", [1, 3])
def test_backup_sets_cover_each_topic_lambda_times_and_primaries_mirror_them(method: str, coverage: int) -> None:
    topics = Workload(Shape(nodes=80, topics=25, min_topics=2, max_topics=9), seed=11).initial()
    overlay = low_oda(topics)
    table = BackupTable()
    rng = random.Random(3)
    for node in sorted(topics):
        table.build(overlay, node, coverage, method, rng)
    assert table.check(overlay) == []
    for node, node_topics in topics.items():
        backups = table.backups.get(node, [])
        assert len(set(backups)) == len(backups) and node not in backups
        assert all(overlay.shared(node, b) for b in backups)  # property (1)
        for topic in node_topics:
            others = len(overlay.subscribers[topic]) - 1
            covered = sum(1 for b in backups if topic in topics[b])
            short = table.short.get(node, {}).get(topic, 0)
            assert covered + short >= coverage, (node, topic)  # property (2), λ times, or said short
            if others == 0:
                assert covered == 0 and short == coverage
    reverse = {}
    for node, backups in table.backups.items():
        for b in backups:
            reverse.setdefault(b, set()).add(node)
    assert {n: p for n, p in table.primaries.items() if p} == reverse


def test_primal_dual_never_drives_a_weight_below_zero_and_terminates_on_a_lonely_topic() -> None:
    """The individual commitment of every candidate is bounded by its weight (the residual
    stays >= 0: asserted inside, over many builds), and a topic nobody else has is left
    short instead of looping."""
    topics = Workload(Shape(nodes=50, topics=15, min_topics=1, max_topics=6, popularity="zipf"), seed=2).initial()
    topics["lonely"] = frozenset({"only-here", *sorted(topics["n00000"])[:1]})
    overlay = low_oda(topics)
    table = BackupTable()
    rng = random.Random(9)
    for _ in range(5):
        for node in sorted(topics):
            table.build_by_primal_dual(overlay, node, 4, rng)
    assert table.short["lonely"]["only-here"] == 4
    assert table.check(overlay) == []


def test_lambda_below_one_is_refused() -> None:
    overlay = TopicOverlay({"a": "x", "b": "x"})
    with pytest.raises(ValueError, match="at least 1"):
        BackupTable().build_greedily(overlay, "a", 0)


# --- Figure 1 ---------------------------------------------------------------------------------
def test_figure_1_the_leave_repair_works_inside_the_shadow_set() -> None:
    """v' leaves with neighbours {v3, v9} and backups {v1, v4, v11}: the shadow set is
    {v3, v9, v1, v4, v11} and every edge the repair adds lies inside it.

    The figure shows three edges, (v3, v4), (v9, v11) and (v3, v9).  No assignment of
    topics makes Low-ODA add exactly those: with v' adjacent to v3 and v9 only, every
    topic the leave splits has both v3 and v9 (each part of it reached v' through one of
    them), so (v3, v9) joins every split topic and has the largest contribution throughout;
    e2 can differ from it only when (v3, v9) raises the maximum degree more, which needs
    deg(v9) > deg(v3) for (v3, v4) and, one edge later, deg(v3) > deg(v9) for (v9, v11).
    So this test states its topics and asserts what Low-ODA does on them."""
    overlay = TopicOverlay(
        {"v'": "ab", "v1": "ab", "v3": "ab", "v4": "a", "v9": "ab", "v11": "b", "v5": "a", "v6": "b"},
        [("v'", "v3"), ("v'", "v9"), ("v9", "v4"), ("v3", "v11"), ("v3", "v1"), ("v4", "v5"), ("v11", "v6")],
    )
    assert tco_problems(overlay) == {}
    dyn = ShadowDynAlg(overlay, rng=random.Random(1))
    dyn.table.assign("v'", ["v1", "v4", "v11"])
    repair = dyn.leave("v'")
    assert repair.shadow == ["v1", "v11", "v3", "v4", "v9"]
    assert sorted(repair.removed) == [edge("v'", "v3"), edge("v'", "v9")]
    assert repair.added == [("v1", "v9")]  # contribution 2 (a and b), the lower-degree end
    assert all(u in repair.shadow and v in repair.shadow for u, v in repair.added)
    assert tco_problems(overlay) == {} and not repair.widened


# --- churn ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(20))
def test_shadow_dyn_alg_keeps_a_tco_through_churn_and_repairs_only_where_the_paper_says(seed: int) -> None:
    work = Workload(Shape(nodes=40, topics=12, min_topics=1, max_topics=5, popularity="uniform"), seed=seed)
    overlay = low_oda(work.initial())
    dyn = ShadowDynAlg(overlay, rng=random.Random(seed))
    dyn.build_backups()
    present = set(overlay.topics)
    for kind, node, topics in work.rounds(present, 25):
        if kind == "join":
            repair = dyn.join(node, topics)
            backups = set(dyn.table.backups.get(node, []))
            if not repair.widened:
                assert all(node in e and (set(e) - {node}) <= backups for e in repair.added), repair
            assert repair.removed == []
        else:
            before_edges = set(overlay.edges())
            neighbours = {e[0] if e[1] == node else e[1] for e in before_edges if node in e}
            repair = dyn.leave(node)
            assert set(repair.removed) == {edge(node, n) for n in neighbours}
            if not repair.widened:
                assert all(u in repair.shadow and v in repair.shadow for u, v in repair.added), repair
        assert tco_problems(overlay) == {}, (seed, kind, node)
        assert dyn.table.check(overlay) == []


def test_naive_dyn_alg_and_recomputing_keep_a_tco_too() -> None:
    work = Workload(Shape(nodes=30, topics=10, min_topics=1, max_topics=4), seed=4)
    overlay = low_oda(work.initial())
    naive = NaiveDynAlg(overlay)
    present = set(overlay.topics)
    for kind, node, topics in work.rounds(present, 15):
        if kind == "join":
            naive.join(node, topics)
        else:
            naive.leave(node)
        assert tco_problems(overlay) == {}
    fresh, changed = recompute(overlay)
    assert tco_problems(fresh) == {} and changed == len(fresh.edges() ^ overlay.edges())


def test_construct_low_edges_reports_a_split_it_cannot_mend() -> None:
    overlay = TopicOverlay({"a": "x", "b": "x", "c": "x"})
    done = construct_low_edges(overlay, "x", [("a", "b")])
    assert done.added == [("a", "b")] and not done.connected


@pytest.mark.parametrize("seed", range(10))
def test_a_node_changing_its_topics_is_repaired_as_a_leave_and_a_join_restricted_to_the_change(seed: int) -> None:
    """Beyond the paper: dropped topics are mended inside the node's shadow set, added ones
    by edges from the node to its rebuilt backups; edges left with no shared topic go."""
    work = Workload(Shape(nodes=40, topics=12, min_topics=1, max_topics=5), seed=seed)
    overlay = low_oda(work.initial())
    dyn = ShadowDynAlg(overlay, rng=random.Random(seed))
    dyn.build_backups()
    rng = random.Random(seed + 100)
    for _ in range(20):
        node = rng.choice(sorted(overlay.topics))
        shadow_before = (overlay.neighbors[node] | set(dyn.table.backups.get(node, []))) - {node}
        topics = work.topics_of_a_node()
        repair = dyn.change(node, topics)
        assert overlay.topics[node] == topics
        assert all(overlay.shared(u, v) for u, v in overlay.edges())  # no edge without a shared topic
        assert all(node in e for e in repair.removed)
        if not repair.widened:
            backups = set(dyn.table.backups.get(node, []))
            for u, v in repair.added:
                assert (u in shadow_before and v in shadow_before) or (node in (u, v) and {u, v} - {node} <= backups)
        assert tco_problems(overlay) == {}, (seed, node)
        assert dyn.table.check(overlay) == []
    unchanged = dyn.change(node, overlay.topics[node])
    assert unchanged.changed == 0 and unchanged.rebuilt == []
