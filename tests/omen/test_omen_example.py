"""Paper 003 §4.4's example: 12 nodes v0..v11, topics a-f; v10 leaves, v11 coordinates with
the shadow set {v1, v3, v5, v6, v11} and adds exactly {(v11, v1), (v11, v5), (v5, v6)}.

The copy gives neither the nodes' interests nor the edges (Fig. 2 is not in it), so they are
stated here: an instance on which the example's outcome follows, with the backup sets'
coverage as §4.4 says (v11.B(v10) covers c and f once, λ = 1; v11.B(v9) covers every topic of
v9 at least twice, λ = 2)."""

from __future__ import annotations

import random

import pytest

from pubsub.omen.circle import Circle
from pubsub.omen.repair import induced_overlay, repair_tco_on_churn
from pubsub.omen.views import Descriptor, LocalView, build_backups, coverage
from pubsub.topicgraph.graph import TopicOverlay, edge
from tests.tco.checker import split_topics

V = [f"v{i}" for i in range(12)]
INTERESTS = {
    "v0": "e", "v1": "ab", "v2": "d", "v3": "abd", "v4": "de", "v5": "abcf",
    "v6": "ef", "v7": "e", "v8": "de", "v9": "de", "v10": "abcf", "v11": "abc",
}
EDGES = [
    ("v10", "v1"), ("v10", "v5"), ("v10", "v6"), ("v10", "v11"),  # N(v10)
    ("v3", "v5"), ("v3", "v2"), ("v3", "v4"),
    ("v4", "v6"), ("v4", "v0"), ("v4", "v7"), ("v4", "v8"), ("v8", "v9"),
]
BACKUPS_OF_V10 = ["v3", "v5"]


def topics() -> dict[str, frozenset[str]]:
    return {v: frozenset(INTERESTS[v]) for v in V}


def overlay() -> TopicOverlay:
    return TopicOverlay(topics(), [edge(u, v) for u, v in EDGES])


def by_number(ref: str) -> int:
    return int(ref[1:])


def test_the_stated_instance_is_a_tco_before_the_leave() -> None:
    assert split_topics(topics(), {edge(u, v) for u, v in EDGES}) == {}


def test_v11_coordinates_the_leave_of_v10_and_v9_becomes_its_predecessor() -> None:
    circle = Circle(V, position=by_number)
    assert circle.coordinator("v10") == "v11"
    assert circle.predecessors("v11", 1) == ["v10"]
    circle.remove("v10")
    assert circle.coordinator("v10") == "v11"
    assert circle.predecessors("v11", 1) == ["v9"]
    assert circle.successors("v11", 2) == ["v0", "v1"]  # the circle wraps


def test_the_backups_of_v10_cover_c_and_f_once() -> None:
    backups = [Descriptor(b, topics()[b]) for b in BACKUPS_OF_V10]
    assert coverage(topics()["v10"], backups) == 1
    assert {t: sum(t in b.topics for b in backups) for t in "abcf"} == {"a": 2, "b": 2, "c": 1, "f": 1}


@pytest.mark.parametrize("connectivity", ["induced", "global"])
def test_the_repair_adds_exactly_the_papers_three_edges(connectivity: str) -> None:
    g = overlay()
    view = LocalView(Descriptor("v11", topics()["v11"]), coverage_factor=1)
    view.keep(["v10"])
    view.N["v10"] = frozenset(g.neighbors["v10"])
    view.B["v10"] = list(BACKUPS_OF_V10)
    shadow = view.shadow("v10")
    assert shadow == ["v1", "v11", "v3", "v5", "v6"]  # {v1, v3, v5, v6, v11}
    g.remove_node("v10")
    if connectivity == "induced":  # what v11 knows: the shadow nodes' topics and neighbours
        known = induced_overlay({s: g.topics[s] for s in shadow}, {s: g.neighbors[s] for s in shadow})
        mended = repair_tco_on_churn(known, shadow, INTERESTS["v10"], connectivity="induced")
        for u, v in mended.added:
            g.add_edge(u, v)
    else:
        mended = repair_tco_on_churn(g, shadow, INTERESTS["v10"], connectivity="global")
    assert mended.connected
    assert set(mended.added) == {edge("v11", "v1"), edge("v11", "v5"), edge("v5", "v6")}
    assert split_topics(dict(g.topics), g.edges()) == {}


def test_the_backups_v11_builds_for_v9_cover_each_of_its_topics_twice() -> None:
    g = overlay()
    g.remove_node("v10")
    candidates = {v: Descriptor(v, g.topics[v], frozenset(g.neighbors[v])) for v in g.topics}
    for seed in range(20):
        built = build_backups(candidates["v9"], candidates, 2, random.Random(seed))
        assert built.ready
        chosen = [candidates[b] for b in built.chosen]
        assert coverage(g.topics["v9"], chosen) >= 2
        assert all(b.topics & g.topics["v9"] for b in chosen)  # individual commitment (Eq. 2)
        assert "v9" not in built.chosen
