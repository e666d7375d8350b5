"""The tools' view of a `tco` topic (`pubsub.tco.views`), on statuses of a simulated overlay:
the legitimacy checks agree with the simulator's oracle and find what a wrong report holds;
the web view draws each edge once; `pubsub status --node` prints the table."""

from __future__ import annotations

import copy
from typing import Any

from pubsub.cli.formats import format_node_status
from pubsub.kernel import registry
from pubsub.kernel.message import Topic
from pubsub.sim.world import Simulation
from pubsub.tco.views import legitimate, reports_legitimate, web_topic
from tests.tco.test_tco_sim import converge, subscribe_all

TOPIC = Topic("t0")


def _sim() -> Simulation:
    sim = Simulation(21, overlay="tco")
    subscribe_all(sim, 14, 3, seed=21)
    converge(sim)
    return sim


def _entries(sim: Simulation) -> dict[str, Any]:
    return {
        ref: node.status()["topics"][TOPIC] for ref, node in sim.nodes.items() if TOPIC in node.status()["topics"]
    }


def test_a_legitimate_topic_is_found_legitimate_by_both_checks() -> None:
    sim = _sim()
    assert legitimate(sim.supervisor.status(), _entries(sim), TOPIC) == []
    assert reports_legitimate(_entries(sim))
    assert registry.overlay("tco").legitimate is not None


def test_a_node_holding_other_neighbours_or_a_missing_member_is_found() -> None:
    sim = _sim()
    entries = _entries(sim)
    victim = sorted(entries)[0]
    wrong = copy.deepcopy(entries)
    wrong[victim]["neighbours"] = []
    problems = legitimate(sim.supervisor.status(), wrong, TOPIC)
    assert any(p.startswith(f"{victim}: holds neighbours []") for p in problems), problems
    assert not reports_legitimate(wrong)
    missing = {r: e for r, e in entries.items() if r != victim}
    assert any("did not report" in p for p in legitimate(sim.supervisor.status(), missing, TOPIC))
    body = sim.supervisor.status()
    body["topics"][TOPIC]["edges"] = []  # the record's own edges split the topic
    assert "the supervisor's edges do not connect the topic's subscribers" in legitimate(body, entries, TOPIC)


def test_the_web_view_draws_every_edge_once_and_finds_no_problem() -> None:
    sim = _sim()
    supervisor = sim.supervisor.status()
    answers = {ref: node.status() for ref, node in sim.nodes.items()}
    drawn = web_topic(TOPIC, supervisor["topics"][TOPIC], answers)
    assert drawn["legitimate"], drawn["problems"]
    edges = {(e["from"], e["to"]) for e in drawn["edges"]}
    assert edges == {tuple(e) for e in supervisor["topics"][TOPIC]["edges"]}


def test_pubsub_status_prints_a_nodes_neighbours_with_the_topics_shared() -> None:
    sim = _sim()
    ref = max(sim.nodes, key=lambda r: len(sim.nodes[r].overlay.table_neighbours))
    body = sim.nodes[ref].status()
    text = format_node_status(dict(body))
    degree = len(sim.nodes[ref].overlay.table_neighbours)
    assert f"tco table: degree {degree} (distinct peers)" in text
    for peer, shared in sim.nodes[ref].overlay.table_neighbours.items():
        assert f"{peer}" in text and ", ".join(sorted(shared)) in text
    assert "label" not in text  # no skip ring rows


def test_the_analysis_tracker_finds_a_converged_tco_legitimate_and_a_broken_edge_not() -> None:
    """`TopicGraphTracker` on the snapshots the node daemons' telemetry would write
    (`pubsub.node.telemetry.node_snapshot`) of a simulated overlay."""
    from pubsub.node.telemetry import node_snapshot
    from pubsub.ops.analysis.timeline import tracker_factory

    sim = _sim()
    tracker = tracker_factory("tco")()
    snapshots = {ref: node_snapshot(entry) for ref, entry in _entries(sim).items()}
    for ref, snapshot in snapshots.items():
        tracker.apply(ref, snapshot)
    got = tracker.measures()
    assert got["legitimate"] and got["exact_nodes"] == got["members"] == len(snapshots)
    assert got["correct_edges"] == got["compared_edges"] == 2 * len(sim.supervisor.status()["topics"][TOPIC]["edges"])
    assert sorted(tracker.degrees()) == sorted(len(s["neighbours"]) for s in snapshots.values())
    victim = sorted(snapshots)[0]
    tracker.apply(victim, {**snapshots[victim], "neighbours": []})  # it drops its edges: the others' go unconfirmed
    broken = tracker.measures()
    assert not broken["legitimate"] and broken["exact_nodes"] < broken["members"]
    tracker.apply(victim, None)  # it leaves: the rest may be split
    assert tracker.measures()["members"] == len(snapshots) - 1
