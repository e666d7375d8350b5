"""The many-topics idle benchmark (`python -m bench topics`, issue 14 item 5) runs and
reports what it claims.

One run at the smallest size -- real processes: 2 nodes in 1, then 3 topics -- and a check
of the JSON's structure and that a node sends at most about one frame per peer per Timeout
interval however many topics it shares with its peers (bounded at 1.5 for the noise of a
short window: a window's edges cut intervals).  No wall-time assertions.  Plus the pieces
that need no processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.topics import peer_connections, ratio, summarize

ROOT = Path(__file__).resolve().parents[2]


def test_summary_is_the_median_and_spread_of_the_windows() -> None:
    windows = [{"frames_per_s_per_node": v, "cpu_pct_per_node": None} for v in (3.0, 1.0, 2.0)]
    summary = summarize(windows)
    assert summary["frames_per_s_per_node"] == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert summary["cpu_pct_per_node"] == {"median": None, "min": None, "max": None}
    rows = [
        {"topics_per_node": 1, "frames_per_s_per_node": {"median": 4.0}},
        {"topics_per_node": 10, "frames_per_s_per_node": {"median": 6.0}},
    ]
    assert ratio(rows) == {"topics": 10, "over": 1, "value": 1.5}
    assert ratio(rows[:1]) is None


def test_connections_of_an_unknown_process_are_none() -> None:
    assert peer_connections({"gone": 2**22 + 12345}) == {"gone": {"connections": 0, "peers_connected": 0}}


def test_the_smallest_run(tmp_path: Path) -> None:
    out = tmp_path / "topics.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "topics", "--nodes", "2", "--topics", "1", "3", "--windows", "2",
         "--window-intervals", "6", "--settle-intervals", "3", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "frames/s per node, 3 topics over 1" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["machine"]["cpus"] >= 1 and doc["nodes"] == 2 and doc["windows"] == 2
    assert [row["topics_per_node"] for row in doc["rows"]] == [1, 3]
    assert doc["ratio_frames"]["topics"] == 3 and doc["ratio_frames"]["value"] > 0
    for row in doc["rows"]:
        assert "error" not in row
        assert len(row["windows"]) == 2
        for window in row["windows"]:
            assert len(window["nodes"]) == 2
            for node in window["nodes"]:
                assert node["topics"] == row["topics_per_node"]
                # the other node and the supervisor
                assert node["peers"] == 2
                assert node["frames"] > 0
                assert node["frames_per_peer_per_interval"] <= 1.5
                # one connection per peer, whatever the topics
                assert node["connections"] == node["peers_connected"] <= 2
        for key in ("frames_per_s_per_node", "frames_per_peer_per_interval", "cpu_pct_per_node",
                    "connections_per_node"):
            assert set(row[key]) == {"median", "min", "max"}
            assert row[key]["min"] <= row[key]["median"] <= row[key]["max"]
