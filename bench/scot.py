"""OctopiA against the PADRES-style baseline on S_e, in the broker simulator (OctopiA §10).

One run, one workload, one simulated network: the same seed draws the publishers (one
stock-quote advertisement each, on a random broker), the subscribers (one 7-attribute
subscription of about 2% selectivity each, on a random broker) and every publication, and
the same network model carries them for both systems.  Each system runs in its own process
(``--jobs 2``) on its own `broker.sim.BrokerSim` over S_e = the 14-vertex factor of Fig. 9
times K_4 (`broker.topologyfile.s_e`, 56 brokers).

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
   Three more publishers advertise what the HRP advertises (and publish nothing), so that
   every HRP subscription is bound to four advertisement trees, as the paper's 4% selectivity
   made it (`bench.scotplan`).  OctopiA runs the burst with scotSPR and again with scotIDR
   (tau = 10, t_w = 50 ms); PADRES with TID-S and again with TID-D (same tau and t_w).
   Measured from the queue samples taken every t_w: mean Q_l over the links that carried HRP
   copies, peak Q_l, mean total backlog, and the time to stabilize -- from the HRP's last
   publication until no queue exceeds its normal level (max(tau, the largest queue of the
   second before the burst)) any more -- over all links and over iLinks only; plus the HRP
   publications' delays and messages, and for TID-D the subscriptions it re-stamped onto
   another tree and those it had to leave on a congested link.  Phases 1-2 never congest a
   link, so TID-D would route exactly as TID-S there; only phase 3 runs it.

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
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from bench.machine import machine
from bench.scotphases import check_deliveries, measure
from bench.scotplan import PROTOCOLS, QUICK, Config
from bench.scotreport import print_phase_tables, print_summary, summary
from broker.stockquote import SELECTIVITY

RESULTS = Path("bench-results")


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
    "TID-D (PADRES dynamic routing, broker/cores/padres.py) runs in phase 3 only; the simulated time does not "
    "charge its path selection (the sequential search over the matched subscriptions' TIDs that §10, Fig. 16, "
    "blames for TID-D being slower), only its routes. Each HRP subscription is bound to 4 advertisement trees "
    "(the HRP's and 3 silent co-advertisers').",
    "Background load during bursts is scaled down from the paper's 100 publishers x 100-120/min.",
]


if __name__ == "__main__":
    main(sys.argv[1:])
