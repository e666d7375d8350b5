"""`pubsub analyze --overlay omen` on the events a real omen cluster wrote: the topics'
TCO-ness and degrees over time from the nodes' snapshots (`pubsub.topicgraph.tracker.
TopicGraphTracker`, shared with tco) and the supervisor's churn events, with a real Spark
session."""

from __future__ import annotations

from pathlib import Path

import pytest

from pubsub.ops.localcluster import LocalCluster
from tests.omen.test_omen_cluster import SETTLE, omen_problems
from tests.tco.test_tco_analysis import analyzed

pytestmark = pytest.mark.integration

TOPICS = {0: ["a", "b"], 1: ["a"], 2: ["a", "b"], 3: ["b"]}


def test_pubsub_analyze_measures_an_omen_run_and_lists_its_churn_events(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with LocalCluster(tmp_path / "cluster", 4, interval=0.2, events_dir=run, overlay="omen") as c:
        for node, topics in TOPICS.items():
            for topic in topics:
                c.subscribe(node, topic)
        wanted = {c.node_refs[i]: set(ts) for i, ts in TOPICS.items()}
        c.poll(lambda: omen_problems(c, wanted), SETTLE, "an omen TCO of the four nodes")
        c.unsubscribe(3, "b")  # node 3's last topic: a leave event, repaired by its coordinator
        del wanted[c.node_refs[3]]
        c.poll(lambda: omen_problems(c, wanted), SETTLE, "an omen TCO of the three nodes left")
    repairs = analyzed(run, "omen", ("a", "b"))
    assert repairs["by_kind"].get("join", 0) >= 4 and repairs["by_kind"].get("leave") == 1, repairs
