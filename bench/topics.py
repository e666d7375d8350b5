"""Issue 14, item 5: idle maintenance traffic and CPU of a node against the topics it is in.

    python -m bench topics [--nodes 4] [--topics 1 10 100 1000] [--windows 3] [--quick]

Real processes: one `LocalCluster` (a supervisor and `--nodes` node daemons, the daemons'
default Timeout interval; the nodes' stores in memory unless `--durable`, which changes
nothing while no publication exists but spares each join an fsync of the topics file) whose
nodes join, row after row, more topics -- every node every topic: T = 1, then 9 more topics
(10), then 90 more (100), then 900 more (1,000).  With 4 nodes, a node in one topic already
has the 3 others as ring neighbours or shortcuts, so every row has the same peers (with 6,
a node has 3 node peers in one topic and 5 in ten; the table shows peers per row).  Joins
go through the client library's request (as `Client.join` sends it), several in flight at
once.  Once every topic's ring is legitimate (`ring_problems` against the
supervisor's membership, polled with a bound) and has settled a few intervals, the harness
measures `--windows` consecutive windows of `--window-intervals` intervals each:

* frames per second per node: `stats.frames_out` of the node's status, every kind a node
  sends to peers (not the replies to our status requests); a `bundle` frame counts one;
* frames per peer per interval: that divided by the node's distinct peers (every reference
  its topics name, plus the supervisor) and by the intervals of the window -- the target is
  at most 1 however many topics the node shares with a peer;
* connections per node: established TCP connections from /proc whose other end belongs to
  another daemon of the cluster (the harness's own status connections are not counted), and
  the distinct daemons they reach;
* CPU % of one core per node (utime + stime from /proc), and the supervisor's;
* what else ran on the machine meanwhile (`Contention`).

Each row reports the median over the windows and their spread [min-max] (the machine is
shared); the last line is the ratio frames/s per node at the largest T over T = 1, whose
acceptance bound is 2.  Results: `bench-results/topics.json` (`--out`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.e2e.common import (
    kinds_delta,
    rnd,
    run_async,
)
from bench.e2e.idle import observe, peer_frames, peers_of
from bench.e2e.pubsub_system import default_interval, topic_problems
from bench.machine import machine
from pubsub.kernel.control import ErrorReply, Reply, StatusRequest
from pubsub.kernel.message import Message, Topic
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.members import members_of
from pubsub.publications.messages import JoinTopic
from pubsub.runtime.client import request

RESULTS = Path("bench-results")
DEFAULT_TOPICS = [1, 10, 100, 1000]
QUICK_TOPICS = [1, 10, 100]
#: Joins in flight at once per node (each is one short client connection).
JOIN_PER_NODE = 4
#: Topics joined before waiting for their rings (a node joining hundreds of rings at once
#: is busy for a long while; the rings of a chunk form in a few intervals).
JOIN_CHUNK = 100
START_TIMEOUT = 60.0
#: A node busy with a thousand topics may take more than the client library's 1 s handshake
#: bound to answer a new connection; the harness waits longer (and retries), since what it
#: measures is the nodes, not its own patience.
HANDSHAKE_S = 30.0
REQUEST_S = 60.0
ATTEMPTS = 5


def topic_name(k: int) -> str:
    return f"many-{k:04d}"


# --- connections from /proc -----------------------------------------------------------------
def _socket_inodes(pid: int) -> set[str]:
    out: set[str] = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(target[8:-1])
    except OSError:
        pass
    return out


def _tcp_table() -> dict[str, tuple[str, str]]:
    """inode -> (local, remote) of every established TCP socket (IPv4 and IPv6)."""
    table: dict[str, tuple[str, str]] = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "01":  # ESTABLISHED
                table[fields[9]] = (fields[1], fields[2])
    return table


def peer_connections(pids: dict[str, int]) -> dict[str, dict[str, int]]:
    """Per daemon: established connections whose other end is another daemon of `pids`, and
    how many distinct daemons they reach."""
    table = _tcp_table()
    sockets = {name: [table[i] for i in _socket_inodes(pid) if i in table] for name, pid in pids.items()}
    owner = {local: name for name, conns in sockets.items() for local, _ in conns}
    out: dict[str, dict[str, int]] = {}
    for name, conns in sockets.items():
        others = [owner[remote] for _, remote in conns if owner.get(remote, name) != name]
        out[name] = {"connections": len(others), "peers_connected": len(set(others))}
    return out


# --- requests ---------------------------------------------------------------------------------
async def ask(ref: str, msg: Message) -> dict[str, Any]:
    """One control request (the client library's `request`, as `Client` sends it), with a
    patient handshake and a few attempts; the reply body."""
    for attempt in range(ATTEMPTS):
        try:
            reply = await request(ref, msg, REQUEST_S, handshake=HANDSHAKE_S)
        except Exception:  # noqa: BLE001 - retried, then raised
            if attempt == ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.5 * (attempt + 1))
            continue
        if isinstance(reply, ErrorReply):
            raise RuntimeError(f"{ref} refused {msg.kind}: {reply.code}: {reply.detail}")
        if not isinstance(reply, Reply):
            raise RuntimeError(f"{ref} answered {msg.kind} with {reply!r}")
        return reply.body
    raise AssertionError("unreachable")


async def statuses(refs: list[str]) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(ask(ref, StatusRequest()) for ref in refs)))


async def join_all(refs: list[str], topics: list[str]) -> None:
    """Every node joins every topic, at most `JOIN_PER_NODE` requests in flight per node."""

    async def node(ref: str) -> None:
        gate = asyncio.Semaphore(JOIN_PER_NODE)

        async def one(topic: str) -> None:
            async with gate:
                await ask(ref, JoinTopic(topic=Topic(topic)))

        await asyncio.gather(*(one(topic) for topic in topics))

    await asyncio.gather(*(node(ref) for ref in refs))


def ring_ready_problems(cluster: LocalCluster, n: int, topics: list[str]) -> list[str]:
    """What keeps every topic's ring from being legitimate with n members (as
    `bench.e2e.pubsub_system.ring_ready_problems`, with the patient requests above)."""

    async def every() -> list[dict[str, Any]]:
        return await statuses([cluster.supervisor.ref, *cluster.node_refs])

    supervisor, *bodies = run_async(every())
    problems: list[str] = []
    for topic in topics:
        states = {ref: body["topics"][topic] for ref, body in zip(cluster.node_refs, bodies, strict=True)
                  if topic in (body.get("topics") or {})}
        problems += topic_problems(topic, n, members_of(supervisor, topic), states)
    return problems


# --- one window -----------------------------------------------------------------------------
async def window(refs: list[str], pids: dict[str, int], seconds: float, interval: float) -> dict[str, Any]:
    seen = await observe(refs, pids, seconds, statuses)  # our patient requests (`ask`)
    conns = peer_connections(pids)
    cpu, elapsed, others = seen.cpu, seen.elapsed, seen.contention
    intervals = elapsed / interval
    nodes: list[dict[str, Any]] = []
    by_kind: dict[str, int] = {}
    for i, (b, a) in enumerate(zip(seen.before, seen.after, strict=True)):
        sent = peer_frames(b, a)
        for kind, count in sent.items():
            by_kind[kind] = by_kind.get(kind, 0) + count
        frames = sum(sent.values())
        peers = len(peers_of(a))
        name = f"node-{i:02d}"
        seconds_cpu = cpu.get(name)
        bundled = (a.get("stats") or {}).get("bundled_out") or {}
        bundled_before = (b.get("stats") or {}).get("bundled_out") or {}
        nodes.append(
            {
                "frames": frames,
                "peers": peers,
                "frames_per_s": frames / elapsed,
                "frames_per_peer_per_interval": frames / max(peers, 1) / intervals,
                "messages_bundled_per_s": sum(kinds_delta(bundled_before, bundled).values()) / elapsed,
                "connections": conns.get(name, {}).get("connections"),
                "peers_connected": conns.get(name, {}).get("peers_connected"),
                "cpu_pct": None if seconds_cpu is None else 100 * seconds_cpu / elapsed,
                "topics": len(a.get("topics") or {}),
            }
        )
    supervisor = cpu.get("supervisor")

    def med(key: str) -> float | None:
        values = [node[key] for node in nodes if node[key] is not None]
        return statistics.median(values) if values else None

    def top(key: str) -> float | None:
        values = [node[key] for node in nodes if node[key] is not None]
        return max(values) if values else None

    return {
        "window_s": round(elapsed, 3),
        "intervals": round(intervals, 2),
        "frames_per_s_per_node": med("frames_per_s"),
        "frames_per_s_per_node_max": top("frames_per_s"),
        "frames_per_peer_per_interval": med("frames_per_peer_per_interval"),
        "frames_per_peer_per_interval_max": top("frames_per_peer_per_interval"),
        "messages_bundled_per_s_per_node": med("messages_bundled_per_s"),
        "peers_per_node": med("peers"),
        "connections_per_node": med("connections"),
        "connections_per_node_max": top("connections"),
        "peers_connected_per_node": med("peers_connected"),
        "cpu_pct_per_node": med("cpu_pct"),
        "cpu_pct_per_node_max": top("cpu_pct"),
        "supervisor_cpu_pct": None if supervisor is None else 100 * supervisor / elapsed,
        "supervisor_connections": conns.get("supervisor", {}).get("connections"),
        "by_kind_per_node_per_interval": {
            k: round(v / len(nodes) / intervals, 3) for k, v in sorted(by_kind.items())
        },
        "contention": others,
        "nodes": [{k: (rnd(v, 3) if isinstance(v, float) else v) for k, v in node.items()} for node in nodes],
    }


SUMMARY_KEYS = (
    "frames_per_s_per_node", "frames_per_s_per_node_max", "frames_per_peer_per_interval",
    "frames_per_peer_per_interval_max", "messages_bundled_per_s_per_node", "peers_per_node",
    "connections_per_node", "connections_per_node_max", "peers_connected_per_node", "cpu_pct_per_node",
    "cpu_pct_per_node_max", "supervisor_cpu_pct",
)


def summarize(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median over the windows and the spread [min, max] of every summary value."""
    out: dict[str, Any] = {}
    for key in SUMMARY_KEYS:
        values = [w[key] for w in windows if w.get(key) is not None]
        if not values:
            out[key] = {"median": None, "min": None, "max": None}
            continue
        out[key] = {"median": rnd(statistics.median(values), 3), "min": rnd(min(values), 3),
                    "max": rnd(max(values), 3)}
    return out


# --- the run ----------------------------------------------------------------------------------
def run(
    nodes: int, topic_counts: list[int], windows: int, window_intervals: float, interval: float,
    settle_intervals: float, ring_timeout: float, workdir: Path, durable: bool = False,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    cluster = LocalCluster(workdir, nodes, interval=interval, start_timeout=START_TIMEOUT, log_level="warning",
                           admin=False, memory_nodes=() if durable else range(nodes))
    cluster.start()
    try:
        pids = {f"node-{i:02d}": d.pid for i, d in enumerate(cluster.nodes) if d.pid is not None}
        if cluster.supervisor.pid is not None:
            pids["supervisor"] = cluster.supervisor.pid
        joined = 0
        for count in sorted(topic_counts):
            row: dict[str, Any] = {"topics_per_node": count, "nodes": nodes}
            rows.append(row)
            try:
                began = time.monotonic()
                poll_every = max(0.25, min(5.0, count / 200))
                for start in range(joined, count, JOIN_CHUNK):
                    chunk = [topic_name(k) for k in range(start, min(count, start + JOIN_CHUNK))]
                    run_async(join_all(cluster.node_refs, chunk))
                    cluster.poll(lambda chunk=chunk: ring_ready_problems(cluster, nodes, chunk),  # type: ignore[misc]
                                 ring_timeout, f"legitimate rings of {nodes} in {len(chunk)} new topics", poll_every)
                row["join_s"] = round(time.monotonic() - began, 2)
                joined = count
                names = [topic_name(k) for k in range(count)]
                cluster.poll(lambda names=names: ring_ready_problems(cluster, nodes, names), ring_timeout,  # type: ignore[misc]
                             f"legitimate rings of {nodes} in {count} topics", poll_every)
                row["rings_ready_s"] = round(time.monotonic() - began, 2)
                time.sleep(settle_intervals * interval)
                row["settle_s"] = round(settle_intervals * interval, 2)
                row["windows"] = [
                    run_async(window(cluster.node_refs, pids, window_intervals * interval, interval))
                    for _ in range(windows)
                ]
                row.update(summarize(row["windows"]))
                print_row(row, flush=True)
            except Exception as exc:  # noqa: BLE001 - reported; larger rows cannot run either
                row["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                print(f"{count:>8}  error: {row['error']}", flush=True)
                break
    finally:
        cluster.stop()
    return rows


def fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def cell(row: dict[str, Any], key: str, digits: int = 2) -> str:
    s = row.get(key) or {}
    if s.get("median") is None:
        return "-"
    if s["min"] == s["max"]:
        return fmt(s["median"], digits)
    return f"{fmt(s['median'], digits)} [{fmt(s['min'], digits)}-{fmt(s['max'], digits)}]"


HEADER = (f"{'topics':>8}  {'frames/s/node':<22}{'frames/peer/interval':<22}{'peers':>6}{'conns':>7}"
          f"  {'CPU %/node':<22}{'supervisor CPU %':<22}{'ready s':>8}")


def print_row(row: dict[str, Any], flush: bool = False) -> None:
    peers = (row.get("peers_per_node") or {}).get("median")
    print(f"{row['topics_per_node']:>8}  {cell(row, 'frames_per_s_per_node', 1):<22}"
          f"{cell(row, 'frames_per_peer_per_interval', 3):<22}{fmt(peers, 1):>6}"
          f"{fmt((row.get('connections_per_node') or {}).get('median'), 1):>7}"
          f"  {cell(row, 'cpu_pct_per_node', 1):<22}{cell(row, 'supervisor_cpu_pct', 1):<22}"
          f"{fmt(row.get('rings_ready_s'), 1):>8}", flush=flush)


def ratio(rows: list[dict[str, Any]], key: str = "frames_per_s_per_node") -> dict[str, Any] | None:
    done = [r for r in rows if (r.get(key) or {}).get("median") is not None]
    base = next((r for r in done if r["topics_per_node"] == 1), None)
    if base is None or len(done) < 2 or not base[key]["median"]:
        return None
    last = max(done, key=lambda r: r["topics_per_node"])
    return {"topics": last["topics_per_node"], "over": 1, "value": round(last[key]["median"] / base[key]["median"], 3)}


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench topics", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--quick", action="store_true", help=f"topics {QUICK_TOPICS}, 1 window of 10 intervals")
    add("--nodes", type=int, default=4,
        help="nodes of the cluster, every one in every topic (default 4: in one topic a node already has "
             "every other node as a peer, so every row has the same peers)")
    add("--topics", type=int, nargs="+", help=f"topics per node, one row each (default {DEFAULT_TOPICS})")
    add("--windows", type=int, help="measuring windows per row (default 3; quick 1)")
    add("--window-intervals", type=float, help="Timeout intervals per window (default 20; quick 10)")
    add("--interval", type=float, help="the daemons' Timeout interval (default: theirs)")
    add("--settle-intervals", type=float, default=10.0, help="intervals to wait after the rings are ready")
    add("--ring-timeout", type=float, default=600.0, help="seconds a row may take to make its rings legitimate")
    add("--durable", action="store_true",
        help="give the nodes data directories (default: stores in memory; each join then rewrites and "
             "fsyncs the node's topics file on its event loop, which makes joining 1,000 topics slow)")
    add("--out", type=Path, help="results file (default bench-results/topics.json)")
    add("--keep-dir", type=Path, help="put the cluster's work directory here (kept)")
    args = parser.parse_args(argv)
    topic_counts = args.topics or (QUICK_TOPICS if args.quick else DEFAULT_TOPICS)
    windows = args.windows or (1 if args.quick else 3)
    window_intervals = args.window_intervals or (10.0 if args.quick else 20.0)
    interval = args.interval or default_interval()
    info = machine()
    commit = _git_commit()
    print(f"Issue 14 item 5: idle frames and CPU per node against topics per node -- {args.nodes} nodes, "
          f"interval {interval} s, {windows} window(s) of {window_intervals:g} intervals, commit {commit} -- {info}")
    print("medians over the windows [min-max]; frames: everything a node sends to peers (a bundle counts one)")
    print(HEADER)
    print("-" * len(HEADER))
    began = time.monotonic()
    if args.keep_dir is not None:
        args.keep_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-topics-", dir=args.keep_dir) as tmp:
        rows = run(args.nodes, topic_counts, windows, window_intervals, interval, args.settle_intervals,
                   args.ring_timeout, Path(tmp) / "cluster", args.durable)
    frames_ratio = ratio(rows)
    per_peer_ratio = ratio(rows, "frames_per_peer_per_interval")
    cpu_ratio = ratio(rows, "cpu_pct_per_node")
    peers = ratio(rows, "peers_per_node")
    same_peers = peers is not None and peers["value"] == 1
    if frames_ratio is not None:
        verdict = "within" if frames_ratio["value"] <= 2 else "ABOVE"
        print(f"frames/s per node, {frames_ratio['topics']} topics over 1: {frames_ratio['value']:.2f} "
              f"({verdict} the acceptance bound 2"
              f"{'' if same_peers else ', but the nodes do not have the same peers in both rows'})")
    if per_peer_ratio is not None:
        print(f"frames per peer per interval, {per_peer_ratio['topics']} topics over 1: "
              f"{per_peer_ratio['value']:.2f}")
    if cpu_ratio is not None:
        print(f"CPU per node, {cpu_ratio['topics']} topics over 1: {cpu_ratio['value']:.2f}")
    out = args.out or RESULTS / "topics.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "machine": info, "commit": commit, "argv": argv, "nodes": args.nodes, "interval_s": interval,
        "durable": args.durable,
        "windows": windows, "window_intervals": window_intervals, "wall_s": round(time.monotonic() - began, 1),
        "rows": rows, "ratio_frames": frames_ratio, "same_peers": same_peers,
        "ratio_frames_per_peer": per_peer_ratio, "ratio_cpu": cpu_ratio,
    }
    out.write_text(json.dumps(document, indent=1))
    print(f"wrote {out} ({document['wall_s']} s)")
    errors = [r["error"] for r in rows if "error" in r]
    if errors:
        raise SystemExit(f"python -m bench topics: {len(errors)} row(s) failed: {errors[0]}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
