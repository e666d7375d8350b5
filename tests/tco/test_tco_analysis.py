"""`pubsub analyze --overlay tco` on the events a real tco cluster wrote: the topics'
legitimacy over time from the nodes' snapshots (`pubsub.topicgraph.tracker.TopicGraphTracker`) and
the supervisor's repairs, with a real Spark session."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pubsub.ops.localcluster import LocalCluster
from tests.tco.checker import split_topics

pytestmark = pytest.mark.integration

ANALYZE_TIMEOUT = 600.0
TOPICS = {0: ["a", "b"], 1: ["a"], 2: ["a", "b"], 3: ["b"]}


def analyzed(run: Path, overlay: str, topics: tuple[str, ...]) -> dict[str, Any]:
    """Run `pubsub analyze RUN --overlay OVERLAY` (a real Spark session); check that every
    topic of `topics` is legitimate at the end with a node of degree 1 or more; the
    summary's repairs."""
    done = subprocess.run(
        [sys.executable, "-m", "pubsub.cli.main", "analyze", str(run), "--overlay", overlay],
        capture_output=True, text=True, timeout=ANALYZE_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((run / "analysis" / "summary.json").read_text())
    for topic in topics:
        assert summary["topics"][topic]["legitimate_at_end"], summary["topics"][topic]
        assert summary["topics"][topic]["degree"]["max"] >= 1
    return dict(summary["repairs"])


def test_pubsub_analyze_measures_a_tco_run_and_lists_its_repairs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with LocalCluster(tmp_path / "cluster", 4, interval=0.2, events_dir=run, overlay="tco", web=True) as c:
        for node, topics in TOPICS.items():
            for topic in topics:
                c.subscribe(node, topic)

        def settled() -> list[str]:
            record = c.supervisor_status()["tables"]
            if len(record) != 4:
                return [f"{len(record)} nodes in the record"]
            edges = {tuple(sorted((a, b))) for a, e in record.items() for b in e["neighbours"]}
            split = split_topics({r: e["topics"] for r, e in record.items()}, edges)
            tables = [c.node_status(i).get("table_topics") for i in range(4)]
            wrong = [i for i, t in enumerate(tables) if t != sorted(TOPICS[i])]
            return [f"split {split}"] if split else [f"nodes {wrong} not settled"] if wrong else []

        c.poll(settled, 60, "a TCO with every table settled")
        record = c.supervisor_status()["topics"]

        def drawn() -> list[str]:  # the supervisor's web view: each topic's edges, legitimate
            assert c.web_url is not None
            with urllib.request.urlopen(c.web_url + "api/rings", timeout=5) as response:
                view = json.load(response)["topics"]
            if not set(view) >= {"a", "b"}:
                return [f"the view shows {sorted(view)}"]
            wrong = [t for t in ("a", "b") if not view[t]["legitimate"]]
            unlike = [
                t for t in ("a", "b")
                if {(e["from"], e["to"]) for e in view[t]["edges"]} != {tuple(e) for e in record[t]["edges"]}
            ]
            return [f"{t}: {view[t]['problems']}" for t in wrong] + [f"{t}: edges unlike the record's" for t in unlike]

        c.poll(drawn, 30, "the web view to draw the record's edges and find both topics legitimate")
        corrupted = subprocess.run(
            [sys.executable, "-m", "pubsub.cli.main", "chaos", "corrupt-supervisor", "--admin", c.admin_ref("supervisor"),
             "--seed", "3", "--json"],
            capture_output=True, text=True, timeout=60,
        )
        assert corrupted.returncode == 0, corrupted.stderr
        assert "edges_removed" in corrupted.stdout or "wrong_backups" in corrupted.stdout, corrupted.stdout
        c.poll(lambda: [] if c.supervisor_status()["counters"].get("audit_repairs", 0) >= 1 else ["no audit yet"],
               60, "the audit to mend the corrupted record")
        c.poll(settled, 60, "a TCO again, every table settled")
        c.unsubscribe(3, "b")  # a leave: one more repair
        c.poll(lambda: [] if len(c.supervisor_status()["tables"]) == 3 else ["node 3 still listed"], 60,
               "the leave")
        c.poll(lambda: [] if all(c.node_status(i).get("table_topics") == sorted(TOPICS[i]) for i in range(3))
               else ["unsettled"], 60, "the three tables")
    repairs = analyzed(run, "tco", ("a", "b"))
    assert repairs["by_kind"].get("join", 0) >= 1 and repairs["by_kind"].get("leave") == 1, repairs
    assert repairs["by_kind"].get("audit", 0) >= 1, repairs  # the corrupted record was mended
    assert repairs["edges_added"] >= 3 and repairs["edges_removed"] >= 1, repairs
