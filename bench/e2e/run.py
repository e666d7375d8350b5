"""One measured run: a fresh deployment of one system for n subscribers, n subscriber
processes, a warm-up, the paced latency run, the windowed throughput run (at the throughput
n), CPU time from /proc before/after the throughput run and, for pubsub, frame counts from
every node's status before/after the latency run.  Everything started here is stopped here.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.e2e.common import (
    CLIENT_FRAME_KINDS,
    LATENCY,
    PUBLICATION_FRAME_KINDS,
    THROUGHPUT,
    WARMUP,
    Contention,
    cpu_delta_seconds,
    cpu_snapshot,
    frame_kinds,
    kinds_delta,
    percentile,
    rnd,
    run_async,
    spread,
)
from bench.e2e.drive import Published, Publisher, paced, windowed
from bench.e2e.subscribers import Subscribers
from bench.e2e.systems import System

#: Seconds to wait, after the last publication was acknowledged, for every subscriber to
#: hold every publication of the phase.
LATENCY_DRAIN = 30.0
THROUGHPUT_DRAIN = 120.0
#: Bound on the publishing itself.
PUBLISH_TIMEOUT = 600.0


@dataclass(frozen=True)
class Plan:
    n: int
    latency: bool
    throughput: bool
    count: int  # latency: publications
    rate: float  # latency: publications per second
    total: int  # throughput: publications
    window: int  # throughput: publications in flight
    warmup: int


def run_once(system: System, plan: Plan, keep: Path | None = None) -> dict[str, Any]:
    """The run's result (JSON-able); an "error" entry when something failed."""
    result: dict[str, Any] = {"system": system.name, "n": plan.n}
    with tempfile.TemporaryDirectory(prefix=f"bench-e2e-{system.name}-{plan.n}-", dir=keep) as tmp:
        began = time.monotonic()
        try:
            system.start(plan.n, Path(tmp))
            result["start_s"] = round(time.monotonic() - began, 2)
            result.update(run_async(measure(system, plan, Path(tmp))))
        except Exception as exc:  # noqa: BLE001 - one failed run does not end the benchmark
            result["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        finally:
            system.stop()
        result["run_s"] = round(time.monotonic() - began, 2)
    return result


async def measure(system: System, plan: Plan, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    await system.prepare()
    expect = {WARMUP: plan.warmup}
    if plan.latency:
        expect[LATENCY] = plan.count
    stored = system.holds == "stored"
    if plan.throughput and not stored:
        expect[THROUGHPUT] = plan.total
    flags = [f"--expect={phase}={count}" for phase, count in expect.items()]
    argvs = [[*system.subscriber_argv(i), *flags] for i in range(plan.n)]
    publisher = await system.publisher(plan.window)
    try:
        async with Subscribers(argvs, workdir / "subscribers") as subs:
            await system.check_subscribed(plan.n)
            warm = await paced(publisher, WARMUP, plan.warmup, plan.rate, PUBLISH_TIMEOUT)
            out["warmup"] = {
                "sent": plan.warmup,
                "acked": len(warm.ack_ns),
                "complete": await subs.wait_complete(WARMUP, LATENCY_DRAIN) is not None,
            }
            if plan.latency:
                before = await counters(system)
                contention = Contention({**system.server_pids(), **subs.pids, "harness": os.getpid()})
                pub = await paced(publisher, LATENCY, plan.count, plan.rate, PUBLISH_TIMEOUT)
                await subs.wait_complete(LATENCY, LATENCY_DRAIN)
                others = contention.result()
                after = await counters(system)
                out["latency"] = latency_result(pub, [d for d in await subs.dump()], plan)
                out["latency"]["contention"] = others
                # every process of the deployment, its subscriber processes and the harness
                out["latency"]["cpu_ms_per_pub"] = round(others["ours_s"] * 1000 / plan.count, 2)
                out["latency"]["cpu_us_per_pub_by_role"] = paced_cpu_by_role(contention.per_process, plan.count)
                if before is not None and after is not None:
                    out["frames"] = frames_result(before, after, len(pub.ack_ns), plan.n)
                    pubs = before[0].get("publications") or {}
                    out["node_settings"] = {k: pubs.get(k) for k in ("sync", "durable", "flooding")}
            if plan.throughput:
                if stored:
                    await subs.stop()  # the nodes themselves are the subscribers here
                    out["throughput"] = await stored_throughput(system, publisher, plan)
                else:
                    out["throughput"] = await subscriber_throughput(system, publisher, plan, subs)
            out["subscriber_errors"] = subs.errors()[:10]
    finally:
        await publisher.close()
    out.update(system.publisher_note())
    return out


async def counters(system: System) -> list[dict[str, Any]] | None:
    from bench.e2e.pubsub_system import PubsubSystem

    return await system.statuses() if isinstance(system, PubsubSystem) else None


# --- latency ---------------------------------------------------------------------------------
def latency_result(pub: Published, dumps: list[dict[str, Any] | None], plan: Plan) -> dict[str, Any]:
    """Per publication: time from the publish call to its receipt at the LAST subscriber."""
    arrivals: list[dict[int, int]] = []
    repeats = 0
    for dump in dumps:
        got = (dump or {}).get("received", {}).get(LATENCY, {"ids": [], "ns": []})
        arrivals.append(dict(zip(got["ids"], got["ns"], strict=True)))
        repeats += (dump or {}).get("repeats", {}).get(LATENCY, 0)
    last_ms: dict[int, float] = {}
    for index, sent in pub.sent_ns.items():
        times = [arr.get(index) for arr in arrivals]
        if times and all(t is not None for t in times):
            last_ms[index] = (max(t for t in times if t is not None) - sent) / 1e6
    per_sub = [
        statistics.median([(t - pub.sent_ns[i]) / 1e6 for i, t in arr.items() if i in pub.sent_ns])
        if arr else None
        for arr in arrivals
    ]
    acks = [ns / 1e6 for ns in pub.ack_ns.values()]
    values = list(last_ms.values())
    return {
        "sent": plan.count,
        "acked": len(pub.ack_ns),
        "publish_failures": pub.failures[:10],
        "failed": len(pub.failures),
        "complete": len(last_ms),
        "incomplete": plan.count - len(last_ms),
        "missing_per_subscriber": [plan.count - len(arr) for arr in arrivals],
        "repeats": repeats,
        "p50_ms": rnd(percentile(values, 50), 3),
        "p99_ms": rnd(percentile(values, 99), 3),
        "max_ms": rnd(max(values) if values else None, 3),
        "ack_p50_ms": rnd(percentile(acks, 50), 3),
        "ack_p99_ms": rnd(percentile(acks, 99), 3),
        "subscriber_p50_ms": {k: rnd(v, 3) for k, v in spread(per_sub).items()},
        "last_ms_by_id": {str(k): round(v, 3) for k, v in sorted(last_ms.items())},
    }


def frames_result(
    before: list[dict[str, Any]], after: list[dict[str, Any]], publications: int, n: int
) -> dict[str, Any]:
    """Frames the nodes sent during the latency run, per publication per node."""
    per_node = [kinds_delta(frame_kinds(b), frame_kinds(a)) for b, a in zip(before, after, strict=True)]
    total: dict[str, int] = {}
    for delta in per_node:
        for kind, count in delta.items():
            total[kind] = total.get(kind, 0) + count
    denominator = max(publications * n, 1)
    carrying = sum(v for k, v in total.items() if k in PUBLICATION_FRAME_KINDS)
    peer = sum(v for k, v in total.items() if k not in CLIENT_FRAME_KINDS)
    return {
        "publications": publications,
        "publication_frames_per_pub_per_node": round(carrying / denominator, 3),
        "all_frames_per_pub_per_node": round(sum(total.values()) / denominator, 3),
        "peer_frames_per_pub_per_node": round(peer / denominator, 3),
        "by_kind_per_pub_per_node": {k: round(v / denominator, 3) for k, v in sorted(total.items()) if v},
        "frames_out_by_node": per_node,
        "publication_kinds": sorted(PUBLICATION_FRAME_KINDS),
        "client_kinds": sorted(CLIENT_FRAME_KINDS),
    }


def paced_cpu_by_role(seconds: dict[str, float | None], publications: int) -> dict[str, Any]:
    """µs of CPU per paced publication by role (median [min-max] over the role's
    processes): node 0 (pubsub's publishing node, relay-floor's relay 0), the other nodes
    ("member"), the subscriber processes, the server (pubsub's supervisor) and the harness
    (the publisher); a role the system does not have is left out."""

    def role_of(name: str) -> str:
        if name == "node-00":
            return "node 0"
        if name.startswith("node-"):
            return "member"
        if name.startswith("sub-"):
            return "subscriber"
        return "server" if name in ("server", "supervisor") else name

    roles: dict[str, dict[str, float | None]] = {}
    for name, used in seconds.items():
        roles.setdefault(role_of(name), {})[name] = used
    return {role: cpu_result(found, publications, "") for role, found in roles.items() if found}


# --- throughput ------------------------------------------------------------------------------
def cpu_result(seconds: dict[str, float | None], publications: int, prefix: str) -> dict[str, Any]:
    """µs of CPU per publication of the processes whose name starts with `prefix`."""
    per = [None if s is None else s * 1e6 / max(publications, 1) for k, s in seconds.items() if k.startswith(prefix)]
    return {k: rnd(v, 1) for k, v in spread(per).items()}


def tput_common(pub: Published, plan: Plan, held_ns: int | None, cpu: dict[str, float | None]) -> dict[str, Any]:
    acked = len(pub.ack_ns)
    ack_s = (pub.last_ack_ns - pub.first_ns) / 1e9 if acked else None
    held_s = None if held_ns is None else (held_ns - pub.first_ns) / 1e9
    return {
        "sent": plan.total,
        "window": plan.window,
        "acked": acked,
        "failed": len(pub.failures),
        "publish_failures": pub.failures[:10],
        "publish_timed_out": pub.timed_out,
        "ack_seconds": rnd(ack_s, 4),
        "acked_per_s": rnd(acked / ack_s if ack_s else None, 1),
        "held_seconds": rnd(held_s, 4),
        "held_per_s": rnd(plan.total / held_s if held_s else None, 1),
        "cpu_seconds": {k: rnd(v, 3) for k, v in cpu.items()},
        "harness_cpu_us_per_pub": cpu_result(cpu, plan.total, "harness")["median"],
    }


async def subscriber_throughput(
    system: System, publisher: Publisher, plan: Plan, subs: Subscribers
) -> dict[str, Any]:
    pids = {**system.server_pids(), **subs.pids, "harness": os.getpid()}
    cpu_before = cpu_snapshot(pids)
    contention = Contention(pids)
    pub = await windowed(publisher, THROUGHPUT, plan.total, plan.window, PUBLISH_TIMEOUT)
    done = await subs.wait_complete(THROUGHPUT, THROUGHPUT_DRAIN)
    cpu = cpu_delta_seconds(cpu_before, cpu_snapshot(pids))
    others = contention.result()
    held_ns = None if done is None or pub.failures else max(done.values())
    dumps = await subs.dump()
    received = [len((d or {}).get("received", {}).get(THROUGHPUT, {"ids": []})["ids"]) for d in dumps]
    repeats = [(d or {}).get("repeats", {}).get(THROUGHPUT, 0) for d in dumps]
    missing = [plan.total - r for r in received]
    out = tput_common(pub, plan, held_ns, cpu)
    out.update(
        {
            "holds": "the n subscriber processes received it",
            "held_from": "receipt times",
            "missing_per_subscriber": missing,
            "repeats_per_subscriber": repeats,
            "zero_loss": not any(missing) and not pub.failures,
            "duplicates": sum(repeats),
            "server_cpu_us_per_pub": cpu_result(cpu, plan.total, "server")["median"],
            "subscriber_cpu_us_per_msg": cpu_result(cpu, plan.total, "sub-"),
            "node_cpu_us_per_pub": cpu_result(cpu, plan.total, "node-"),  # count 0: no node processes
            "contention": others,
        }
    )
    return out


#: Slack, in ns, when a commit stamp (the node's wall clock, in whole ms) is checked against
#: the status polls that bracket it (the harness's monotonic clock).
STAMP_SLACK_NS = 2_000_000


def held_by_stamps(
    stamps: Sequence[int | None], wall_minus_monotonic_ns: int, polled: tuple[int, int] | None
) -> tuple[int | None, str]:
    """When the last node held the last publication, on the harness's monotonic clock, and
    what says so.  The nodes' commit stamps (ms, rounded down, so 1 ms is added) when every
    node gave one and the latest lies between the status polls that bracket it; else the
    poll that first saw every node complete (an upper bound, up to one poll interval late),
    or None when some node never completed.  A stamp is read as its commit begins: the write
    that follows takes about 0.1-0.3 ms of CPU with the default sync "normal" (the commit
    runs on the event loop), a few ms more with "full" (fsync): so much may the time be early."""
    if polled is None:
        return None, "incomplete"
    lower, upper = polled
    if stamps and all(s is not None for s in stamps):
        held = (max(s for s in stamps if s is not None) + 1) * 1_000_000 - wall_minus_monotonic_ns
        if lower - STAMP_SLACK_NS <= held <= upper + STAMP_SLACK_NS:
            return held, "commit stamps"
    return upper, "status polls"


async def stored_throughput(system: System, publisher: Publisher, plan: Plan) -> dict[str, Any]:
    from bench.e2e.pubsub_system import PubsubSystem, stored_count, trie_count

    assert isinstance(system, PubsubSystem)
    before = await system.statuses()
    base = [stored_count(s) for s in before]
    base_trie = [trie_count(s) for s in before]
    pids = {**system.server_pids(), "harness": os.getpid()}
    cpu_before = cpu_snapshot(pids)
    contention = Contention(pids)
    wall_minus_monotonic_ns = time.time_ns() - time.monotonic_ns()
    pub = await windowed(publisher, THROUGHPUT, plan.total, plan.window, PUBLISH_TIMEOUT)
    targets = [b + len(pub.ack_ns) for b in base]
    upper, lower = await system.wait_stored(targets, THROUGHPUT_DRAIN, pub.first_ns)
    cpu = cpu_delta_seconds(cpu_before, cpu_snapshot(pids))
    others = contention.result()
    after = await system.statuses()
    new = [stored_count(a) - b for a, b in zip(after, base, strict=True)]
    new_trie = [trie_count(a) - b for a, b in zip(after, base_trie, strict=True)]
    complete = len(upper) == plan.n and not pub.failures
    polled = (max(lower.values()), max(upper.values())) if complete else None
    stamps = await system.stored_stamps(targets) if complete else []
    held_ns, held_from = held_by_stamps(stamps, wall_minus_monotonic_ns, polled)
    out = tput_common(pub, plan, held_ns, cpu)
    out.update(
        {
            "holds": "every node stored it (status publications.stored; when: its commit stamp)",
            "held_from": held_from,
            "held_seconds_polled": rnd((polled[1] - pub.first_ns) / 1e9, 4) if polled else None,
            "held_seconds_lower_bound": rnd((polled[0] - pub.first_ns) / 1e9, 4) if polled else None,
            "stored_per_node": new,
            "trie_added_per_node": new_trie,
            "missing_per_subscriber": [max(plan.total - c, 0) for c in new],
            "zero_loss": complete and all(c >= plan.total for c in new),
            "duplicates": sum(max(c - plan.total, 0) for c in new),
            "exactly_k_per_node": all(c == plan.total for c in new) and all(c == plan.total for c in new_trie),
            "node_cpu_us_per_pub": cpu_result(cpu, plan.total, "node-"),
            "supervisor_cpu_us_per_pub": cpu_result(cpu, plan.total, "supervisor")["median"],
            "contention": others,
        }
    )
    return out
