"""The end-to-end benchmark (`python -m bench endtoend`) runs and reports what it claims.

One run of the harness in its smallest form -- real processes, real servers: pubsub (a
4-node LocalCluster) beside the anchors whose servers exist here (Redis, JetStream), with
subscriber processes, the throughput run, CPU, frames and both idle scenarios -- and a check
of the JSON's fields and that the values are sane (rates > 0, zero loss, exactly K stored per
node).  No wall-time targets.  Plus the pieces that need no processes: payloads, CPU
readings, and a system that cannot run being reported as "not run: <reason>".
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bench.e2e.common import PAYLOAD_BYTES, cpu_ticks, make_payload, parse_payload
from bench.e2e.floor import children as floor_children
from bench.e2e.floor import frame as floor_frame
from bench.e2e.report import print_tables, summarize
from bench.e2e.run import STAMP_SLACK_NS, held_by_stamps
from bench.e2e.servers import RelayProcess, find_binary, missing_reason
from bench.e2e.systems import SYSTEMS, unavailable
from pubsub.ops.processes import pick_free_ports

ROOT = Path(__file__).resolve().parents[2]


def test_payload_round_trip_and_size() -> None:
    payload = make_payload("T", 4999, 123456789012345)
    assert len(payload) == PAYLOAD_BYTES
    assert parse_payload(payload) == ("T", 4999, 123456789012345)
    assert parse_payload(b"something else") is None


def test_cpu_ticks_of_this_process() -> None:
    sum(i * i for i in range(200_000))
    ticks = cpu_ticks(os.getpid())
    assert ticks is not None and ticks >= 0
    assert cpu_ticks(2**22 + 12345) is None  # no such pid


def test_a_missing_server_is_named_with_its_remedy() -> None:
    reason = missing_reason("no-such-server-binary", "json", "json")
    assert reason is not None and "no-such-server-binary not found" in reason and "apt-get install" in reason
    assert find_binary("sh") is not None
    assert missing_reason("sh", "no_such_module_xyz", "xyz-pkg") == (
        "the Python package xyz-pkg is missing (pip install -e '.[bench]')"
    )


def test_a_system_that_did_not_run_is_reported_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    runs = [{"system": "pubsub", "n": 4, "repeat": 0, "error": "ClusterTimeout: no ring"}]
    params = {
        "sizes": [4], "throughput_n": 4, "repeats": 1, "count": 10, "rate": 50.0, "payload_bytes": 64,
        "window": 32, "total": 100,
    }
    summary = summarize(runs, ["pubsub", "redis"], [4], 4)
    print_tables(summary, params, ["pubsub", "redis"], {"redis": "redis-server not found"})
    out = capsys.readouterr().out
    assert re.search(r"\bredis +not run: redis-server not found", out)
    assert re.search(r"\bpubsub +not run: all 1 runs failed", out)
    assert summary["ratios"]["latency_p50"]["redis"]["4"] is None


def test_the_last_node_holds_at_its_latest_commit_stamp_when_the_polls_agree() -> None:
    offset = 1_700_000_000_000 * 1_000_000 - 5_000_000_000  # wall ns minus monotonic ns
    lower, upper = 7_000_000_000, 7_100_000_000  # the polls around the last completion
    stamps = [1_700_000_000_000 + 2_010, 1_700_000_000_000 + 2_040, 1_700_000_000_000 + 1_990]
    # the latest stamp, 2,040 ms after the offset's origin, plus its rounding (1 ms)
    assert held_by_stamps(stamps, offset, (lower, upper)) == (5_000_000_000 + 2_041_000_000, "commit stamps")
    # a stamp outside the polls' bracket (a clock that jumped) is not trusted: the upper poll
    late = [*stamps[:2], 1_700_000_000_000 + 2_300]
    assert held_by_stamps(late, offset, (lower, upper)) == (upper, "status polls")
    early = [1_700_000_000_000 + 1_000] * 3
    assert held_by_stamps(early, offset, (lower, upper)) == (upper, "status polls")
    # within the slack of the bracket it is trusted, a millisecond beyond not
    edge = (lower - STAMP_SLACK_NS + offset) // 1_000_000 - 1  # held exactly at lower - slack
    assert held_by_stamps([edge], offset, (lower, upper)) == (lower - STAMP_SLACK_NS, "commit stamps")
    assert held_by_stamps([edge - 1], offset, (lower, upper)) == (upper, "status polls")
    # a node that gave no stamp: the polls; no node complete: nothing
    assert held_by_stamps([*stamps[:2], None], offset, (lower, upper)) == (upper, "status polls")
    assert held_by_stamps([], offset, None) == (None, "incomplete")


@pytest.mark.parametrize("n", [2, 3, 4, 5, 16, 17, 32, 100])
def test_the_floor_relays_spread_to_every_relay_once_along_arcs(n: int) -> None:
    """relay-floor's tree: from relay 0 with the whole ring, each relay is reached by exactly
    one frame (n - 1 in all), within ceil(log2 n) + 1 hops, as pubsub's arcs do."""
    reached = {0: 0}
    todo = [(0, n, 0)]
    sent = 0
    while todo:
        node, arc, hops = todo.pop()
        for offset, share in floor_children(n, arc):
            sent += 1
            target = (node + offset) % n
            assert target not in reached, (n, node, offset)
            reached[target] = hops + 1
            todo.append((target, share, hops + 1))
    assert sorted(reached) == list(range(n)) and sent == n - 1
    assert max(reached.values()) <= math.ceil(math.log2(n)) + 1


@pytest.mark.integration
def test_a_floor_relay_closes_connections_that_send_what_no_relay_sends(tmp_path: Path) -> None:
    (port,) = pick_free_ports(1)
    relay = RelayProcess(tmp_path, 0, [port])
    relay.start()
    try:
        for opening in (b"X", b"C" + floor_frame(2, b"p"), b"C" + (1 << 30).to_bytes(4, "big") + b"\0\1"):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(opening)
                assert sock.recv(16) == b""  # closed by the relay
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # and it still serves
            sock.sendall(b"C" + floor_frame(1, b"p") + floor_frame(1, b"q"))
            got = b""
            while len(got) < 2:
                more = sock.recv(16)
                assert more, got
                got += more
            assert got == b"AA"
        assert relay.process is not None and relay.process.poll() is None
    finally:
        relay.stop()


@pytest.mark.integration
def test_the_smallest_run_measures_every_system_here(tmp_path: Path) -> None:
    anchors = [s for s in ("redis", "jetstream") if unavailable(s) is None]
    if not anchors:
        pytest.skip(
            f"no anchor can run here: redis: {unavailable('redis')}; jetstream: {unavailable('jetstream')}"
        )
    # the order the harness runs them; pubsub-tls: TLS and signed publications beside the plain
    # path; pubsub-embedded: each node inside its subscriber process; relay-floor: the topology's floor
    systems = [s for s in SYSTEMS if s in ("pubsub", "pubsub-tls", "pubsub-embedded", "relay-floor", *anchors)]
    out = tmp_path / "e2e.json"
    done = subprocess.run(
        [
            sys.executable, "-m", "bench", "endtoend", "--quick", "--systems", ",".join(systems),
            "--sizes", "4", "--count", "20", "--warmup", "3", "--throughput-n", "4", "--total", "200",
            "--idle-n", "4", "--idle-seconds", "1", "--idle-topics", "5", "--quiet-wait", "0", "--out", str(out),
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert {"machine", "environment", "parameters", "guarantees", "systems", "summary", "runs", "idle",
            "errors", "run_seconds"} <= set(doc)
    assert doc["errors"] == [], doc["errors"]
    assert doc["systems"] == {s: "ran" for s in systems}
    assert set(doc["guarantees"]) == set(systems)
    assert [(r["system"], r["n"]) for r in doc["runs"]] == [(s, 4) for s in systems]

    for run in doc["runs"]:
        assert "error" not in run, run
        assert run["warmup"]["complete"], run
        lat = run["latency"]
        assert lat["acked"] == lat["sent"] == 20 and lat["complete"] == 20 and lat["incomplete"] == 0
        assert 0 < lat["p50_ms"] <= lat["p99_ms"] <= lat["max_ms"]
        assert lat["ack_p50_ms"] > 0 and len(lat["last_ms_by_id"]) == 20
        assert lat["cpu_ms_per_pub"] > 0  # the whole deployment's CPU per paced publication
        roles = lat["cpu_us_per_pub_by_role"]  # the same CPU by role: the harness publishes for every system
        assert roles["harness"]["count"] == 1 and roles["subscriber"]["count"] == 4
        if run["system"] in ("pubsub", "pubsub-tls"):
            assert roles["node 0"]["count"] == 1 and roles["member"]["count"] == 3 and roles["server"]["count"] == 1
        tput = run["throughput"]
        assert tput["acked"] == tput["sent"] == 200 and tput["failed"] == 0
        assert tput["held_per_s"] > 0 and tput["acked_per_s"] > 0 and tput["held_seconds"] > 0
        assert tput["zero_loss"] is True and tput["duplicates"] == 0
        assert tput["missing_per_subscriber"] == [0, 0, 0, 0]
        assert all(v is None or v >= 0 for v in tput["cpu_seconds"].values())
        for part in (lat, tput):
            assert part["contention"]["others_share"] >= 0 and part["contention"]["machine_busy_s"] >= 0
        if run["system"].startswith("pubsub"):  # frames counted at every node in the latency run
            frames = run["frames"]
            assert frames["publications"] == 20
            assert 0 < frames["publication_frames_per_pub_per_node"] <= frames["all_frames_per_pub_per_node"]
        if run["system"] == "pubsub-embedded":  # the subscriber processes are the nodes
            assert tput["held_from"] == "receipt times"
            assert tput["subscriber_cpu_us_per_msg"]["count"] == 4
        elif run["system"].startswith("pubsub"):
            assert tput["exactly_k_per_node"] is True
            assert tput["stored_per_node"] == [200] * 4 and tput["trie_added_per_node"] == [200] * 4
            assert tput["node_cpu_us_per_pub"]["count"] == 4 and tput["node_cpu_us_per_pub"]["median"] >= 0
            # when every node held them: its commit stamps, inside the bracket of the status polls
            assert tput["held_from"] == "commit stamps"
            assert tput["held_seconds_lower_bound"] - 0.003 <= tput["held_seconds"] <= tput["held_seconds_polled"] + 0.003
        elif run["system"] == "relay-floor":  # its relays count as its nodes
            assert tput["node_cpu_us_per_pub"]["count"] == 4 and tput["subscriber_cpu_us_per_msg"]["count"] == 4
        else:
            assert tput["server_cpu_us_per_pub"] is not None and tput["server_cpu_us_per_pub"] >= 0
            assert tput["subscriber_cpu_us_per_msg"]["count"] == 4

    ratios = doc["summary"]["ratios"]
    tls = ratios["tls_vs_plain"]
    assert tls["held_per_s"] > 0 and tls["acked_per_s"] > 0 and tls["latency_p50"]["4"] > 0
    assert "ratios pubsub-tls/pubsub" in done.stdout
    assert "CPU per publication of the whole deployment in the latency run" in done.stdout
    assert "The same CPU by role" in done.stdout
    for mine in (ratios, ratios["embedded"]):
        for anchor in anchors:
            assert mine["latency_p50"][anchor]["4"] > 0 and mine["paced_cpu"][anchor]["4"] > 0
            assert mine["held_per_s"][anchor] > 0 and mine["acked_per_s"][anchor] > 0
    assert ratios["embedded"]["latency_p50"]["pubsub"]["4"] > 0  # beside the daemons too
    assert "Ratios pubsub-embedded/X" in done.stdout
    for anchor in anchors:  # the floor against the anchors, and pubsub against the floor
        assert ratios["floor"]["latency_p50"][anchor]["4"] > 0 and ratios["floor"]["held_per_s"][anchor] > 0
    assert ratios["latency_p50"]["relay-floor"]["4"] > 0
    assert "Ratios relay-floor/X" in done.stdout

    assert [(i["n"], i["topics"]) for i in doc["idle"]] == [(4, 1), (4, 5)]
    for idle in doc["idle"]:
        assert "error" not in idle, idle
        assert idle["window_s"] > 0 and idle["peers_per_node"]["min"] >= 1 and "contention" in idle
        assert idle["frames_per_s_per_node"]["min"] >= 0 and idle["cpu_pct_per_node"]["min"] >= 0

    assert "not run" not in done.stdout
    for system in systems:
        assert doc["guarantees"][system] in done.stdout
