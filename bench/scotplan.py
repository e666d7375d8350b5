"""The workload of the OctopiA-vs-PADRES benchmark (`bench.scot`, OctopiA §10): its
configuration and everything drawn from the seed.

A `Config` holds everything a run depends on (`QUICK` is the small version); `make_plan` draws
from its seed who publishes and subscribes where, every publication of phase 2 and the
background and high-rate publisher (HRP) publications of every burst of phase 3, identically
in both worker processes.

The HRP's co-advertisers: §10 raised every subscription's selectivity to 4% so that it matched
4 publishers' advertisements, because TID-D can only re-stamp a publication onto another tree
its subscription is bound to.  Here `hrp_co_advertisers` more publishers, on random brokers,
advertise what the HRP advertises (and publish nothing), so every HRP subscription is bound to
1 + hrp_co_advertisers advertisement trees in PADRES; OctopiA gets the same advertisements.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from broker.cores.corebase import DEFAULT_TAU, DEFAULT_TW
from broker.cores.language.filters import Filter
from broker.cores.language.predicates import Predicate
from broker.cores.language.values import Value
from broker.cores.topology import BrokerId, Scot
from broker.stockquote import StockQuotes
from broker.topologyfile import s_e

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
    hrp_co_advertisers: int = 3  # silent publishers advertising the HRP's advertisement too
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
    hrp_co_hosts: list[BrokerId] = field(default_factory=list)


def make_plan(cfg: Config) -> Plan:
    topo = s_e()
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
    co_rng = random.Random(f"scot-co-advertisers-{cfg.seed}")  # its own stream: the rest is unchanged
    plan.hrp_co_hosts = [co_rng.choice(topo.brokers) for _ in range(cfg.hrp_co_advertisers)]
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
