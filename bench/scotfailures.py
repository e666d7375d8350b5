"""python -m bench scot-failures: a broker of S_e fails during a stream of publications, in the
simulator (issue 46's failure table).  Not in the default run.

    python -m bench scot-failures [--quick] [--seeds N] [--detection S]

The workload is `bench.scot`'s (`bench.scotplan.make_plan`: the stock quotes of §10, the base
publishers and the subscribers drawn for the seed, links of 100 Mbit/s).  After phases 1-2
settle, the base publishers publish a stream (one publication every `pub_gap`); at 1/4 of it
the victim crashes, its neighbours suspect it `--detection` seconds later (the daemon's
default heartbeat 0.5 s x 3), and after 3/4 it restarts with empty tables, its neighbours
noticing at once.  Victims: an inner broker (B(G,0): factor degree 4) and an edge broker
(B(A,0)).  Variants: OctopiA/IDR with failure routing (detours, acknowledged copies sent
around the suspect, resync), OctopiA/IDR without it (the paper's routing: a suspect is only
recorded), and the PADRES baseline with TID-S and with TID-D (it has no failure routing).  Per variant and
victim, over the seeds:

* lost before detection / after detection: deliveries that live matching subscribers (not
  the victim's own) did not get, of publications issued between the crash and the detection,
  and after the detection until the restart (publishers at the victim left out);
* duplicates (a client getting a publication twice), and second arrivals of a copy at a broker
  beside the duplicates suppressed (equal: none was handled twice);
* messages: the detours of the stream, and all its inter-broker messages minus those of the
  same stream with no failure (negative: the dead broker forwards nothing, and nothing is sent
  for its subscribers);
* resync: the restart's table syncs and the simulated time until the last was sent, and
  whether every table then equals that of a network that never had the victim's clients.
  Acknowledging heartbeats every 0.5 s (`BrokerSim.heartbeat`); a crash loses what the victim
  had not yet sent.

Results: bench-results/scot-failures.json (or -quick.json) with the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.machine import machine
from bench.scotphases import advertise_base, new_sim, subscribe_first
from bench.scotplan import QUICK, Config, Plan, make_plan
from broker.cores.octopia import OctopiaBroker
from broker.sim import BrokerSim

RESULTS = Path("bench-results")
VICTIMS = {"inner": "G,0", "edge": "A,0"}
VARIANTS = ("octopia-idr (failure routing)", "octopia-idr (paper routing)", "padres tid-s", "padres tid-d")
#: Seconds between the acknowledging heartbeats (the daemon's default).
HEARTBEAT = 0.5
SYNC_KINDS = {"scot_prt_sync", "scot_clt_sync"}


def build(cfg: Config, plan: Plan, variant: str, subscribers: int, without: str = "") -> BrokerSim:
    """Phases 1-2 settled (the clients of broker `without` left out)."""
    protocol = "padres" if variant.startswith("padres") else "octopia"
    sim = new_sim(cfg, plan.topo, protocol, dynamic=protocol == "octopia" or variant.endswith("tid-d"), trace=True,
                  record_queues=False)
    set_routing(sim, variant)
    advertise_base(sim, cfg, plan, without)
    subscribe_first(sim, cfg, plan, subscribers, without)
    return sim


def set_routing(sim: BrokerSim, variant: str) -> None:
    for core in sim.cores.values():
        if isinstance(core, OctopiaBroker):
            core.failure_routing = "failure routing" in variant


def stream(cfg: Config, plan: Plan, count: int) -> list[tuple[int, dict[str, Any]]]:
    pubs = plan.point_pubs[0]
    return [pubs[n % len(pubs)] for n in range(count)]


def one(cfg: Config, plan: Plan, variant: str, victim: str, subscribers: int, count: int, detection: float
        ) -> dict[str, Any]:
    reference = build(cfg, plan, variant, subscribers)
    sim = build(cfg, plan, variant, subscribers)
    pubs = stream(cfg, plan, count)
    t0 = sim.now
    crash_at, restart_at = t0 + 0.25 * count * cfg.pub_gap, t0 + 0.75 * count * cfg.pub_gap
    detect_at = crash_at + detection
    base_traffic = Counter(sim.traffic)
    ref_base = Counter(reference.traffic)
    issued: list[tuple[str, float, int]] = []
    for n, (k, attrs) in enumerate(pubs):
        at = t0 + n * cfg.pub_gap
        if not (at >= crash_at and plan.pub_hosts[k] == victim):  # its advertisement dies with it
            reference.publish(f"P{k}", attrs, at=at, pid=f"p{n}")
            sim.publish(f"P{k}", attrs, at=at, pid=f"p{n}")
            issued.append((f"p{n}", at, k))
    assert reference.run()

    def run_until(until: float) -> None:  # with the acknowledgements of a heartbeat every HEARTBEAT s
        while sim.now + HEARTBEAT < until:
            sim.run(until=sim.now + HEARTBEAT)
            sim.heartbeat()
        sim.run(until=until)

    run_until(crash_at)
    sim.crash(victim)
    run_until(detect_at)
    sim.detect(victim)
    run_until(restart_at)
    restart_traffic_before = Counter(sim.traffic)
    assert sim.trace is not None
    sim.trace.clear()
    sim.restart(victim)
    set_routing(sim, variant)
    resync_start = sim.now
    assert sim.run(), "the restart did not settle"
    resync_traffic = Counter(sim.traffic)
    resync_traffic.subtract(restart_traffic_before)
    syncs = [(t, m.kind) for t, _, _, m in sim.trace if m.kind in SYNC_KINDS]
    at_victim = {f"S{k}" for k in range(subscribers) if plan.sub_hosts[k] == victim}
    lost = {"before": 0, "after": 0, "during_restart": 0}
    for pid, at, _ in issued:
        want = {c for c in reference.recipients(pid) if c not in at_victim or not crash_at <= at}
        got = set(sim.recipients(pid))
        missing = len(want - got)
        if crash_at <= at < detect_at:
            lost["before"] += missing
        elif detect_at <= at < restart_at:
            lost["after"] += missing
        elif at >= restart_at:
            lost["during_restart"] += missing
    duplicates = sum(1 for pid, _, _ in issued for n in sim.recipients(pid).values() if n > 1)
    repeat_arrivals = sum(n - 1 for pid, _, _ in issued for b, n in sim.pub_visits.get(pid, {}).items()
                          if n > 1 and b != victim)
    ref_traffic = Counter(reference.traffic)
    ref_traffic.subtract(ref_base)
    stream_traffic = Counter(sim.traffic)
    stream_traffic.subtract(base_traffic)
    stream_traffic.subtract(resync_traffic)
    # the tables of a network that never had the victim's clients (they died with it)
    tables_equal = sim.table_sizes() == build(cfg, plan, variant, subscribers, without=victim).table_sizes()
    return {
        "variant": variant, "victim": victim, "publications": len(issued),
        "lost_before_detection": lost["before"], "lost_after_detection": lost["after"],
        "lost_after_restart": lost["during_restart"], "duplicates": duplicates,
        "repeat_arrivals": repeat_arrivals, "suppressed": sim.counters()["suppressed_duplicates"],
        "detour_messages": stream_traffic["scot_detour"],
        "messages_minus_reference": sum(stream_traffic.values()) - sum(ref_traffic.values()),
        "sync_messages": len(syncs),
        "after_restart_by_kind": {k: v for k, v in sorted(resync_traffic.items()) if v},
        "resync_s": round(max((t for t, _ in syncs), default=resync_start) - resync_start, 4),
        "tables_equal": tables_equal,
        "lost_at_crashed": sum(sim.lost_at_crashed.values()),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench scot-failures", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 publishers, 150 subscribers, 200 publications")
    parser.add_argument("--seeds", type=int, help="seeds (quick 2, default 5)")
    parser.add_argument("--subscribers", type=int, help="subscribers (quick 150, default 1000)")
    parser.add_argument("--publications", type=int, help="publications in the stream (quick 200, default 400)")
    parser.add_argument("--detection", type=float, default=1.5, help="seconds from the crash to the suspicion")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else Config()
    subscribers = args.subscribers or (150 if args.quick else 1000)
    count = args.publications or (200 if args.quick else 400)
    seeds = args.seeds or (2 if args.quick else 5)
    began = time.monotonic()
    print(f"S_e in the simulator, a broker crashing during a stream: {base.base_publishers} publishers, "
          f"{subscribers} subscribers, {count} publications every {base.pub_gap * 1000:.0f} ms, detection after "
          f"{args.detection} s, restart at 3/4 of the stream; {seeds} seeds; {machine()}")
    rows: list[dict[str, Any]] = []
    for seed in range(seeds):
        cfg = replace(base, seed=seed, subscribers=(subscribers,), pubs_per_point=min(count, 200))
        plan = make_plan(cfg)
        for kind, victim in VICTIMS.items():
            for variant in VARIANTS:
                row = one(cfg, plan, variant, victim, subscribers, count, args.detection)
                row.update(seed=seed, kind=kind)
                rows.append(row)
        print(f"   seed {seed} done ({time.monotonic() - began:.0f} s)", flush=True)
    keys = ("lost_before_detection", "lost_after_detection", "lost_after_restart", "duplicates",
            "repeat_arrivals", "suppressed", "detour_messages", "messages_minus_reference", "sync_messages",
            "resync_s")
    print(f"\n   {'victim':<7} {'variant':<32} " + " ".join(f"{k.replace('_', ' ')[:14]:>14}" for k in keys)
          + f" {'tables equal':>12}")
    summary = []
    for kind in VICTIMS:
        for variant in VARIANTS:
            group = [r for r in rows if r["kind"] == kind and r["variant"] == variant]
            med = {k: statistics.median(r[k] for r in group) for k in keys}
            equal = sum(r["tables_equal"] for r in group)
            summary.append({"victim": kind, "variant": variant, **med, "tables_equal": f"{equal}/{len(group)}",
                            "range": {k: [min(r[k] for r in group), max(r[k] for r in group)] for k in keys}})
            print(f"   {kind:<7} {variant:<32} " + " ".join(f"{med[k]:>14.4g}" for k in keys)
                  + f" {equal:>9}/{len(group)}")
    print("   (medians over the seeds; deliveries lost, of live matching subscribers, publishers at the victim "
          "left out; resync: messages and simulated seconds after the restart)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("scot-failures-quick.json" if args.quick else "scot-failures.json")
    out.write_text(json.dumps({"machine": machine(), "detection_s": args.detection, "subscribers": subscribers,
                               "publications": count, "seeds": seeds, "rows": rows, "summary": summary,
                               "seconds": round(time.monotonic() - began, 1)}, indent=1, default=str))
    print(f"written to {out} ({time.monotonic() - began:.0f} s)")
