"""python -m bench pairing: paper 004's pairing protocol (§3.1; `pubsub.pairing`, driven by
`pubsub.sim.pairing`) measured in the simulator.  The paper reports no experiments for it;
these are the quantities its claims are about.

    --quick     n = 64, 128, ..., 1024, 3 runs each (a few seconds)
    (default)   n = 64, 128, ..., 16384, 10 runs each (about 5 minutes on 2 shared cores)

Each run draws a knowledge graph of n nodes as BuildSR's corrupted states do
(`pubsub.sim.scenarios.weakly_connected_graph`: a random spanning tree plus n/2 random
pairs, each edge known one way) and runs phases until one node is left, the pairs of each
phase joined into one node at no cost before the next (a stand-in for §3.2-3.3, which are
not built: no merge or supernode cost is measured).  Three variants, on the same graphs:

* ``sync``: rounds, one send per node per round (§2's synchronous model);
* ``sync_unlimited``: rounds, every queued send goes out at once (the copy's remark that
  the d factor vanishes when a node may send more than one message per time unit);
* ``async``: delays drawn uniformly from (0, 1] per message, FIFO channels (§2's
  asynchronous model, delays at most one time unit).

Per phase: the fraction of its nodes paired; its messages (all kinds, and per node); its
duration (rounds, or time units); d, the largest d(u) = in- plus out-degree at its start;
contention, the most messages one node received in one round (sync) or had in transit at
once (async), against d; and the largest excess of a node's contention over its own d(u).
Per run: phases, against log2 n.  Phase 1 runs on the original graph; later phases on the
joined nodes, whose neighbour sets are unions, so their d grows (in the paper, §3.3's
supernode simulation is what keeps contention O(d) there -- not built).

Results: bench-results/pairing.json (or pairing-quick.json), with the machine, every
parameter, every run's phases.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench.machine import machine
from pubsub.pairing.states import State
from pubsub.sim.pairing import Phase, knowledge_graph, run

RESULTS = Path("bench-results")
FULL_SIZES = [64 * 2**i for i in range(9)]  # 64 .. 16384
QUICK_SIZES = [64 * 2**i for i in range(5)]  # 64 .. 1024
#: name -> (driver, sends per node per round: 0 no limit, None not a round-based driver)
VARIANTS: dict[str, tuple[str, int | None]] = {
    "sync": ("sync", 1), "sync_unlimited": ("sync", 0), "async": ("async", None),
}
DESCRIPTIONS = {
    "sync": "synchronous, one send per node per round (§2); duration in rounds",
    "sync_unlimited": "synchronous, no limit on sends per round; duration in rounds",
    "async": "asynchronous, delays uniform in (0, 1], FIFO channels; duration in time units",
}


def phase_row(phase: Phase) -> dict[str, Any]:
    """What the benchmark keeps of one phase."""
    d = phase.max_degree
    contention = phase.max_contention
    return {
        "phase": phase.index,
        "nodes": phase.size,
        "pairs": len(phase.pairs),
        "paired_fraction": phase.paired_fraction,
        "isolated_left": sum(1 for n in phase.nodes.values() if n.state is State.ISOLATED),
        "messages": phase.message_count,
        "messages_per_node": phase.message_count / phase.size,
        "messages_by_kind": dict(sorted(phase.messages.items())),
        "duration": phase.duration,
        "max_degree": d,
        "max_contention": contention,
        "contention_over_degree": contention / d if d else 0.0,
        "max_excess_over_own_degree": max(phase.contention[u] - phase.degree[u] for u in phase.graph),
    }


def one_run(n: int, variant: str, seed: int, index: int) -> dict[str, Any]:
    """One run of `variant` on the `index`-th graph of size n."""
    driver, sends = VARIANTS[variant]
    graph = knowledge_graph(n, random.Random(f"pairing/{seed}/{n}/{index}/graph"))
    began = time.monotonic()
    rng = random.Random(f"pairing/{seed}/{n}/{index}/{variant}")
    result = run(graph, driver, rng, sends_per_round=0 if sends is None else sends)
    phases = [phase_row(p) for p in result.phases]
    return {
        "run": index,
        "finished": result.finished,
        "phases": len(phases),
        "phases_over_log2_n": len(phases) / math.log2(n),
        "messages": sum(p["messages"] for p in phases),
        "degree_phase_1": phases[0]["max_degree"],
        "seconds": round(time.monotonic() - began, 2),
        "phase_rows": phases,
    }


def summary(n: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Means (and extremes) over the runs of one size and variant."""
    firsts = [r["phase_rows"][0] for r in runs]
    every = [p for r in runs for p in r["phase_rows"]]
    node_phases = sum(p["nodes"] for p in every)
    return {
        "n": n,
        "log2_n": math.log2(n),
        "runs": len(runs),
        "all_finished": all(r["finished"] for r in runs),
        "degree_phase_1_mean": statistics.fmean(p["max_degree"] for p in firsts),
        "phases_mean": statistics.fmean(r["phases"] for r in runs),
        "phases_min": min(r["phases"] for r in runs),
        "phases_max": max(r["phases"] for r in runs),
        "phases_over_log2_n": statistics.fmean(r["phases"] for r in runs) / math.log2(n),
        "paired_fraction_phase_1": statistics.fmean(p["paired_fraction"] for p in firsts),
        "paired_fraction_mean": statistics.fmean(p["paired_fraction"] for p in every),
        "paired_fraction_min": min(p["paired_fraction"] for p in every),
        "messages_phase_1": statistics.fmean(p["messages"] for p in firsts),
        "messages_per_node_phase_1": statistics.fmean(p["messages_per_node"] for p in firsts),
        "messages_per_phase_mean": statistics.fmean(p["messages"] for p in every),
        "messages_per_node_per_phase": sum(p["messages"] for p in every) / node_phases,
        "messages_per_run": statistics.fmean(r["messages"] for r in runs),
        "duration_phase_1_mean": statistics.fmean(p["duration"] for p in firsts),
        "duration_max": max(p["duration"] for p in every),
        "contention_phase_1_max": max(p["max_contention"] for p in firsts),
        "contention_over_degree_phase_1": max(p["contention_over_degree"] for p in firsts),
        "contention_over_degree_max": max(p["contention_over_degree"] for p in every),
        "max_excess_over_own_degree": max(p["max_excess_over_own_degree"] for p in every),
        "seconds": round(sum(r["seconds"] for r in runs), 2),
    }


COLUMNS: list[tuple[str, str, str]] = [
    ("n", "n", "{:.0f}"),
    ("log2 n", "log2_n", "{:.0f}"),
    ("d1", "degree_phase_1_mean", "{:.1f}"),
    ("phases", "phases_mean", "{:.1f}"),
    ("min-max", "phases_range", "{}"),
    ("ph/log2n", "phases_over_log2_n", "{:.2f}"),
    ("paired1", "paired_fraction_phase_1", "{:.3f}"),
    ("paired", "paired_fraction_mean", "{:.3f}"),
    ("pmin", "paired_fraction_min", "{:.2f}"),
    ("msg1/node", "messages_per_node_phase_1", "{:.2f}"),
    ("msg/node/ph", "messages_per_node_per_phase", "{:.2f}"),
    ("msg1", "messages_phase_1", "{:.0f}"),
    ("dur1", "duration_phase_1_mean", "{:.2f}"),
    ("dur max", "duration_max", "{:.2f}"),
    ("c1", "contention_phase_1_max", "{:.0f}"),
    ("c1/d1", "contention_over_degree_phase_1", "{:.2f}"),
    ("c/d max", "contention_over_degree_max", "{:.2f}"),
    ("c(u)-d(u)", "max_excess_over_own_degree", "{:.0f}"),
]

LEGEND = (
    "d1: largest d(u) of the original graph (mean over runs); phases: until one node is left (mean, min-max); "
    "paired1 / paired / pmin: fraction of a phase's nodes paired in phase 1, mean over every phase, lowest phase; "
    "msg1/node: phase 1's messages per node; msg/node/ph: messages per node per phase over all phases; "
    "dur1 / dur max: a phase's duration, phase 1 mean and largest; c1: most messages at one node at once "
    "in phase 1 (largest over runs); c1/d1, c/d max: that against the phase's largest degree, phase 1 and "
    "the worst phase; c(u)-d(u): the largest excess of a node's contention over its own degree (bound: 4)"
)


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    cells = []
    for row in rows:
        values = dict(row, phases_range=f"{row['phases_min']}-{row['phases_max']}")
        cells.append([fmt.format(values[key]) for _, key, fmt in COLUMNS])
    widths = [max(len(title), *(len(c[i]) for c in cells)) for i, (title, _, _) in enumerate(COLUMNS)]
    lines = ["  " + " ".join(title.rjust(w) for (title, _, _), w in zip(COLUMNS, widths, strict=True))]
    lines.append("  " + " ".join("-" * w for w in widths))
    lines += ["  " + " ".join(c.rjust(w) for c, w in zip(cell, widths, strict=True)) for cell in cells]
    return lines


def phase_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One run's phases, one line each."""
    lines = ["  phase   nodes     d  paired  messages  msg/node  duration  contention"]
    for p in rows:
        lines.append(f"  {p['phase']:>5} {p['nodes']:>7} {p['max_degree']:>5} {p['paired_fraction']:>7.3f} "
                     f"{p['messages']:>9} {p['messages_per_node']:>9.2f} {p['duration']:>9.2f} "
                     f"{p['max_contention']:>11}")
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench pairing", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n up to 1024, 3 runs each")
    parser.add_argument("--sizes", type=int, nargs="+", help="the n to measure (default 64 .. 16384, quick .. 1024)")
    parser.add_argument("--runs", type=int, help="graphs per size (default 10, quick 3)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    runs = args.runs or (3 if args.quick else 10)
    if min(sizes) < 2 or runs < 1:
        parser.error("every size must be at least 2 and --runs at least 1")
    began = time.monotonic()
    print(f"== paper 004's pairing (§3.1) in the simulator: n = {', '.join(map(str, sizes))}; {runs} runs per n; "
          f"seed {args.seed}")
    print("   graph: BuildSR's corrupted-state knowledge graph (random spanning tree + n/2 random pairs, each edge "
          "known one way), the same graphs for every variant")
    print("   phases: until one node is left; each phase's pairs joined at no cost before the next (stand-in for "
          "§3.2-3.3, not built)")
    for name in args.variants:
        print(f"   {name}: {DESCRIPTIONS[name]}")
    print(f"   {LEGEND}")
    results: dict[str, list[dict[str, Any]]] = {}
    for name in args.variants:
        rows = []
        for n in sizes:
            done = [one_run(n, name, args.seed, index) for index in range(runs)]
            rows.append({**summary(n, done), "run_details": done})
            print(f"   {name} n={n}: {rows[-1]['seconds']} s", flush=True)
        results[name] = rows
    for name in args.variants:
        print(f"\n  {name} -- {DESCRIPTIONS[name]}")
        for line in table_lines(results[name]):
            print(line)
    largest = max(sizes)
    for name in args.variants:
        detail = next(r for r in results[name] if r["n"] == largest)["run_details"][0]
        print(f"\n  {name}, n={largest}, run 0, phase by phase")
        for line in phase_lines(detail["phase_rows"]):
            print(line)
    seconds = round(time.monotonic() - began, 1)
    print(f"\n  ({seconds} s)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("pairing-quick.json" if args.quick else "pairing.json")
    out.write_text(json.dumps({
        "benchmark": "pairing", "paper": "004 (Angluin, Aspnes, Chen, Wu, Yin), §3.1 as far as the copy goes",
        "machine": machine(),
        "parameters": {"sizes": sizes, "runs": runs, "seed": args.seed, "quick": args.quick,
                       "variants": {name: {"driver": VARIANTS[name][0], "sends_per_round": VARIANTS[name][1],
                                           "description": DESCRIPTIONS[name]} for name in args.variants},
                       "graph": "pubsub.sim.scenarios.weakly_connected_graph over nodes 0 .. n-1",
                       "async_delays": "uniform in (0, 1], FIFO per channel",
                       "between_phases": "pairs joined at no cost (stand-in for §3.2-3.3, not built)"},
        "legend": LEGEND,
        "results": results,
        "seconds": seconds,
    }, indent=1))
    print(f"written to {out}")
