"""The cross-overlay benchmark (`bench.overlays`) measures what it prints: behaviour only, no
timing.  A small run of all four overlays writes its JSON and table, every overlay reaches
its legitimate state, every publication reaches every subscriber (the clique in one hop, one
message per receiver), every repair ends legitimate; the graph measures and the frame count
are checked on small cases worked by hand."""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path

import pytest

from bench import overlays
from pubsub.kernel.message import Topic
from pubsub.tco.workload import Shape

SMALL = ["--quick", "--nodes", "30", "--topics", "6", "--max-topics", "3", "--events", "1", "--per-topic", "1",
         "--idle", "3"]


def test_a_small_run_of_the_four_overlays_prints_the_table_and_writes_its_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    overlays.main(SMALL)
    printed = capsys.readouterr().out
    for line in ("30 nodes, 6 topics, 2-3 topics each", "open parameter", "distinct peers per node, mean",
                 "repair messages per crash", "idle frames per node per interval", "supervisor messages per interval",
                 "tco / skip ring, mean distinct peers"):
        assert line in printed
    doc = json.loads((tmp_path / "bench-results" / "overlays-quick.json").read_text())
    assert doc["shape"] == {"nodes": 30, "topics": 6, "min_topics": 2, "max_topics": 3, "popularity": "uniform"}
    assert doc["simulated"] and "machine" in doc and doc["open_parameters"]
    assert set(doc["overlays"]) == {"skipring", "clique", "tco", "omen"}
    for name, result in doc["overlays"].items():
        static = result["static"]
        assert static["nodes"] == 30 and static["split_topics"] == 0, name
        assert result["publications"]["receivers_missed"] == 0, name
        assert result["publications"]["publications"] == 6
        for action in ("join", "leave", "crash"):
            assert result["repairs"][action]["events"] == 1
        assert all(run["reached"] for run in result["repairs"]["runs"])
        assert result["idle"]["frames_per_node"] <= result["idle"]["messages_per_node"]
        assert result["dissemination"] == ("flood" if name in ("tco", "omen") else "tree")
    clique = doc["overlays"]["clique"]
    assert clique["static"]["diameter_max"] == 1 and clique["publications"]["hops_max"] == 1
    assert clique["publications"]["messages_per_receiver"] == 1  # the arc broadcast: n - 1 Spreads
    assert doc["ratio_peers_tco_over_skipring"] == pytest.approx(
        doc["overlays"]["tco"]["static"]["peers_mean"] / doc["overlays"]["skipring"]["static"]["peers_mean"]
    )


def test_static_only_builds_the_ideal_overlays_without_the_simulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    overlays.main(["--static-only", "--nodes", "40", "--topics", "8", "--min-topics", "2", "--max-topics", "5"])
    doc = json.loads((tmp_path / "bench-results" / "overlays.json").read_text())
    assert not doc["simulated"]
    ideal = {name: r["ideal"] for name, r in doc["overlays"].items()}
    assert ideal["clique"]["diameter_max"] == 1
    assert ideal["tco"]["split_topics"] == 0 and ideal["skipring"]["split_topics"] == 0
    assert ideal["omen"]["split_topics"] == 0  # Low-ODA, what OMen mends towards
    # the clique's peers are every co-subscriber: never fewer than the other overlays'
    assert ideal["clique"]["peers_mean"] >= max(ideal["skipring"]["peers_mean"], ideal["tco"]["peers_mean"])


def test_diameters_by_bfs_inside_the_members() -> None:
    path = overlays.undirected([("a", "b"), ("b", "c"), ("c", "d")])
    assert overlays.diameter(path, {"a", "b", "c", "d"}) == 3
    assert overlays.diameter(path, {"a", "b"}) == 1
    assert overlays.diameter(path, {"a"}) == 0
    assert overlays.diameter(path, {"a", "c"}) == math.inf  # b is outside: induced, not connected
    ring = overlays.undirected([(str(i), str((i + 1) % 9)) for i in range(9)])
    assert overlays.diameter(ring, {str(i) for i in range(9)}) == 4
    rng = random.Random(3)
    graph = overlays.undirected([(str(rng.randrange(30)), str(rng.randrange(30))) for _ in range(60)])
    members = {str(i) for i in range(30) if rng.random() < 0.7}
    by_bfs = 0.0
    for start in members:  # every member's eccentricity, one BFS each
        seen = overlays.bfs(graph, start, members)
        by_bfs = math.inf if len(seen) < len(members) else max(by_bfs, max(seen.values()))
    assert overlays.diameter(graph, members) == by_bfs


def test_static_columns_count_distinct_peers_over_topics_once() -> None:
    topics_of = {"a": {"x", "y"}, "b": {"x", "y"}, "c": {"x"}, "d": {"y"}}
    per_topic = {"x": {("a", "b"), ("b", "c")}, "y": {("a", "b"), ("a", "d")}}
    got = overlays.static_columns(topics_of, per_topic)
    assert got["edges"] == 3  # {a, b} counted once although both topics use it
    assert got["peers_max"] == 2 and got["peers_mean"] == pytest.approx((2 + 2 + 1 + 1) / 4)
    assert got["diameter_max"] == 2 and got["split_topics"] == 0
    assert got["top10_nodes"] == 1 and got["peers_top10_mean"] == 2  # "a": two topics, first by name


def test_a_timeouts_messages_to_one_peer_count_as_one_frame() -> None:
    sim = overlays.MeteredSimulation(4, overlay="skipring")
    refs = [sim.add_node() for _ in range(5)]
    for ref in refs:
        for topic in ("p", "q"):
            sim.join(ref, Topic(topic))
    sim.run_for(20)
    before = overlays.snapshot(sim)
    sim.run_for(5)
    delta = overlays.since(sim, before)
    frames = sum(v for ref, v in delta["frames"].items() if ref != overlays.SUPERVISOR)
    sent = sum(v for ref, v in delta["sent"].items() if ref != overlays.SUPERVISOR)
    assert 0 < frames < sent  # two rings over the same five nodes: their checks share frames
    assert delta["sup_ticks"] >= 4


def test_the_tco_ideal_overlay_is_topic_connected() -> None:
    shape = Shape(nodes=50, topics=10, min_topics=2, max_topics=4)
    ideal = overlays.ideal_static(shape, 2, "tco")
    assert ideal["nodes"] == 50 and ideal["split_topics"] == 0
    assert ideal["diameter_max"] == ideal["induced_diameter_max"]  # tco's own edges are the induced ones
    split = overlays.static_columns({"a": {"t"}, "b": {"t"}}, {})
    assert split["split_topics"] == 1 and split["diameter_max"] == math.inf


@pytest.mark.integration
def test_idle_cpu_with_real_processes_stops_every_process_it_started() -> None:
    sample = overlays.cpu_sample(Shape(nodes=30, topics=6, min_topics=1, max_topics=2), 1, 2)
    assert len(sample) == 2 and all(1 <= len(topics) <= 2 for topics in sample)
    row = overlays.real_cpu("tco", sample, window=1.0, interval=0.3, timeout=90)
    assert row["legitimate_at_end"] and row["node_cpu_percent_mean"] is not None
    assert row["subscriptions"] == sum(map(len, sample))
    assert len(row["pids"]) == 3
    for pid in row["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
