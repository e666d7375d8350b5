"""Measuring one system in the OctopiA-vs-PADRES benchmark (`bench.scot`, OctopiA §10).

The three phases on one `broker.sim.BrokerSim` -- publisher scalability, subscriber
scalability with publications at every checkpoint, dynamic routing under a bursty publisher
(`measure` runs them all in one worker process) -- and `check_deliveries`, which compares the
two systems' deliveries with each other and with a linear scan.  See `bench.scot` for what
each phase measures and the network model.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.scotplan import (
    NETWORKS,
    PROTOCOLS,
    Config,
    Plan,
    hrp_advertisement,
    hrp_subscription,
    make_plan,
)
from broker.cores.matching.linear import LinearIndex
from broker.cores.topology import ILINK, BrokerId, Scot
from broker.sim import BrokerSim


def new_sim(cfg: Config, topo: Scot, protocol: str, *, dynamic: bool = False, trace: bool = False,
            record_queues: bool = True) -> BrokerSim:
    return BrokerSim(
        topo,
        protocol=protocol,
        dynamic=dynamic,
        seed=cfg.seed,
        bandwidth=cfg.bandwidth,
        units="bytes",
        propagation=cfg.propagation,
        service_time=cfg.service,
        tau=cfg.tau,
        t_w=cfg.t_w,
        record_queues=record_queues,
        trace=trace,
    )


def advertise_base(sim: BrokerSim, cfg: Config, plan: Plan, without: str = "") -> None:
    """Phase 1: the base publishers attach and advertise, `adv_gap` apart, until settled
    (those hosted at broker `without` attach only)."""
    for k in range(cfg.base_publishers):
        sim.attach(f"P{k}", plan.pub_hosts[k])
        if plan.pub_hosts[k] != without:
            sim.advertise(f"P{k}", "a", plan.workload.advertisement(plan.symbols[k]), at=sim.now + k * cfg.adv_gap)
    run_or_fail(sim, "advertising")


def subscribe_first(sim: BrokerSim, cfg: Config, plan: Plan, count: int, without: str = "") -> None:
    """Phase 2: the first `count` subscribers attach and subscribe, `sub_gap` apart, until
    settled (those hosted at broker `without` attach only)."""
    start = sim.now
    for k in range(count):
        sim.attach(f"S{k}", plan.sub_hosts[k])
        if plan.sub_hosts[k] != without:
            sim.subscribe(f"S{k}", "s", plan.sub_filters[k], at=start + k * cfg.sub_gap)
    run_or_fail(sim, "subscribing")


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def progress(protocol: str, text: str) -> None:
    """A progress line on stderr (the tables go to stdout)."""
    print(f"  [{protocol}] {text} (CPU {time.process_time():.0f} s)", file=sys.stderr, flush=True)


def run_or_fail(sim: BrokerSim, what: str) -> None:
    if not sim.run():
        raise SystemExit(f"scot bench: the simulation did not drain after {what}")


def publisher_scalability(cfg: Config, plan: Plan, protocol: str) -> list[dict[str, Any]]:
    sim = new_sim(cfg, plan.topo, protocol)
    table = "clt" if protocol == "octopia" else "srt"
    rows = []
    done = 0
    for target in cfg.publishers:
        start = sim.now
        for k in range(done, target):
            sim.attach(f"P{k}", plan.pub_hosts[k])
            adv = plan.workload.advertisement(plan.symbols[k])
            sim.advertise(f"P{k}", "a", adv, at=start + (k - done) * cfg.adv_gap)
        done = target
        run_or_fail(sim, "advertising")
        ops = sim.op_stats("advertise")
        sizes = sim.table_sizes()[table]
        rows.append(
            {
                "publishers": target,
                "adv_table": table,
                "adv_table_mean": mean(list(sizes.values())),
                "adv_messages": sim.traffic_by_op["advertise"],
                "adv_messages_per_adv": sim.traffic_by_op["advertise"] / target,
                "adv_delay_ms": 1000 * mean([op.duration for op in ops]),
                "adv_delay_max_ms": 1000 * max(op.duration for op in ops),
                "duplicates_dropped": sim.counters()["duplicate_adv"],
            }
        )
    return rows


def matching_delay_us(sim: BrokerSim, pids: Sequence[str]) -> float:
    """Mean CPU time (µs) of one PRT match at a broker that handled the publication."""
    samples = []
    for pid in pids:
        _, _, attrs = sim.published[pid]
        visited = set(sim.pub_visits.get(pid, {})) | {sim.clients[sim.published[pid][1]]}
        for bid in sorted(visited):
            prt = sim.cores[bid].prt  # type: ignore[attr-defined]
            best = math.inf
            for _ in range(3):
                began = time.perf_counter()
                prt.match(attrs)
                best = min(best, time.perf_counter() - began)
            samples.append(best)
    return 1e6 * mean(samples)


def adv_trees_per_sub(sim: BrokerSim) -> float | None:
    """PADRES: the mean number of advertisement trees a subscription is bound to (it travels
    to each one's root); None for OctopiA, whose subscriptions ignore advertisements."""
    if sim.protocol != "padres":
        return None
    cores: list[Any] = list(sim.cores.values())
    counts = [len(tids) for core in cores for tids in core.bound.values()]
    return mean(counts)


def subscriber_scalability(
    cfg: Config, plan: Plan, protocol: str
) -> tuple[BrokerSim, list[dict[str, Any]], list[dict[str, list[str]]]]:
    sim = new_sim(cfg, plan.topo, protocol)
    advertise_base(sim, cfg, plan)
    rows = []
    deliveries = []
    done = 0
    for point, target in enumerate(cfg.subscribers):
        start = sim.now
        first_op = len(sim.ops)
        cpu = time.process_time()
        for k in range(done, target):
            sim.attach(f"S{k}", plan.sub_hosts[k])
            sim.subscribe(f"S{k}", "s", plan.sub_filters[k], at=start + (k - done) * cfg.sub_gap)
        done = target
        run_or_fail(sim, "subscribing")
        cpu_subs = time.process_time() - cpu
        batch = [op for op in sim.ops[first_op:] if op.kind == "subscribe"]
        sizes = sim.table_sizes()["prt"]
        pub_before = sim.traffic_by_op["publish"]
        delays_before = len(sim.publication_delays())
        start = sim.now
        pids = []
        for n, (k, attrs) in enumerate(plan.point_pubs[point]):
            pid = f"x{point}p{n}"
            sim.publish(f"P{k}", attrs, at=start + n * cfg.pub_gap, pid=pid)
            pids.append(pid)
        cpu = time.process_time()
        run_or_fail(sim, "publishing")
        cpu_pubs = time.process_time() - cpu
        delays = [
            d.time - sim.published[pid][0] for pid in pids for d in sim.deliveries[pid]
        ]
        duplicates = sum(1 for pid in pids for c in sim.recipients(pid).values() if c > 1)
        looped = sum(1 for pid in pids for c in sim.pub_visits.get(pid, {}).values() if c > 1)
        rows.append(
            {
                "subscribers": target,
                "prt_mean": mean(list(sizes.values())),
                "sub_messages": sim.traffic_by_op["subscribe"],
                "sub_messages_per_sub": sim.traffic_by_op["subscribe"] / target,
                "sub_delay_ms": 1000 * mean([op.duration for op in batch]),
                "sub_delay_max_ms": 1000 * max(op.duration for op in batch),
                "publications": len(pids),
                "pub_messages_per_pub": (sim.traffic_by_op["publish"] - pub_before) / len(pids),
                "deliveries": len(delays),
                "pub_delay_ms": 1000 * mean(delays),
                "pub_max_hops": max((sim.pub_max_hops.get(p, 0) for p in pids), default=0),
                "duplicate_deliveries": duplicates,
                "repeat_visits": looped,
                "matching_delay_us": matching_delay_us(sim, pids[: cfg.match_sample]),
                "sub_cpu_ms": 1000 * cpu_subs / len(batch),
                "adv_trees_per_sub": adv_trees_per_sub(sim),
                "pub_cpu_ms": 1000 * cpu_pubs / len(pids),
            }
        )
        assert len(sim.publication_delays()) == delays_before + len(delays)
        deliveries.append({pid: sorted(sim.recipients(pid)) for pid in pids})
        progress(protocol, f"{target} subscribers")
    return sim, rows, deliveries


def stabilization(
    samples: list[tuple[float, dict[tuple[BrokerId, BrokerId], int]]],
    after: float,
    threshold: float,
    keep: Callable[[tuple[BrokerId, BrokerId]], bool],
) -> float:
    """Seconds from `after` until no kept link's queue exceeds `threshold` any more."""
    last_bad = None
    for t, q in samples:
        if t >= after and any(n > threshold for key, n in q.items() if keep(key)):
            last_bad = t
    if last_bad is None:
        return 0.0
    later = [t for t, _ in samples if t > last_bad]
    return (later[0] if later else last_bad) - after


def burst_run(
    cfg: Config, plan: Plan, sim: BrokerSim, burst: dict[str, Any], mode: str, network: str
) -> dict[str, Any]:
    """One HRP burst at one rate on `sim` (its links already slowed down to `network`);
    `mode` names the routing ("spr", "idr", "tid-s" or "tid-d")."""
    for core in sim.cores.values():
        core.dynamic = mode in ("idr", "tid-d")  # type: ignore[attr-defined]  # read per publication
    counters_before = sim.counters()
    traffic_before = sum(sim.traffic.values())
    first_sample = len(sim.queue_samples)
    sim.trace = []
    t0 = sim.now + 0.5
    for t, k, attrs in burst["background"]:
        sim.publish(f"P{k}", attrs, at=t0 + t)
    hrp_start = t0 + cfg.warmup
    pids = []
    for n, attrs in enumerate(burst["hrp"]):
        pid = f"hrp-{network}-{mode}-{burst['rate']:g}-{n}"
        sim.publish("HRP", attrs, at=hrp_start + n / burst["rate"], pid=pid)
        pids.append(pid)
    hrp_end = hrp_start + (len(pids) - 1) / burst["rate"]
    run_or_fail(sim, "the burst")
    wanted = set(pids)
    hrp_links = {(src, dst) for _, src, dst, msg in sim.trace if getattr(msg, "pid", None) in wanted}
    hrp_messages = sum(1 for *_, msg in sim.trace if getattr(msg, "pid", None) in wanted)
    restamped_pubs = len({getattr(msg, "pid", None) for *_, msg in sim.trace
                          if getattr(msg, "pid", None) in wanted and getattr(msg, "targets", None)})
    sim.trace = None
    samples = [(t, q) for t, q in sim.queue_samples[first_sample:]]
    del sim.queue_samples[first_sample:]
    expected = sorted(f"H{k}" for k in range(len(plan.hrp_sub_hosts)))
    for pid in pids:
        if sorted(sim.recipients(pid).elements()) != expected:
            raise SystemExit(f"scot bench: {mode} delivered {pid} to {dict(sim.recipients(pid))}")
    delays = sorted(d.time - sim.published[pid][0] for pid in pids for d in sim.deliveries[pid])
    pre = [max(q.values(), default=0) for t, q in samples if hrp_start - 1.0 <= t < hrp_start]
    threshold = max(cfg.tau, max(pre, default=0))
    window = [q for t, q in samples if hrp_start <= t <= t0 + burst["horizon"]]
    target_mean = mean([mean([q.get(key, 0) for key in hrp_links]) for q in window] if hrp_links else [])
    counters = sim.counters() - counters_before
    ilink = {key for key in sim.links if plan.topo.link_kind(*key) == ILINK}
    peak_key = max(
        ((key, n) for q in window for key, n in q.items()), key=lambda kv: kv[1], default=(None, 0)
    )
    return {
        "network": network,
        "rate": burst["rate"],
        "mode": mode,
        "hrp_pubs": len(pids),
        "hrp_subscribers": len(expected),
        "target_links": len(hrp_links),
        "mean_q_target": target_mean,
        "peak_q": peak_key[1],
        "peak_link": "->".join(peak_key[0]) if peak_key[0] else None,
        "peak_q_ilinks": max((n for q in window for key, n in q.items() if key in ilink), default=0),
        "mean_backlog": mean([sum(q.values()) for q in window]),
        "normal_q": threshold,
        "stabilize_s": stabilization(samples, hrp_end, threshold, lambda key: True),
        "stabilize_ilinks_s": stabilization(samples, hrp_end, threshold, lambda key: key in ilink),
        "hrp_delay_mean_s": mean(delays),
        "hrp_delay_p50_s": delays[len(delays) // 2] if delays else 0.0,
        "hrp_delay_max_s": delays[-1] if delays else 0.0,
        "hrp_under_1s": sum(d < 1.0 for d in delays) / len(delays) if delays else 0.0,
        "hrp_messages": hrp_messages,
        "messages": sum(sim.traffic.values()) - traffic_before,
        "idr_cases": {k: v for k, v in sorted(counters.items()) if k.startswith("idr_case")},
        # TID-D: subscriptions re-stamped onto another tree / left on a congested link (no
        # alternative, or no hop budget), and HRP publications with a re-stamped copy
        "tidd": {k: v for k, v in sorted(counters.items()) if k.startswith("tidd_")},
        "hrp_restamped": restamped_pubs,
        # brokers crossed twice by one HRP publication (TID-D's copies may; never TID-S's)
        "hrp_repeat_visits": sum(1 for pid in pids for c in sim.pub_visits.get(pid, {}).values() if c > 1),
    }


def tidd_alternatives(plan: Plan, sim: BrokerSim) -> dict[str, int]:
    """PADRES: where TID-D could re-stamp an HRP publication.  Along the HRP's tree from its
    host to each HRP subscriber: the brokers passed, and those where the subscription is bound
    to another tree with another next hop (the overlapping trees of Fig. 1(c))."""
    cores: dict[BrokerId, Any] = sim.cores  # PadresBroker
    tid = cores[plan.hrp_host].local_advs[("HRP", "h")]
    passed = overlapping = 0
    for k, host in enumerate(plan.hrp_sub_hosts):
        uid = cores[host].local_subs[(f"H{k}", "s")]
        at = plan.hrp_host
        while at != host:
            route = cores[at].routes[uid]
            passed += 1
            overlapping += any(hop != route[tid] for hop in route.values())
            at = route[tid]
    return {"path_brokers": passed, "with_another_tree": overlapping}


def dynamic_routing(cfg: Config, plan: Plan, sim: BrokerSim) -> list[dict[str, Any]]:
    sim.attach("HRP", plan.hrp_host)
    sim.advertise("HRP", "h", hrp_advertisement())
    for k, host in enumerate(plan.hrp_co_hosts):  # more trees for TID-D (`bench.scotplan`)
        sim.attach(f"CO{k}", host)
        sim.advertise(f"CO{k}", "h", hrp_advertisement(), at=sim.now + (k + 1) * cfg.adv_gap)
    run_or_fail(sim, "the HRP's advertisement")
    for k, host in enumerate(plan.hrp_sub_hosts):
        sim.attach(f"H{k}", host)
        sim.subscribe(f"H{k}", "s", hrp_subscription(), at=sim.now + k * cfg.sub_gap)
    run_or_fail(sim, "the HRP subscriptions")
    modes = ("spr", "idr") if sim.protocol == "octopia" else ("tid-s", "tid-d")
    alternatives = tidd_alternatives(plan, sim) if sim.protocol == "padres" else None
    out = []
    for network in NETWORKS:
        for src, dst in sim.links:
            fast = network == "slow-iLinks" and plan.topo.link_kind(src, dst) != ILINK
            sim.set_link(src, dst, bandwidth=cfg.burst_bandwidth * (cfg.fast_alinks if fast else 1.0))
        for burst in plan.bursts:
            for mode in modes:
                out.append(burst_run(cfg, plan, sim, burst, mode, network) | {"hrp_alternatives": alternatives})
                progress(sim.protocol, f"burst on {network} at {burst['rate']:g}/s, {mode}")
    return out


def measure(protocol: str, cfg: Config) -> dict[str, Any]:
    """Every phase for one system (runs in a worker process)."""
    began = time.process_time()
    plan = make_plan(cfg)
    pub_rows = publisher_scalability(cfg, plan, protocol)
    progress(protocol, f"{max(cfg.publishers)} publishers")
    sim, sub_rows, deliveries = subscriber_scalability(cfg, plan, protocol)
    burst_rows = dynamic_routing(cfg, plan, sim)
    return {
        "protocol": protocol,
        "publisher_scalability": pub_rows,
        "subscriber_scalability": sub_rows,
        "bursts": burst_rows,
        "deliveries": deliveries,
        "cpu_s": time.process_time() - began,
    }


def check_deliveries(cfg: Config, results: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Both systems delivered every publication to the same clients; a sample of them to
    exactly the subscribers a linear scan finds.  Aborts on any difference."""
    plan = make_plan(cfg)
    a, b = (results[p]["deliveries"] for p in PROTOCOLS)
    compared = scanned = 0
    for point, target in enumerate(cfg.subscribers):
        for pid in a[point]:
            if a[point][pid] != b[point][pid]:
                raise SystemExit(f"scot bench: OctopiA and PADRES delivered {pid} differently")
            compared += 1
        scan: LinearIndex[str] = LinearIndex()
        for k in range(target):
            scan.add(f"S{k}", plan.sub_filters[k])
        for n, (_, attrs) in enumerate(plan.point_pubs[point][: cfg.check_sample]):
            want = sorted(scan.match(attrs))
            if a[point][f"x{point}p{n}"] != want:
                raise SystemExit(f"scot bench: publication x{point}p{n} reached the wrong subscribers")
            scanned += 1
    return {"compared": compared, "checked_against_scan": scanned}
