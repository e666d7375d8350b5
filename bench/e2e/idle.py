"""What a legitimate pubsub ring costs with no publications at all, per node: frames sent
per second, frames per peer per Timeout interval, and CPU (% of one core).

A cluster is started, every node joins the topics, the rings become legitimate and settle
for a few intervals; then every node's status (`stats.frames_out`) and CPU time (/proc) are
read at the start and at the end of the window.  Frames are the peer kinds only (everything
but the replies to our own status requests and other client kinds).  A node's peers are the
distinct references in its status over all its topics (left, right, ring, shortcuts) plus
the supervisor (nodes send it `get_configuration` while idle).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.e2e.common import (
    CLIENT_FRAME_KINDS,
    Contention,
    cpu_delta_seconds,
    cpu_snapshot,
    frame_kinds,
    kinds_delta,
    rnd,
    run_async,
    spread,
)
from bench.e2e.pubsub_system import start_cluster, statuses


def peers_of(status: dict[str, Any]) -> set[str]:
    me = status.get("ref")
    refs: set[str] = set()
    for topic in (status.get("topics") or {}).values():
        for key in ("left", "right", "ring"):
            entry = topic.get(key)
            if isinstance(entry, list) and len(entry) == 2 and entry[1]:
                refs.add(str(entry[1]))
        for ref in (topic.get("shortcuts") or {}).values():
            if ref:
                refs.add(str(ref))
    refs.discard(str(me))
    if status.get("supervisor"):
        refs.add(str(status["supervisor"]))
    return refs


@dataclass
class Observed:
    """Daemon statuses and CPU before and after one measured window (`observe`)."""

    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    cpu: dict[str, float | None]
    elapsed: float
    contention: Any


async def observe(
    refs: list[str],
    pids: dict[str, int],
    seconds: float,
    ask: Callable[[list[str]], Awaitable[list[dict[str, Any]]]] = statuses,
) -> Observed:
    """The nodes' statuses (`ask`: a harness whose nodes are slow to answer passes a more
    patient one) and the processes' CPU seconds around `seconds` of waiting, and what else
    ran on the machine meanwhile."""
    before = await ask(refs)
    cpu_before = cpu_snapshot(pids)
    contention = Contention({**pids, "harness": os.getpid()})
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    cpu_after = cpu_snapshot(pids)
    elapsed = time.monotonic() - t0
    others = contention.result()
    after = await ask(refs)
    return Observed(before, after, cpu_delta_seconds(cpu_before, cpu_after), elapsed, others)


def peer_frames(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """Frames a node sent to its peers between two statuses, by kind (client frames left out)."""
    delta = kinds_delta(frame_kinds(before), frame_kinds(after))
    return {k: v for k, v in delta.items() if k not in CLIENT_FRAME_KINDS and v}


def idle_run(
    label: str, n: int, topics: int, window: float, interval: float, store_sync: str | None, keep: Path | None = None
) -> dict[str, Any]:
    names = [f"idle-{k:02d}" for k in range(topics)]
    result: dict[str, Any] = {"scenario": label, "n": n, "topics": topics, "interval_s": interval}
    with tempfile.TemporaryDirectory(prefix=f"bench-e2e-idle-{n}x{topics}-", dir=keep) as tmp:
        began = time.monotonic()
        cluster = None
        try:
            cluster = start_cluster(n, Path(tmp) / "cluster", interval, store_sync, names)
            result["ring_ready_s"] = round(time.monotonic() - began, 2)
            settle = max(2.0, 5 * interval)
            time.sleep(settle)
            result["settle_s"] = settle
            pids = {f"node-{i:02d}": d.pid for i, d in enumerate(cluster.nodes) if d.pid is not None}
            if cluster.supervisor.pid is not None:
                pids["supervisor"] = cluster.supervisor.pid
            result.update(run_async(measure(cluster.node_refs, pids, window, interval)))
        except Exception as exc:  # noqa: BLE001 - reported, the benchmark goes on
            result["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        finally:
            if cluster is not None:
                cluster.stop()
    return result


async def measure(refs: list[str], pids: dict[str, int], window: float, interval: float) -> dict[str, Any]:
    seen = await observe(refs, pids, window)
    cpu, elapsed, others = seen.cpu, seen.elapsed, seen.contention
    intervals = elapsed / interval
    per_node: list[dict[str, Any]] = []
    by_kind: dict[str, int] = {}
    for i, (b, a) in enumerate(zip(seen.before, seen.after, strict=True)):
        peer = peer_frames(b, a)
        for kind, count in peer.items():
            by_kind[kind] = by_kind.get(kind, 0) + count
        frames = sum(peer.values())
        peers = peers_of(a)
        seconds = cpu.get(f"node-{i:02d}")
        per_node.append(
            {
                "frames": frames,
                "peers": len(peers),
                "frames_per_s": frames / elapsed,
                "frames_per_peer_per_interval": frames / max(len(peers), 1) / intervals,
                "cpu_pct": None if seconds is None else 100 * seconds / elapsed,
                "by_kind": peer,
            }
        )

    def summary(key: str) -> dict[str, Any]:
        return {k: rnd(v, 3) for k, v in spread(node[key] for node in per_node).items()}

    supervisor = cpu.get("supervisor")
    return {
        "window_s": round(elapsed, 3),
        "contention": others,
        "intervals": round(intervals, 2),
        "frames_per_s_per_node": summary("frames_per_s"),
        "peers_per_node": summary("peers"),
        "frames_per_peer_per_interval": summary("frames_per_peer_per_interval"),
        "cpu_pct_per_node": summary("cpu_pct"),
        "supervisor_cpu_pct": None if supervisor is None else rnd(100 * supervisor / elapsed, 2),
        "by_kind_per_node_per_interval": {
            k: round(v / len(per_node) / intervals, 3) for k, v in sorted(by_kind.items())
        },
        "median_frames_per_node": statistics.median(node["frames"] for node in per_node) if per_node else None,
        "nodes": [{k: (rnd(v, 3) if isinstance(v, float) else v) for k, v in node.items()} for node in per_node],
    }
