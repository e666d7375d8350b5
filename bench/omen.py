"""python -m bench omen: paper 003's §6 on the omen cores in the simulator (`pubsub.sim.omen`),
each number beside the paper's.  Not in the default run.

    --quick     150 nodes, 20 churn events, λ = 1, 3, 5 (a few minutes)
    (default)   1,000 nodes (the paper's FB 1K / TW 1K size), 60 churn events, λ = 1, 3, 5, 9 (long)
    --workload  facebook (default) | twitter | synthetic

The paper's workloads (Facebook and Twitter samples of 1K and 10K users, the Google cluster
churn trace) cannot be fetched here.  The default runs their stand-ins
(`pubsub.omen.workloads`): a social graph generated at ten times the size, BFS-sampled to the
target, each user a topic its friends (Twitter: followers) subscribe to, and a Poisson churn
trace over the sample (10% held out to join, leaves and joins with probability 0.5); half the
leaves are crashes here.  How each was made is printed with the tables.  `--workload
synthetic` runs paper 001's shape instead (`pubsub.tco.workload`: power-law subscription
sizes; 150 nodes and 30 topics quick, 600 and 100 default) and its churn rounds.  §6.3's
backup in-degrees are always on the synthetic shape, whose popularity is Zipf or exponential
as there.  Compare directions and ratios, not values.  Measured:

1. **§6.3, backups greedy against primal-dual** (λ = 3): every node's backup set built from
   every other node's descriptor (what OMen-G's converged view holds), per popularity; the
   in-degree of v is the number of nodes whose backup set holds v.
2. **Fig. 8a**: the mean local view (descriptors a node holds, itself not counted) after the
   warm-up, per λ; the fraction of nodes whose view holds under 5% of all nodes.
3. **Fig. 8b, 9**: the maximum and mean degree after the churn trace, per λ, and for the
   default λ: OMen with `induced` and with `global` connectivity, OMen-G (global view),
   Low-ODA recomputed from scratch on the nodes at the end, SpiderCast(3,1) and (4,0) on the
   same trace.
4. **Fig. 10**: CPU seconds of the repair computation per event (Alg. 1 at the coordinator)
   against Low-ODA recomputed on the nodes at the end (one build), and the events'
   life cycles in intervals (τ_e - τ_s, first `omen_done` delivered).
5. **Fig. 11**: topic diameters, maximum and mean, OMen against SpiderCast(3,1).
6. **Fig. 12**: messages per churn event by kind (the periodic gossip and shuffles per node
   per interval apart), and the supervisor's messages per event.
7. **Beyond Assumption 0**: L + 1 consecutive circle nodes crash at once, per seed: did a TCO
   come back?

Results: bench-results/omen.json (or omen-quick.json) with the machine and every parameter.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pubsub.omen.node as omen_node
from bench.machine import machine
from pubsub.omen.node import Settings
from pubsub.omen.spidercast import SpiderCast, SpiderCastParams
from pubsub.omen.views import Descriptor, build_backups
from pubsub.omen.workloads import KINDS, Kind, facebook, poisson_churn, twitter
from pubsub.omen.workloads import OPEN_PARAMETERS as SOCIAL_OPEN_PARAMETERS
from pubsub.sim.omen import PERIODIC, OmenSim
from pubsub.tco.workload import OPEN_PARAMETERS, POPULARITIES, Shape, Workload
from pubsub.topicgraph.graph import TopicOverlay
from pubsub.topicgraph.lowoda import low_oda

RESULTS = Path("bench-results")
PAPER: dict[str, Any] = {
    "greedy_under_5": {"zipf": 89.8, "exponential": 95.2},
    "pd_in_degree_min_max": (21, 59),
    "view_mean": {1: 21.02, 3: 40.49, 5: 48.40, 9: 57.59},
    "max_degree": {0: 333, 1: 313, 3: 302, 5: 283, 7: 277, 9: 274},
    "omen_over_omen_g_max_degree": 1.04,
    "omen_over_lowoda_max_degree": 1.15,
    "repair_time_omen_over_omen_g": 0.0467,
    "repair_time_omen_over_lowoda_1k": 0.0020,
    "diameter_gap_max_mean": (3.67, 1.45),
}


# ---------------------------------------------------------------------------------- the parts
def backups_in_degrees(shape: Shape, seed: int, method: str, coverage: int) -> list[int]:
    """§6.3: per node, how many other nodes' backup sets (from every descriptor) hold it."""
    topics = Workload(shape, seed).initial()
    base = low_oda(topics)
    everyone = {n: Descriptor(n, ts, frozenset(base.neighbors[n])) for n, ts in topics.items()}
    rng = random.Random(seed)
    held: Counter[str] = Counter()
    for node in sorted(everyone):
        for backup in build_backups(everyone[node], everyone, coverage, rng, method).chosen:
            held[backup] += 1
    return [held[n] for n in sorted(everyone)]


@dataclass(frozen=True)
class Scenario:
    """What one run starts from and the churn it goes through: the initial nodes with their
    topics, and a function giving `count` events ``(join | leave | crash, node, topics)``."""

    name: str
    initial: dict[str, frozenset[str]]
    churn: Callable[[set[str], int, random.Random], Iterator[tuple[str, str, frozenset[str]]]]
    description: tuple[str, ...] = ()


def _crashes(events: Iterable[tuple[str, str, frozenset[str]]], rng: random.Random
             ) -> Iterator[tuple[str, str, frozenset[str]]]:
    """Half the leaves become crashes."""
    for kind, node, topics in events:
        yield ("crash" if kind == "leave" and rng.random() < 0.5 else kind), node, topics


def synthetic(shape: Shape, seed: int) -> Scenario:
    """Paper 001's synthetic shape (`pubsub.tco.workload`): joins and leaves with probability
    0.5 (`Workload.rounds`), half the leaves crashes."""
    workload = Workload(shape, seed)

    def churn(present: set[str], count: int, rng: random.Random) -> Iterator[tuple[str, str, frozenset[str]]]:
        return _crashes(workload.rounds(present, count), rng)

    return Scenario(f"synthetic ({shape.popularity})", workload.initial(), churn)


def social(kind: Kind, nodes: int, seed: int, events: int) -> Scenario:
    """Paper 003 §6.1's workloads as their stand-ins (`pubsub.omen.workloads`): a BFS-sampled
    social graph of `nodes` users, each a topic its friends (followers) subscribe to, and a
    Poisson churn trace over it (10% of the sample held out to join; half the leaves
    crashes)."""
    work = (facebook if kind == "facebook" else twitter)(nodes, seed)
    churn_trace = poisson_churn(work.topics_of, events, seed)

    def churn(present: set[str], count: int, rng: random.Random) -> Iterator[tuple[str, str, frozenset[str]]]:
        return _crashes(((e.kind, e.node, e.topics) for e in churn_trace.events[:count]), rng)

    return Scenario(kind, dict(churn_trace.initial), churn, (*work.describe(), *churn_trace.describe()))


class RepairClock:
    """CPU seconds spent in Alg. 1 (wraps the node module's `repair_tco_on_churn`)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._inner = getattr(omen_node, "repair_tco_on_churn")  # noqa: B009 - patched below

    def __enter__(self) -> RepairClock:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.process_time()
            try:
                return self._inner(*args, **kwargs)
            finally:
                self.seconds.append(time.process_time() - t0)

        setattr(omen_node, "repair_tco_on_churn", timed)  # noqa: B010 - the node module calls it by name
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(omen_node, "repair_tco_on_churn", self._inner)  # noqa: B010


def diameters(g: TopicOverlay) -> tuple[int, float]:
    """The maximum and mean topic diameter (BFS on each topic's subgraph)."""
    found = []
    for members in g.subscribers.values():
        if len(members) < 2:
            continue
        worst = 0
        for start in members:
            seen, frontier, depth = {start}, [start], 0
            while frontier:
                nxt = [o for n in frontier for o in g.neighbors[n] if o in members and o not in seen]
                seen.update(nxt)
                frontier = list(set(nxt))
                depth += 1 if frontier else 0
            worst = max(worst, depth)
        found.append(worst)
    return (max(found, default=0), statistics.fmean(found) if found else 0.0)


def run_omen(
    scenario: Scenario,
    seed: int,
    settings: Settings,
    events: int,
    warm: int,
    *,
    global_view: bool = False,
    lowoda: bool = False,
) -> dict[str, Any]:
    """One OMen run: warm-up, then the churn trace, each event until quiet.  With `lowoda`,
    Low-ODA is recomputed once on the overlay's nodes at the end: its maximum degree, and its CPU
    time as the cost of recomputing after an event (the node count barely moves over a trace, so
    one build at 1K nodes stands for each; it costs minutes)."""
    sim = OmenSim(scenario.initial, settings, seed=seed, global_view=global_view)
    sim.run(warm)
    n = len(sim.alive)
    views = [len(sim.nodes[a].view.known) - 1 for a in sorted(sim.alive)]
    rng = random.Random(seed + 1)
    kinds: Counter[str] = Counter()
    periodic = 0
    intervals = 0.0
    with RepairClock() as clock:
        for kind, node, topics in scenario.churn(set(sim.alive), events, rng):
            before = Counter(sim.sent)
            if kind == "join":
                sim.join(node, topics)
            else:
                getattr(sim, kind)(node)
            intervals += sim.run_until_quiet(limit=600)
            delta = Counter(sim.sent)
            delta.subtract(before)
            for k, v in delta.items():
                if k in PERIODIC:
                    periodic += v
                else:
                    kinds[k] += v
    g = sim.overlay()
    lowoda_max_degree = lowoda_cpu = None
    if lowoda:
        t0 = time.process_time()
        lowoda_max_degree = low_oda(g).max_degree()
        lowoda_cpu = time.process_time() - t0
    life = [e.done - e.started for e in sim.events.values() if e.done is not None]
    return {
        "nodes_at_start": n,
        "view_mean": statistics.fmean(views),
        "view_under_5pct": sum(v < 0.05 * n for v in views) / n,
        "max_degree": g.max_degree(),
        "mean_degree": g.average_degree(),
        "tco": not sim.problems(),
        "diameter": diameters(g),
        "repair_cpu_mean": statistics.fmean(clock.seconds) if clock.seconds else 0.0,
        "lowoda_cpu": lowoda_cpu,
        "life_cycle_mean": statistics.fmean(life) if life else None,
        "events": events,
        "messages_per_event": {k: v / events for k, v in sorted(kinds.items())},
        "periodic_per_node_interval": periodic / max(1.0, intervals) / max(1, len(sim.alive)),
        "supervisor_per_event": max(sim.membership.sent_per_event, default=0),
        "unready": sum(x.queue.unready for x in sim.nodes.values()),
        "most_views_held": max(x.most_views_held for x in sim.nodes.values()),
        "lowoda_max_degree_at_end": lowoda_max_degree,
        "alive": sorted(sim.alive),
    }


def run_spidercast(scenario: Scenario, seed: int, params: SpiderCastParams, events: int) -> dict[str, Any]:
    spider = SpiderCast(params, random.Random(seed))
    spider.build(scenario.initial)
    present = set(spider.overlay.topics)
    messages = 0
    rng = random.Random(seed + 1)
    for kind, node, topics in scenario.churn(present, events, rng):
        result = spider.join(node, topics) if kind == "join" else spider.leave(node)
        messages += result.messages
    g = spider.overlay
    return {
        "max_degree": g.max_degree(),
        "mean_degree": g.average_degree(),
        "tco": spider.is_topic_connected(),
        "diameter": diameters(g),
        "messages_per_event": messages / events,
    }


def beyond_assumption(scenario_of: Callable[[int], Scenario], seeds: int, settings: Settings, warm: int
                      ) -> list[bool]:
    back = []
    for seed in range(seeds):
        sim = OmenSim(scenario_of(seed).initial, settings, seed=seed)
        sim.run(warm)
        members = sim.membership.circle.members()
        start = random.Random(seed).randrange(len(members))
        for k in range(settings.resilience + 1):
            sim.crash(members[(start + k) % len(members)])
        try:
            sim.run_until_quiet(limit=600)
        except TimeoutError:
            back.append(False)
            continue
        back.append(not sim.problems())
    return back


# ---------------------------------------------------------------------------------- report
def _f(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench omen", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workload", choices=(*KINDS, "synthetic"), default="facebook",
                        help="the social-graph stand-in of paper 003 §6.1 (facebook, twitter; default facebook) "
                        "or paper 001's synthetic shape")
    parser.add_argument("--nodes", type=int, help="nodes (quick 150; default 1000 social, 600 synthetic)")
    parser.add_argument("--popularity", choices=POPULARITIES, default="uniform",
                        help="topic popularity of --workload synthetic (§6.3 always measures all three)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--events", type=int)
    parser.add_argument("--warm", type=int, help="intervals of gossip before the churn (quick 60, default 200)")
    parser.add_argument("--resilience", type=int, default=2, help="L (default 2)")
    parser.add_argument("--lambdas", help="comma-separated λ values (quick 1,3,5; default 1,3,5,9)")
    parser.add_argument("--seeds", type=int, help="seeds for the L + 1 runs (quick 5, default 10)")
    args = parser.parse_args(argv)
    base = (
        Shape(nodes=150, topics=30, min_topics=2, max_topics=10, popularity=args.popularity)
        if args.quick
        else Shape(nodes=600, topics=100, min_topics=5, max_topics=40, popularity=args.popularity)
    )
    if args.workload != "synthetic" and not args.nodes:
        args.nodes = 150 if args.quick else 1000
    shape = replace(base, nodes=args.nodes or base.nodes)
    events = args.events or (20 if args.quick else 60)

    def scenario_of(seed: int) -> Scenario:
        if args.workload == "synthetic":
            return synthetic(shape, seed)
        return social(args.workload, shape.nodes, seed, events)

    scenario = scenario_of(args.seed)
    warm = args.warm or (60 if args.quick else 200)
    lambdas = [int(x) for x in (args.lambdas or ("1,3,5" if args.quick else "1,3,5,9")).split(",")]
    seeds = args.seeds or (5 if args.quick else 10)
    default_lambda = 5 if 5 in lambdas else lambdas[-1]
    settings = Settings(resilience=args.resilience, coverage=default_lambda)
    began = time.monotonic()
    subscriptions = sum(len(ts) for ts in scenario.initial.values())
    print(
        f"== omen (paper 003 §6), workload {scenario.name}: {len(scenario.initial)} nodes at the start, "
        f"{len({t for ts in scenario.initial.values() for t in ts})} topics, {subscriptions} subscriptions; seed "
        f"{args.seed}; {events} churn events (join / leave / crash), {warm} warm-up intervals, L = "
        f"{settings.resilience}"
    )
    for line in scenario.description:
        print(f"   {line}")
    open_parameters = OPEN_PARAMETERS if args.workload == "synthetic" else SOCIAL_OPEN_PARAMETERS
    for key, value in open_parameters.items():
        print(f"   open parameter, {key}: {value}")
    print(f"   omen settings: {asdict(settings)}; delays 0.05-0.5 intervals, crashes detected after 3")
    results: dict[str, Any] = {}

    print("\n  §6.3: backup in-degrees from every descriptor (λ = 3), per popularity (paper 001's synthetic "
          f"shape at {min(shape.nodes, 600)} nodes, as §6.3 draws Zipf and exponential popularity)", flush=True)
    small = replace(shape, nodes=min(shape.nodes, 600))
    results["backups"] = {}
    for popularity in POPULARITIES:
        row = {}
        for method in ("greedy", "primal-dual"):
            degrees = backups_in_degrees(replace(small, popularity=popularity), args.seed, method, 3)
            row[method] = {
                "under_5_pct": 100 * sum(d < 5 for d in degrees) / len(degrees),
                "min": min(degrees),
                "max": max(degrees),
            }
        results["backups"][popularity] = row
        paper = PAPER["greedy_under_5"].get(popularity)
        print(
            f"   {popularity:<12} greedy: {row['greedy']['under_5_pct']:.1f}% under 5 (paper "
            f"{_f(paper) + '%' if paper else '-'}), max {row['greedy']['max']}; primal-dual: "
            f"{row['primal-dual']['under_5_pct']:.1f}% under 5, {row['primal-dual']['min']}-"
            f"{row['primal-dual']['max']} (paper, uniform: 21-59)",
            flush=True,
        )

    print("\n  Fig. 8: per λ (OMen, induced connectivity)", flush=True)
    results["lambda"] = {}
    for lam in lambdas:
        t0 = time.monotonic()
        run = run_omen(
            scenario,
            args.seed,
            replace(settings, coverage=lam),
            events,
            warm,
            lowoda=lam == default_lambda,
        )
        results["lambda"][lam] = run
        print(
            f"   λ={lam}: view mean {_f(run['view_mean'])} (paper, FB 1K: {_f(PAPER['view_mean'].get(lam))}), "
            f"under 5% of nodes: {100 * run['view_under_5pct']:.0f}% of nodes; max degree {run['max_degree']} "
            f"(paper: {_f(PAPER['max_degree'].get(lam))}), mean {_f(run['mean_degree'])}; TCO {run['tco']}; "
            f"{time.monotonic() - t0:.0f} s",
            flush=True,
        )

    print(f"\n  Figs. 9-12 at λ = {default_lambda}", flush=True)
    omen = results["lambda"][default_lambda]
    results["global_connectivity"] = run_omen(scenario, args.seed, replace(settings, connectivity="global"), events,
                                              warm)
    results["omen_g"] = run_omen(scenario, args.seed, settings, events, warm, global_view=True)
    results["spidercast"] = {
        p.name: run_spidercast(scenario, args.seed, p, events) for p in (SpiderCastParams(3, 1), SpiderCastParams(4, 0))
    }
    g, glob = results["omen_g"], results["global_connectivity"]
    rows = [
        (
            "max degree: OMen / OMen-G",
            omen["max_degree"] / max(1, g["max_degree"]),
            PAPER["omen_over_omen_g_max_degree"],
        ),
        (
            "max degree: OMen / Low-ODA recomputed",
            omen["max_degree"] / max(1, omen["lowoda_max_degree_at_end"]),
            PAPER["omen_over_lowoda_max_degree"],
        ),
        (
            "max degree: OMen (induced) / OMen (global connectivity)",
            omen["max_degree"] / max(1, glob["max_degree"]),
            None,
        ),
        (
            "repair CPU per event: OMen / OMen-G",
            omen["repair_cpu_mean"] / max(1e-9, g["repair_cpu_mean"]),
            PAPER["repair_time_omen_over_omen_g"],
        ),
        (
            "repair CPU per event: OMen / Low-ODA recomputed",
            omen["repair_cpu_mean"] / max(1e-9, omen["lowoda_cpu"] or 0),
            PAPER["repair_time_omen_over_lowoda_1k"],
        ),
    ]
    for p in results["spidercast"].values():
        p.setdefault("diameter", (0, 0.0))
    s31 = results["spidercast"]["SpiderCast(3,1)"]
    rows += [
        ("max degree: SpiderCast(3,1) / OMen", s31["max_degree"] / max(1, omen["max_degree"]), None),
        (
            "topic diameter max: OMen - SpiderCast(3,1)",
            omen["diameter"][0] - s31["diameter"][0],
            PAPER["diameter_gap_max_mean"][0],
        ),
        (
            "topic diameter mean: OMen - SpiderCast(3,1)",
            omen["diameter"][1] - s31["diameter"][1],
            PAPER["diameter_gap_max_mean"][1],
        ),
    ]
    print(f"   {'measure':<58} {'paper':>8} {'here':>10}")
    for label, here, paper in rows:
        print(f"   {label:<58} {_f(paper):>8} {_f(here):>10}")
    print(
        "   max / mean degree at the end: "
        + "; ".join(
            f"{name} {r['max_degree']} / {_f(r['mean_degree'])}{'' if r['tco'] else ' (NOT a TCO)'}"
            for name, r in [
                ("OMen", omen),
                ("OMen global connectivity", glob),
                ("OMen-G", g),
                *results["spidercast"].items(),
            ]
        )
        + f"; Low-ODA recomputed {omen['lowoda_max_degree_at_end']}"
    )
    print(f"   life cycle per event, intervals: OMen {_f(omen['life_cycle_mean'])}, OMen-G {_f(g['life_cycle_mean'])}")
    print(
        "   Fig. 12, messages per churn event: "
        + ", ".join(f"{k} {_f(v)}" for k, v in omen["messages_per_event"].items())
        + f"; gossip and shuffles {_f(omen['periodic_per_node_interval'])} per node per interval; "
        f"SpiderCast(3,1) {_f(s31['messages_per_event'])}, (4,0) "
        f"{_f(results['spidercast']['SpiderCast(4,0)']['messages_per_event'])}"
    )
    print(
        f"   supervisor messages per event, most: {omen['supervisor_per_event']} "
        f"(3L + 1 = {3 * settings.resilience + 1})"
        f"; views past the ready timeout: {omen['unready']}; most predecessors' entries at a node: "
        f"{omen['most_views_held']} (2L = {2 * settings.resilience})"
    )

    back = beyond_assumption(scenario_of, seeds, settings, warm)
    results["beyond_assumption"] = back
    print(
        f"\n  L + 1 = {settings.resilience + 1} consecutive crashes at once: a TCO came back in {sum(back)} of "
        f"{len(back)} seeds"
    )
    for run in (*results["lambda"].values(), glob, g):
        run.pop("alive", None)
    print(f"  ({time.monotonic() - began:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("omen-quick.json" if args.quick else "omen.json")
    out.write_text(
        json.dumps(
            {
                "machine": machine(),
                "workload": args.workload,
                "workload_description": list(scenario.description),
                "shape": asdict(shape),
                "seed": args.seed,
                "events": events,
                "warm": warm,
                "settings": asdict(settings),
                "open_parameters": open_parameters,
                "paper": PAPER,
                "results": results,
                "seconds": round(time.monotonic() - began, 1),
            },
            indent=1,
            default=str,
        )
    )
    print(f"written to {out}")
