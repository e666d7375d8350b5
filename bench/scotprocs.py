"""python -m bench scot-processes: S_e as 56 real broker processes beside the simulator, for the
same seed (issue 46 item 8).  Not in the default run.

    python -m bench scot-processes [--quick] [--protocols octopia,padres] [--subscribers N]

For each protocol, one `broker.localscot.LocalScot` of S_e (`broker.topologyfile.s_e`: the
14-vertex factor of Fig. 9 times K_4, 56 broker processes on 127.0.0.1, OctopiA with scotIDR
or the PADRES-style baseline) runs the workload of `bench.scot` (`bench.scotplan.make_plan`,
the stock quotes of §10): phase 1, the base publishers advertise; phase 2, the subscribers
subscribe; then a batch of publications.  The simulator (`bench.scotphases.new_sim`) runs the
same operations for the same seed.  Measured, beside each other:

* per broker: resident memory (VmRSS) and CPU % of one core while idle, after the start and
  after the workload (from /proc; the machine is shared, so the spread is printed);
* after each phase settles (every broker's table sizes equal to the simulator's, or unchanged
  for 5 s, polled with a bound): the CLT / SRT and PRT sizes, equal or not (PADRES's
  advertisement trees are the first arrivals of each flood, so they depend on timing), and
  the control messages by kind, from every link's ``sent_by_kind`` (heartbeats and the start's
  table syncs left out), against the simulator's `traffic`; the wall time until it settled;
* the publications: who received each (against the simulator's recipients), duplicates, and
  the delay from the publish call to each delivery (real loopback TCP) beside the simulator's
  modelled delays (100 Mbit/s links, 0.2 ms propagation, 0.1 ms per message).

Results: bench-results/scot-processes.json (or -quick.json), with the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.machine import machine
from bench.scotphases import advertise_base, new_sim, subscribe_first
from bench.scotplan import QUICK, Config, Plan, make_plan
from broker.client import BrokerClient, Subscription
from broker.localscot import LocalScot

RESULTS = Path("bench-results")
#: Message kinds that are not the workload's (liveness and the start's resync).
NOT_WORKLOAD = {"broker_heartbeat", "scot_prt_sync", "scot_clt_sync"}
SETTLE = 300.0
STABLE = 5.0
CLK = os.sysconf("SC_CLK_TCK")


# --- the processes -------------------------------------------------------------------------------
def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def idle(scot: LocalScot, seconds: float) -> dict[str, Any]:
    """RSS and CPU % of one core per broker over `seconds` of no workload."""
    pids = [d.pid for d in scot.daemons() if d.pid is not None]
    before = {p: cpu_seconds(p) for p in pids}
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    cpu = [100 * (cpu_seconds(p) - before[p]) / elapsed for p in pids]
    rss = [rss_mb(p) for p in pids]
    return {"brokers": len(pids), "rss_mb": spread(rss), "cpu_pct": spread(cpu), "seconds": round(elapsed, 1)}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3), "max": round(max(values), 3)}


# --- the simulator's reference --------------------------------------------------------------------
def simulate(cfg: Config, plan: Plan, protocol: str, subscribers: int, pubs: list[tuple[int, dict[str, Any]]]
             ) -> dict[str, Any]:
    sim = new_sim(cfg, plan.topo, protocol)
    advertise_base(sim, cfg, plan)
    adv_tables, adv_traffic = sim.table_sizes(), Counter(sim.traffic)
    subscribe_first(sim, cfg, plan, subscribers)
    sub_tables = sim.table_sizes()
    sub_traffic = Counter(sim.traffic)
    sub_traffic.subtract(adv_traffic)
    start = sim.now
    for n, (k, attrs) in enumerate(pubs):
        sim.publish(f"P{k}", attrs, at=start + n * cfg.pub_gap, pid=f"p{n}")
    assert sim.run(), "the simulator did not settle"
    return {
        "sim": sim,
        "tables": (adv_tables, sub_tables),
        "traffic": (dict(adv_traffic), {k: v for k, v in sub_traffic.items() if v}),
        "recipients": {f"p{n}": sorted(c.removeprefix("S") for c in sim.recipients(f"p{n}")) for n in range(len(pubs))},
        "delays_ms": [1000 * d for d in sim.publication_delays()],
    }


# --- the real run ----------------------------------------------------------------------------------
async def statuses(scot: LocalScot) -> dict[str, dict[str, Any]]:
    async def one(bid: str) -> tuple[str, dict[str, Any]]:
        async with BrokerClient(scot.address(bid)) as client:
            return bid, await client.status()

    return dict(await asyncio.gather(*(one(b) for b in scot.topology.brokers)))


def tables_of(bodies: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for bid, body in bodies.items():
        for table, size in body["tables"].items():
            if size is not None:
                out.setdefault(table, {})[bid] = size
    return out


def sent_by_kind(bodies: dict[str, dict[str, Any]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for body in bodies.values():
        for link in body["links"].values():
            total.update(link["sent_by_kind"])
    return total


async def settle(scot: LocalScot, want: dict[str, dict[str, int]], what: str
                 ) -> tuple[float, dict[str, Any], bool]:
    """Seconds until every broker's tables equal `want`, or stay unchanged for STABLE seconds
    (bounded), the statuses then, and whether they equal `want`.  PADRES's advertisement trees
    are the first arrivals of each flood, so where its PRT entries lie depends on timing."""
    t0 = time.monotonic()
    last: dict[str, dict[str, int]] | None = None
    since = t0
    while True:
        bodies = await statuses(scot)
        have = tables_of(bodies)
        now = time.monotonic()
        if all(have.get(t) == sizes for t, sizes in want.items()):
            return now - t0, bodies, True
        if have != last:
            last, since = have, now
        elif now - since >= STABLE:
            return since - t0, bodies, False
        if now - t0 > SETTLE:
            raise SystemExit(f"{what} did not settle in {SETTLE:.0f} s")
        await asyncio.sleep(0.2)


def delta(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    out = Counter(after)
    out.subtract(before)
    return {k: v for k, v in sorted(out.items()) if v and k not in NOT_WORKLOAD}


async def workload(scot: LocalScot, cfg: Config, plan: Plan, ref: dict[str, Any], subscribers: int,
                   pubs: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    base = sent_by_kind(await statuses(scot))
    publishers = [BrokerClient(scot.address(plan.pub_hosts[k]), client_id=f"P{k}") for k in range(cfg.base_publishers)]
    for pub in publishers:
        await pub.connect()
    t0 = time.monotonic()
    for k, pub in enumerate(publishers):
        await pub.advertise(plan.workload.advertisement(plan.symbols[k]), "a")
    adv_settled, bodies, adv_equal = await settle(scot, dict(ref["tables"][0]), "phase 1")
    adv_tables = tables_of(bodies)
    adv_messages = delta(sent_by_kind(bodies), base)
    after_adv = sent_by_kind(bodies)
    hosts = sorted(set(plan.sub_hosts[:subscribers]))
    clients = {h: BrokerClient(scot.address(h)) for h in hosts}
    for client in clients.values():
        await client.connect()
    subs: dict[int, Subscription] = {}
    t1 = time.monotonic()
    for k in range(subscribers):
        subs[k] = await clients[plan.sub_hosts[k]].subscribe(plan.sub_filters[k], f"s{k}")
    sub_settled, bodies, sub_equal = await settle(scot, dict(ref["tables"][1]), "phase 2")
    sub_tables = tables_of(bodies)
    sub_messages = delta(sent_by_kind(bodies), after_adv)
    published_at: dict[str, float] = {}
    got: dict[str, list[tuple[int, float]]] = {}

    async def collect(k: int, sub: Subscription) -> None:
        async for d in sub:
            got.setdefault(d.pid, []).append((k, time.monotonic()))

    readers = [asyncio.create_task(collect(k, s)) for k, s in subs.items()]
    for n, (k, attrs) in enumerate(pubs):
        pid = f"p{n}"
        published_at[pid] = time.monotonic()
        await publishers[k].publish(attrs, pid)
        await asyncio.sleep(cfg.pub_gap)
    want = {pid: sorted(int(s) for s in names) for pid, names in ref["recipients"].items()}
    deadline = time.monotonic() + SETTLE
    while time.monotonic() < deadline and any(sorted({k for k, _ in got.get(p, [])}) != w for p, w in want.items()):
        await asyncio.sleep(0.2)
    for task in readers:
        task.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    for client in [*publishers, *clients.values()]:
        await client.close()
    wrong = [p for p, w in want.items() if sorted({k for k, _ in got.get(p, [])}) != w]
    duplicates = sum(len(v) - len({k for k, _ in v}) for v in got.values())
    delays = [1000 * (t - published_at[p]) for p, v in got.items() for _, t in v]
    return {
        "adv_settled_s": round(adv_settled, 2), "adv_wall_s": round(time.monotonic() - t0, 2),
        "sub_settled_s": round(sub_settled, 2), "sub_wall_s": round(time.monotonic() - t1, 2),
        "adv_messages": adv_messages, "sub_messages": sub_messages,
        "tables_equal": {"phase1": adv_equal, "phase2": sub_equal},
        "real_tables": {"phase1": adv_tables, "phase2": sub_tables},
        "publications": len(pubs), "deliveries": len(delays), "wrong_recipients": len(wrong),
        "duplicates": duplicates, "delays_ms": delays,
    }


def run(protocol: str, cfg: Config, plan: Plan, subscribers: int, pubs: list[tuple[int, dict[str, Any]]],
        idle_s: float, work: Path) -> dict[str, Any]:
    ref = simulate(cfg, plan, protocol, subscribers, pubs)
    print(f"   {protocol}: the simulator's run done; starting {len(plan.topo)} broker processes", flush=True)
    t0 = time.monotonic()
    with LocalScot(work / protocol, plan.topo, protocol=protocol, log_level="warning") as scot:
        started = time.monotonic() - t0
        quiet = idle(scot, idle_s)
        real = asyncio.run(workload(scot, cfg, plan, ref, subscribers, pubs))
        loaded = idle(scot, idle_s)
    sim_delays = ref.pop("delays_ms")
    real_delays = real.pop("delays_ms")
    ref.pop("sim")
    return {
        "protocol": protocol, "brokers": len(plan.topo), "start_s": round(started, 1),
        "idle_after_start": quiet, "idle_after_workload": loaded,
        "tables": {"phase1": ref["tables"][0], "phase2": ref["tables"][1]},
        "messages": {"phase1": {"sim": ref["traffic"][0], "real": real["adv_messages"]},
                     "phase2": {"sim": ref["traffic"][1], "real": real["sub_messages"]}},
        "delay_ms": {"sim": spread(sim_delays) | {"mean": round(statistics.fmean(sim_delays), 3)},
                     "real": spread(real_delays) | {"mean": round(statistics.fmean(real_delays), 3)}},
        **{k: v for k, v in real.items() if k not in ("adv_messages", "sub_messages")},
    }


def report(row: dict[str, Any]) -> None:
    p = row["protocol"]
    print(f"\n== {p}: {row['brokers']} broker processes, up in {row['start_s']} s")
    for label in ("idle_after_start", "idle_after_workload"):
        r = row[label]
        print(f"   {label.replace('_', ' ')}: RSS {r['rss_mb']['median']:.1f} MB per broker "
              f"[{r['rss_mb']['min']:.1f}-{r['rss_mb']['max']:.1f}], CPU {r['cpu_pct']['median']:.2f}% of a core "
              f"[{r['cpu_pct']['min']:.2f}-{r['cpu_pct']['max']:.2f}] over {r['seconds']} s")
    for phase, settled in (("phase1", row["adv_settled_s"]), ("phase2", row["sub_settled_s"])):
        sim_mean = {t: round(statistics.fmean(v.values()), 2) for t, v in row["tables"][phase].items()}
        real_mean = {t: round(statistics.fmean(v.values()), 2) for t, v in row["real_tables"][phase].items()}
        sim, real = row["messages"][phase]["sim"], row["messages"][phase]["real"]
        kinds = sorted(set(sim) | set(real))
        verdict = "equal to the simulator's" if row["tables_equal"][phase] else "NOT equal to the simulator's"
        print(f"   {phase}: tables {verdict} after {settled:.2f} s (mean per broker, simulator {sim_mean}, real "
              f"{real_mean}); messages by kind, simulator / real: "
              + ", ".join(f"{k} {sim.get(k, 0)} / {real.get(k, 0)}" for k in kinds))
    d = row["delay_ms"]
    print(f"   publications: {row['publications']}, deliveries {row['deliveries']}, recipients differing from the "
          f"simulator's: {row['wrong_recipients']}, duplicates {row['duplicates']}")
    print(f"   delay ms, simulator (modelled links) / real (loopback TCP): mean {d['sim']['mean']} / "
          f"{d['real']['mean']}, median {d['sim']['median']} / {d['real']['median']}, "
          f"max {d['sim']['max']} / {d['real']['max']}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench scot-processes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 publishers, 150 subscribers, 20 publications")
    parser.add_argument("--protocols", default="octopia,padres")
    parser.add_argument("--subscribers", type=int, help="subscribers (default 1000; quick 150)")
    parser.add_argument("--publications", type=int, help="publications (default 100; quick 20)")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of each idle measurement")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cfg = replace(QUICK if args.quick else Config(), seed=args.seed)
    subscribers = args.subscribers or (150 if args.quick else 1000)
    cfg = replace(cfg, subscribers=(subscribers,))
    n_pubs = args.publications or (20 if args.quick else 100)
    plan = make_plan(replace(cfg, pubs_per_point=n_pubs))
    pubs = plan.point_pubs[0][:n_pubs]
    began = time.monotonic()
    print(f"S_e as real processes and in the simulator, seed {cfg.seed}: {cfg.base_publishers} publishers, "
          f"{subscribers} subscribers, {len(pubs)} publications; {machine()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="scotprocs-") as tmp:
        for protocol in args.protocols.split(","):
            row = run(protocol, cfg, plan, subscribers, pubs, args.idle, Path(tmp))
            report(row)
            rows.append(row)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("scot-processes-quick.json" if args.quick else "scot-processes.json")
    out.write_text(json.dumps({"machine": machine(), "seed": cfg.seed, "publishers": cfg.base_publishers,
                               "subscribers": subscribers, "publications": len(pubs), "rows": rows,
                               "seconds": round(time.monotonic() - began, 1)}, indent=1))
    print(f"\nwritten to {out} ({time.monotonic() - began:.0f} s)")

