"""OctopiA against the PADRES-style baseline on S_e, in the broker simulator (OctopiA §10).

One run, one workload, one simulated network: the same seed draws the publishers (one
stock-quote advertisement each, on a random broker), the subscribers (one 7-attribute
subscription of about 2% selectivity each, on a random broker) and every publication, and
the same network model carries them for both systems.  Each system runs in its own process
(``--jobs 2``) on its own `broker.sim.BrokerSim` over S_e = the 14-vertex factor of Fig. 9
times K_4 (`broker.cores.topology.s_e`, 56 brokers).

Phases (§10, "Results"):

1. Publisher scalability -- advertisements only, publishers added up to each checkpoint
   (default 100..500): mean CLT (OctopiA) / SRT (PADRES) size over the brokers, the
   inter-broker messages advertisements caused, and the advertisement delay (from the
   advertise call until the last message it caused was handled).
2. Subscriber scalability -- 100 publishers, then subscribers added up to each checkpoint
   (default 1000..10000): mean PRT size, subscription messages, subscription delay (until
   the subscription reached every broker it must reach: OctopiA, its whole host cluster and
   the CIV_SETs it caused; PADRES, the root of every advertisement tree it is bound to).
   At every checkpoint --pubs publications from random publishers: inter-broker messages per
   publication, mean end-to-end delay, and the matching delay (CPU time of one PRT match at
   each broker a publication visited, measured on this machine).  Deliveries are checked:
   both systems deliver every publication to the same subscribers, and a sample is checked
   against a linear scan of every subscription.
3. Dynamic routing under a bursty publisher -- on the final network of phase 2, every link is
   slowed to --burst-bandwidth; background publishers keep publishing (--background-rate)
   and a high-rate publisher (HRP), whose 0.1% matching subscribers sit in every cluster and
   none at its host broker, publishes --hrp-pubs publications at each --burst-rates rate.
   OctopiA runs the burst with scotSPR and again with scotIDR (tau = 10, t_w = 50 ms);
   PADRES with TID-S (its core has no TID-D).  Measured from the queue samples taken every
   t_w: mean Q_l over the links that carried HRP copies, peak Q_l, mean total backlog, and
   the time to stabilize -- from the HRP's last publication until no queue exceeds its normal
   level (max(tau, the largest queue of the second before the burst)) any more -- over all
   links and over iLinks only; plus the HRP publications' delays and messages.

Network model (the same for both systems): every directed link has an output queue, a
bandwidth in bytes per second of the encoded frame (`pubsub.kernel.wire`, so TIDs and CIVs cost
their bytes) and a propagation delay; every broker takes a constant service time per message.
Client operations are spaced so that phases 1-2 never queue.  Delays are simulated time:
there is no JVM, no real matching cost in the delays (the matching delay is reported
separately) and no operating-system noise, so only hop counts, message sizes and queueing
separate the two systems.

Results: a table per phase, then one row per metric with the paper's figure beside it, in
``bench-results/scot.json`` (``scot-partial.json`` for --quick or other sizes).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.machine import machine
from broker.cores import topology as T
from broker.cores.corebase import DEFAULT_TAU, DEFAULT_TW
from broker.cores.language import Filter, Predicate, Value
from broker.cores.matching import LinearIndex
from broker.cores.topology import ILINK, BrokerId, Scot
from broker.sim import BrokerSim
from broker.stockquote import SELECTIVITY, StockQuotes

RESULTS = Path("bench-results")
PROTOCOLS = ("octopia", "padres")
#: Networks of phase 3: every link at --burst-bandwidth, or only the iLinks (aLinks faster).
NETWORKS = ("uniform", "slow-iLinks")

#: The HRP's quotes: a symbol no workload subscription names and a volume below every
#: workload subscription's lower bound (>= 1000), so only the HRP subscribers match them.
HRP_SYMBOL = "ZZZ"
HRP_VOLUME = 500


@dataclass(frozen=True)
class Config:
    """Everything a run depends on; both worker processes receive the same one."""

    seed: int = 0
    publishers: tuple[int, ...] = (100, 200, 300, 400, 500)
    base_publishers: int = 100
    subscribers: tuple[int, ...] = (1000, 2500, 5000, 7500, 10000)
    pubs_per_point: int = 200
    check_sample: int = 20
    match_sample: int = 40
    # the network of phases 1-2
    bandwidth: float = 12.5e6  # bytes/s (100 Mbit/s)
    propagation: float = 0.0002  # s per link
    service: float = 0.0001  # s per message per broker
    adv_gap: float = 0.02
    sub_gap: float = 0.01
    pub_gap: float = 0.02
    # phase 3
    burst_bandwidth: float = 125_000.0  # bytes/s (1 Mbit/s): every link, or the iLinks
    fast_alinks: float = 4.0  # network "slow-iLinks": aLinks this many times faster
    burst_rates: tuple[float, ...] = (1667.0, 1000.0)  # HRP publications per second
    hrp_pubs: int = 2000
    hrp_share: float = 0.001  # of the subscribers
    background_rate: float = 20.0  # publications per second, all background publishers
    warmup: float = 1.0  # s of background before the burst
    tau: float = DEFAULT_TAU
    t_w: float = DEFAULT_TW


QUICK = Config(
    publishers=(20, 40),
    base_publishers=20,
    subscribers=(150, 300),
    pubs_per_point=30,
    check_sample=10,
    match_sample=10,
    burst_rates=(1667.0,),
    hrp_pubs=300,
    background_rate=10.0,
    warmup=0.5,
)


# --- the workload (identical in both processes: everything is drawn from the seed) ---------


@dataclass
class Plan:
    """Who publishes and subscribes where, and every publication, for one seed."""

    topo: Scot
    workload: StockQuotes
    pub_hosts: list[BrokerId]
    symbols: list[str]
    sub_hosts: list[BrokerId]
    sub_filters: list[Filter]
    point_pubs: list[list[tuple[int, dict[str, Value]]]]  # per subscriber checkpoint
    hrp_host: BrokerId
    hrp_sub_hosts: list[BrokerId]
    bursts: list[dict[str, Any]] = field(default_factory=list)


def make_plan(cfg: Config) -> Plan:
    topo = T.s_e()
    rng = random.Random(f"scot-bench-{cfg.seed}")
    workload = StockQuotes(cfg.seed)
    n_pub = max(max(cfg.publishers), cfg.base_publishers)
    if n_pub > len(workload.symbols):
        raise SystemExit(f"at most {len(workload.symbols)} publishers (one symbol each)")
    symbols = rng.sample(workload.symbols, n_pub)
    pub_hosts = [rng.choice(topo.brokers) for _ in range(n_pub)]
    n_sub = max(cfg.subscribers)
    sub_filters = workload.subscriptions(n_sub, rng)
    sub_hosts = [rng.choice(topo.brokers) for _ in range(n_sub)]
    point_pubs = []
    for _ in cfg.subscribers:
        batch = []
        for _ in range(cfg.pubs_per_point):
            k = rng.randrange(cfg.base_publishers)
            batch.append((k, workload.publication(rng, symbols[k])))
        point_pubs.append(batch)
    hrp_host = rng.choice(topo.brokers)
    others = [b for b in topo.brokers if b != hrp_host]
    # one HRP subscriber in every cluster (the host cluster too, never at the host broker)
    hrp_sub_hosts = [rng.choice([b for b in others if topo.cluster_of(b) == j]) for j in topo.clusters]
    extra = max(0, round(cfg.hrp_share * n_sub) - len(hrp_sub_hosts))
    hrp_sub_hosts += [rng.choice(others) for _ in range(extra)]
    plan = Plan(
        topo, workload, pub_hosts, symbols, sub_hosts, sub_filters, point_pubs, hrp_host, hrp_sub_hosts
    )
    for rate in cfg.burst_rates:
        brng = random.Random(f"scot-burst-{cfg.seed}-{rate}")
        duration = cfg.hrp_pubs / rate
        horizon = cfg.warmup + duration + max(4.0, 3 * duration)
        background = []
        t = brng.expovariate(cfg.background_rate)
        while t < horizon:
            k = brng.randrange(cfg.base_publishers)
            background.append((t, k, workload.publication(brng, symbols[k])))
            t += brng.expovariate(cfg.background_rate)
        hrp = [hrp_publication(workload, brng) for _ in range(cfg.hrp_pubs)]
        plan.bursts.append({"rate": rate, "horizon": horizon, "background": background, "hrp": hrp})
    return plan


def hrp_publication(workload: StockQuotes, rng: random.Random) -> dict[str, Value]:
    quote = workload.publication(rng, workload.symbols[0])
    quote["symbol"] = HRP_SYMBOL
    quote["volume"] = HRP_VOLUME
    return quote


def hrp_advertisement() -> Filter:
    prices = [Predicate(a, ">=", 0.0) for a in ("open", "high", "low", "close")]
    return Filter(
        (
            Predicate("symbol", "=", HRP_SYMBOL),
            Predicate("volume", ">=", 0),
            Predicate("volume", "<", 1000),
            *prices,
            Predicate("date", "exists"),
        )
    )


def hrp_subscription() -> Filter:
    prices = [Predicate(a, ">", 0.0) for a in ("open", "high", "low", "close")]
    return Filter(
        (
            Predicate("symbol", "=", HRP_SYMBOL),
            Predicate("volume", "<", 1000),
            *prices,
            Predicate("date", "exists"),
        )
    )


# --- measuring one system --------------------------------------------------------------------


def new_sim(cfg: Config, topo: Scot, protocol: str) -> BrokerSim:
    return BrokerSim(
        topo,
        protocol=protocol,
        seed=cfg.seed,
        bandwidth=cfg.bandwidth,
        units="bytes",
        propagation=cfg.propagation,
        service_time=cfg.service,
        tau=cfg.tau,
        t_w=cfg.t_w,
        record_queues=True,
    )


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
    for k in range(cfg.base_publishers):
        sim.attach(f"P{k}", plan.pub_hosts[k])
        sim.advertise(f"P{k}", "a", plan.workload.advertisement(plan.symbols[k]), at=k * cfg.adv_gap)
    run_or_fail(sim, "advertising")
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
    `mode` names the routing ("spr", "idr" or "tid-s")."""
    if sim.protocol == "octopia":
        for core in sim.cores.values():
            core.dynamic = mode == "idr"  # type: ignore[attr-defined]  # read per publication
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
    }


def dynamic_routing(cfg: Config, plan: Plan, sim: BrokerSim) -> list[dict[str, Any]]:
    sim.attach("HRP", plan.hrp_host)
    sim.advertise("HRP", "h", hrp_advertisement())
    run_or_fail(sim, "the HRP's advertisement")
    for k, host in enumerate(plan.hrp_sub_hosts):
        sim.attach(f"H{k}", host)
        sim.subscribe(f"H{k}", "s", hrp_subscription(), at=sim.now + k * cfg.sub_gap)
    run_or_fail(sim, "the HRP subscriptions")
    modes = ("spr", "idr") if sim.protocol == "octopia" else ("tid-s",)
    out = []
    for network in NETWORKS:
        for src, dst in sim.links:
            fast = network == "slow-iLinks" and plan.topo.link_kind(src, dst) != ILINK
            sim.set_link(src, dst, bandwidth=cfg.burst_bandwidth * (cfg.fast_alinks if fast else 1.0))
        for burst in plan.bursts:
            for mode in modes:
                out.append(burst_run(cfg, plan, sim, burst, mode, network))
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


# --- the comparison --------------------------------------------------------------------------


def agreement(a: float, b: float, paper: str, tolerance: float = 0.01, floor: float = 0.0) -> str:
    """"yes" when a is `paper` ("lower" or "higher") than b; "NO (equal)" when they differ by
    at most `tolerance` of the larger or by at most `floor`; else "NO"."""
    if abs(a - b) <= max(tolerance * max(abs(a), abs(b)), floor):
        return "NO (equal)"
    return "yes" if (a < b) == (paper == "lower") else "NO"


def pct_less(a: float, b: float, word: str = "less") -> str:
    """a relative to b as "x% less" / "x% more"."""
    if b == 0:
        return "-"
    change = 100 * (1 - a / b)
    return f"{change:.1f}% {word}" if change >= 0 else f"{-change:.1f}% more"


def relative(a: float, b: float, up: str, down: str) -> str:
    """a against b as "x% <up>" (a larger) or "x% <down>"."""
    if b == 0:
        return "-"
    change = 100 * (a / b - 1)
    return f"{abs(change):.1f}% {up if change > 0 else down}"


def earlier(a: float, b: float) -> str:
    return f"{b - a:.2f} s earlier" if a <= b else f"{a - b:.2f} s later"


def summary(cfg: Config, results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per §10 metric: the sweep means of both systems, the comparison, the paper's
    figure, and whether the direction agrees (the first value lower/higher as the paper says)."""
    o, p = results["octopia"], results["padres"]
    rows: list[dict[str, Any]] = []

    def add(
        metric: str, unit: str, a: float, b: float, measured: str, paper: str, direction: str
    ) -> None:
        # stabilization times are sampled every t_w: closer than that is no difference
        floor = cfg.t_w if "stabilize" in metric else 0.0
        rows.append(
            {"metric": metric, "unit": unit, "octopia": a, "padres": b, "measured": measured,
             "paper": paper, "paper_direction": direction,
             "agrees": agreement(a, b, direction, floor=floor)}
        )

    def both(phase: str, key: str) -> tuple[float, float]:
        return mean([r[key] for r in o[phase]]), mean([r[key] for r in p[phase]])

    def bursts(res: dict[str, Any], network: str, mode: str, key: str) -> float:
        return mean([r[key] for r in res["bursts"] if r["mode"] == mode and r["network"] == network])

    a, b = both("publisher_scalability", "adv_table_mean")
    add("CLT vs SRT size", "entries", a, b, pct_less(a, b, "smaller"), "93% smaller", "lower")
    a, b = both("publisher_scalability", "adv_messages")
    add("advertisement messages", "", a, b, f"{b / a:.1f}x fewer" if a else "-", "88.5x fewer", "lower")
    a, b = both("publisher_scalability", "adv_delay_ms")
    measured = relative(b, a, "higher for PADRES", "lower for PADRES")
    add("advertisement delay", "ms", a, b, measured, "266% higher for PADRES", "lower")
    a, b = both("subscriber_scalability", "sub_delay_ms")
    add("subscription delay", "ms", a, b, pct_less(a, b), "34% less", "lower")
    a, b = both("subscriber_scalability", "sub_cpu_ms")
    add("subscription CPU, all brokers", "ms/sub", a, b, pct_less(a, b), "(cause of the 34%)", "lower")
    a, b = both("subscriber_scalability", "prt_mean")
    measured = relative(b, a, "larger for PADRES", "smaller for PADRES")
    add("PRT size", "entries", a, b, measured, "33% smaller for PADRES", "higher")
    a, b = both("subscriber_scalability", "sub_messages")
    add("subscription messages", "", a, b, relative(a, b, "more", "fewer"), "32.5% more", "higher")
    a, b = both("subscriber_scalability", "pub_messages_per_pub")
    add("publication messages", "per pub", a, b, pct_less(a, b, "fewer"), "4.5% fewer", "lower")
    a, b = both("subscriber_scalability", "pub_delay_ms")
    add("publication delay", "ms", a, b, pct_less(a, b), "25% less", "lower")
    a, b = both("subscriber_scalability", "matching_delay_us")
    measured = relative(a, b, "higher", "lower")
    add("matching delay (CPU per broker)", "us", a, b, measured, "11% higher", "higher")

    for net in NETWORKS:
        tag = f"IDR vs SPR, {net}:"
        i, s = bursts(o, net, "idr", "mean_q_target"), bursts(o, net, "spr", "mean_q_target")
        add(f"{tag} mean Q_l target links", "msgs", i, s, pct_less(i, s), "32% less", "lower")
        i, s = bursts(o, net, "idr", "peak_q"), bursts(o, net, "spr", "peak_q")
        add(f"{tag} peak Q_l", "msgs", i, s, pct_less(i, s), "-", "lower")
        i, s = bursts(o, net, "idr", "stabilize_s"), bursts(o, net, "spr", "stabilize_s")
        add(f"{tag} time to stabilize", "s", i, s, earlier(i, s), "35 s earlier", "lower")
        i, s = bursts(o, net, "idr", "stabilize_ilinks_s"), bursts(o, net, "spr", "stabilize_ilinks_s")
        add(f"{tag} stabilize, iLinks only", "s", i, s, earlier(i, s), "35 s earlier", "lower")
        i, s = bursts(o, net, "idr", "hrp_delay_mean_s"), bursts(o, net, "spr", "hrp_delay_mean_s")
        add(f"{tag} HRP delay", "s", i, s, pct_less(i, s), "lower (51% vs 48% < 1 s)", "lower")
        i, s = bursts(o, net, "idr", "hrp_messages"), bursts(o, net, "spr", "hrp_messages")
        rows.append(
            {"metric": f"{tag} HRP messages", "unit": "", "octopia": i, "padres": s,
             "measured": f"{100 * (i / s - 1):+.2f}%", "paper": "+0.04%",
             "paper_direction": "about equal",
             "agrees": "yes" if abs(i - s) <= 0.01 * s else "NO"}
        )
        a, b = bursts(o, net, "idr", "hrp_delay_mean_s"), bursts(p, net, "tid-s", "hrp_delay_mean_s")
        add(f"IDR vs TID-S, {net}: HRP delay", "s", a, b, pct_less(a, b), "54% less", "lower")
        a, b = bursts(o, net, "idr", "stabilize_s"), bursts(p, net, "tid-s", "stabilize_s")
        measured = earlier(a, b)
        add(f"IDR vs TID-S, {net}: time to stabilize", "s", a, b, measured, "200 s earlier", "lower")
    return rows


# --- printing --------------------------------------------------------------------------------


def fmt(v: float) -> str:
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 100):
        return f"{int(v)}"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def print_phase_tables(results: dict[str, dict[str, Any]]) -> None:
    o, p = results["octopia"], results["padres"]
    print("Publisher scalability (advertisements only)")
    head = (
        f"{'pubs':>6}{'CLT':>8}{'SRT':>8}{'adv msgs O':>12}{'adv msgs P':>12}{'dups P':>9}"
        f"{'adv delay O ms':>16}{'adv delay P ms':>16}"
    )
    print(head)
    print("-" * len(head))
    for ro, rp in zip(o["publisher_scalability"], p["publisher_scalability"], strict=True):
        print(
            f"{ro['publishers']:>6}{ro['adv_table_mean']:>8.1f}{rp['adv_table_mean']:>8.1f}"
            f"{ro['adv_messages']:>12}{rp['adv_messages']:>12}{rp['duplicates_dropped']:>9}"
            f"{ro['adv_delay_ms']:>16.3f}{rp['adv_delay_ms']:>16.3f}"
        )
    print()
    print("Subscriber scalability (100 publishers); publications at each checkpoint")
    head = (
        f"{'subs':>6}{'PRT O':>8}{'PRT P':>8}{'sub msgs O':>11}{'sub msgs P':>11}"
        f"{'sub ms O':>9}{'sub ms P':>9}{'msg/pub O':>10}{'msg/pub P':>10}"
        f"{'pub ms O':>9}{'pub ms P':>9}{'match us O':>11}{'match us P':>11}{'trees/sub P':>12}"
    )
    print(head)
    print("-" * len(head))
    for ro, rp in zip(o["subscriber_scalability"], p["subscriber_scalability"], strict=True):
        print(
            f"{ro['subscribers']:>6}{ro['prt_mean']:>8.0f}{rp['prt_mean']:>8.0f}{ro['sub_messages']:>11}"
            f"{rp['sub_messages']:>11}{ro['sub_delay_ms']:>9.3f}{rp['sub_delay_ms']:>9.3f}"
            f"{ro['pub_messages_per_pub']:>10.1f}{rp['pub_messages_per_pub']:>10.1f}"
            f"{ro['pub_delay_ms']:>9.3f}{rp['pub_delay_ms']:>9.3f}"
            f"{ro['matching_delay_us']:>11.0f}{rp['matching_delay_us']:>11.0f}"
            f"{rp['adv_trees_per_sub']:>12.1f}"
        )
    print()
    print("Bursty publisher: OctopiA SPR / IDR and PADRES TID-S (TID-D is not implemented)")
    head = (
        f"{'network':>12}{'rate/s':>7}{'mode':>7}{'meanQ tgt':>10}{'peakQ':>7}{'peakQ iL':>9}"
        f"{'backlog':>9}"
        f"{'stab s':>8}{'stab iL s':>10}{'delay s':>9}{'<1 s':>7}{'HRP msgs':>9}{'cases I/II/III':>16}"
    )
    print(head)
    print("-" * len(head))
    for r in sorted(o["bursts"] + p["bursts"], key=lambda r: (NETWORKS.index(r["network"]), -r["rate"])):
        cases = r["idr_cases"]
        c = "/".join(str(cases.get(f"idr_case_{k}", 0)) for k in (1, 2, 3))
        c = c if r["mode"] == "idr" else "-"
        print(
            f"{r['network']:>12}{r['rate']:>7.0f}{r['mode']:>7}{r['mean_q_target']:>10.1f}"
            f"{r['peak_q']:>7}{r['peak_q_ilinks']:>9}"
            f"{r['mean_backlog']:>9.0f}{r['stabilize_s']:>8.2f}{r['stabilize_ilinks_s']:>10.2f}"
            f"{r['hrp_delay_mean_s']:>9.3f}{r['hrp_under_1s']:>7.0%}{r['hrp_messages']:>9}{c:>16}"
        )


def print_summary(rows: list[dict[str, Any]]) -> None:
    print("OctopiA vs PADRES (means over the sweep), beside §10; first column OctopiA (IDR in the")
    print("IDR-vs-SPR rows), second PADRES (SPR in the IDR-vs-SPR rows)")
    head = f"{'metric':<54}{'OctopiA':>10}{'PADRES':>10}  {'measured':<26}{'paper':<26}{'agrees':<10}"
    print(head)
    print("-" * len(head))
    for r in rows:
        unit = f" [{r['unit']}]" if r["unit"] else ""
        print(
            f"{(r['metric'] + unit):<54}{fmt(r['octopia']):>10}{fmt(r['padres']):>10}  "
            f"{r['measured']:<26}{r['paper']:<26}{r['agrees']:<10}"
        )


# --- entry point -----------------------------------------------------------------------------


def ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(","))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench scot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a small version (seconds)")
    parser.add_argument("--publishers", type=ints, help="checkpoints, default 100,200,300,400,500")
    parser.add_argument(
        "--subscribers", type=ints, help="checkpoints, default 1000,2500,5000,7500,10000"
    )
    parser.add_argument("--pubs", type=int, help="publications per subscriber checkpoint (default 200)")
    parser.add_argument(
        "--burst-rates", type=floats, help="HRP publications per second, default 1667,1000"
    )
    parser.add_argument("--hrp-pubs", type=int, help="publications per HRP burst (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (1: no subprocess)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="directory for the JSON")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else Config()
    custom = {
        "publishers": args.publishers,
        "subscribers": args.subscribers,
        "pubs_per_point": args.pubs,
        "burst_rates": args.burst_rates,
        "hrp_pubs": args.hrp_pubs,
    }
    custom = {k: v for k, v in custom.items() if v is not None}
    cfg = replace(cfg, seed=args.seed, **custom)
    if max(cfg.publishers) > 500 or min(cfg.publishers + cfg.subscribers) < 1 or cfg.pubs_per_point < 1:
        raise SystemExit(
            "python -m bench scot: 1..500 publishers, at least one subscriber and publication"
        )
    if any(r <= 0 for r in cfg.burst_rates) or cfg.hrp_pubs < 1:
        raise SystemExit("python -m bench scot: burst rates and --hrp-pubs must be positive")
    info = machine()
    print(f"OctopiA vs PADRES on S_e (14 x K4 = 56 brokers), stock quotes (500 symbols, 7 attributes, "
          f"{SELECTIVITY:.0%} selectivity), simulated -- {info}")
    print(
        f"network: {cfg.bandwidth * 8 / 1e6:g} Mbit/s links, {cfg.propagation * 1e3:g} ms "
        f"propagation, {cfg.service * 1e6:g} us per message per broker; bursts: "
        f"{cfg.burst_bandwidth * 8 / 1e6:g} Mbit/s links (slow-iLinks: aLinks x{cfg.fast_alinks:g}), "
        f"tau={cfg.tau:g}, t_w={cfg.t_w * 1e3:g} ms",
        flush=True,
    )
    began = time.monotonic()
    if args.jobs >= 2:
        with ProcessPoolExecutor(max_workers=2) as pool:
            futures = {p: pool.submit(measure, p, cfg) for p in PROTOCOLS}
            results = {p: f.result() for p, f in futures.items()}
    else:
        results = {p: measure(p, cfg) for p in PROTOCOLS}
    checks = check_deliveries(cfg, results)
    print()
    print_phase_tables(results)
    rows = summary(cfg, results)
    print()
    print_summary(rows)
    wall = time.monotonic() - began
    print(f"\ndeliveries: {checks['compared']} publications delivered identically by both systems, "
          f"{checks['checked_against_scan']} checked against a linear scan; "
          f"CPU s: OctopiA {results['octopia']['cpu_s']:.0f}, PADRES {results['padres']['cpu_s']:.0f}; "
          f"wall {wall:.0f} s")
    default = not args.quick and not custom and args.seed == 0
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / ("scot.json" if default else "scot-partial.json")
    for res in results.values():
        del res["deliveries"]
    out.write_text(
        json.dumps(
            {
                "machine": info,
                "config": asdict(cfg),
                "topology": "s_e (broker/topologies/s_e.json)",
                "summary": rows,
                "octopia": results["octopia"],
                "padres": results["padres"],
                "checks": checks,
                "wall_s": round(wall, 1),
                "notes": NOTES,
            },
            indent=2,
        )
    )
    print(f"written to {out}")


NOTES = [
    "Simulated network (broker.sim): bytes-per-second links with FIFO output queues, constant "
    "propagation and per-message service time; delays exclude real matching cost and the JVM.",
    "TID-D (PADRES dynamic routing) is not implemented by broker/cores/padres.py; only TID-S is measured.",
    "Background load during bursts is scaled down from the paper's 100 publishers x 100-120/min.",
]


if __name__ == "__main__":
    main(sys.argv[1:])
