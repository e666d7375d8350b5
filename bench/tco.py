"""python -m bench tco: paper 001's evaluation (§VI, Figs. 2-8) on the tco cores
(`pubsub.tco`), each number printed beside the paper's.

One seeded workload (`pubsub.tco.workload`), a base TCO by Low-ODA (ρ = 3), backups by both
methods, then the same churn rounds (a join or a leave, probability 0.5) under ShadowDynAlg
(primal-dual, λ = 1..4; greedy, λ = 3) and NaiveDynAlg, with Low-ODA recomputed from scratch
on the same nodes every `--every` rounds (the static baseline: its degrees, its time and
the edges it changes between two consecutive rounds).

    --quick     300 nodes, 40 topics, 2-18 topics each, 100 rounds, Low-ODA every 10th
    (default)   2,000 nodes, 200 topics, 10-90 topics each, 1,000 rounds, Low-ODA every 50th:
                the paper's shape (long: Low-ODA from scratch takes minutes there)

Times are process CPU seconds.  Low-ODA here is the numpy version (`pubsub.tco.fastoda`,
the reference's exact choices) and the repairs are the reference's pure Python, so the
time ratios against Low-ODA overstate the repairs' relative cost.  Results:
bench-results/tco.json, with the machine and the workload's open parameters.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.machine import machine
from pubsub.tco.backups import BackupTable
from pubsub.tco.dynamic import NaiveDynAlg, Repair, ShadowDynAlg
from pubsub.tco.fastoda import low_oda_fast
from pubsub.tco.graph import TopicOverlay
from pubsub.tco.workload import OPEN_PARAMETERS, POPULARITIES, Shape, Workload

RESULTS = Path("bench-results")
RHO = 3.0


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def backups_table(base: TopicOverlay, method: str, coverage: int, seed: int) -> dict[str, Any]:
    """Figs. 2-3: backup-set sizes and primary degrees for every node of the base TCO."""
    table = BackupTable()
    rng = random.Random(seed)
    for node in sorted(base.topics):
        table.build(base, node, coverage, method, rng)
    sizes = [len(table.backups.get(v, [])) for v in base.topics]
    primaries = [len(table.primaries.get(v, ())) for v in base.topics]
    n = len(base.topics)
    return {
        "method": method,
        "mean_backups_percent_of_nodes": 100 * _mean(sizes) / n,
        "mean_backups": _mean(sizes),
        "mean_primaries": _mean(primaries),
        "nodes_under_5_primaries_percent": 100 * sum(1 for p in primaries if p < 5) / n,
        "primaries_min": min(primaries),
        "primaries_max": max(primaries),
        "nodes_short": len(table.short),
    }


def churn(shape: Shape, seed: int, rounds: int, make: Callable[[TopicOverlay], Any], every: int) -> dict[str, Any]:
    """One run of `rounds` churn rounds from the base TCO; per round the repair, its time and
    the overlay's degrees; Low-ODA from scratch every `every` rounds when `every` > 0."""
    work = Workload(shape, seed)
    overlay, _ = low_oda_fast(work.initial(), RHO)
    algorithm = make(overlay)
    if isinstance(algorithm, ShadowDynAlg):
        algorithm.build_backups()
    present = set(overlay.topics)
    per_round: list[dict[str, Any]] = []
    low: list[dict[str, Any]] = []
    start = {"max_degree": overlay.max_degree(), "average_degree": overlay.average_degree()}
    for k, (kind, node, topics) in enumerate(work.rounds(present, rounds), start=1):
        edges_before = len(overlay.edges())
        before = dict(overlay.topics) if every and k % every == 0 else None
        t0 = time.process_time()
        repair: Repair = algorithm.join(node, topics) if kind == "join" else algorithm.leave(node)
        seconds = time.process_time() - t0
        per_round.append({
            "round": k, "kind": kind, "seconds": seconds, "shadow": len(repair.shadow), "nodes": len(overlay.topics),
            "changed": repair.changed, "edges_before": edges_before, "widened": repair.widened,
            "max_degree": overlay.max_degree(), "average_degree": overlay.average_degree(),
        })
        if before is not None:
            t0 = time.process_time()
            previous, _ = low_oda_fast(before, RHO)
            fresh, _ = low_oda_fast(dict(overlay.topics), RHO)
            seconds = (time.process_time() - t0) / 2
            low.append({
                "round": k, "seconds": seconds, "max_degree": fresh.max_degree(),
                "average_degree": fresh.average_degree(), "changed": len(previous.edges() ^ fresh.edges()),
                "edges_before": len(previous.edges()), "dyn_max_degree": overlay.max_degree(),
                "dyn_average_degree": overlay.average_degree(),
            })
    return {"start": start, "rounds": per_round, "low_oda": low}


def summary(run: dict[str, Any]) -> dict[str, Any]:
    rounds, low = run["rounds"], run["low_oda"]
    low_seconds = _mean([r["seconds"] for r in low])
    out: dict[str, Any] = {
        "max_degree_start": run["start"]["max_degree"],
        "max_degree_end": rounds[-1]["max_degree"] if rounds else None,
        "average_degree_end": rounds[-1]["average_degree"] if rounds else None,
        "widened_rounds": sum(1 for r in rounds if r["widened"]),
    }
    for kind in ("join", "leave"):
        mine = [r for r in rounds if r["kind"] == kind]
        out[f"{kind}_seconds"] = _mean([r["seconds"] for r in mine])
        out[f"{kind}_time_percent_of_low_oda"] = 100 * out[f"{kind}_seconds"] / low_seconds if low else None
        out[f"{kind}_changed_edges"] = _mean([r["changed"] for r in mine])
        out[f"{kind}_repair_percent"] = _mean([100 * r["changed"] / max(r["edges_before"], 1) for r in mine])
    shadow = [100 * r["shadow"] / max(r["nodes"], 1) for r in rounds]
    out["shadow_percent_mean"], out["shadow_percent_max"] = _mean(shadow), max(shadow, default=float("nan"))
    if low:
        out["low_oda_seconds"] = low_seconds
        out["gap_max_degree"] = _mean([r["dyn_max_degree"] - r["max_degree"] for r in low])
        out["gap_average_degree"] = _mean([r["dyn_average_degree"] - r["average_degree"] for r in low])
        out["low_oda_changed_edges"] = _mean([r["changed"] for r in low])
        out["low_oda_repair_percent"] = _mean([100 * r["changed"] / max(r["edges_before"], 1) for r in low])
    return out


def _row(what: str, paper: str, measured: object) -> str:
    shown = f"{measured:.3g}" if isinstance(measured, float) else str(measured)
    return f"  {what:<58} {paper:>16} {shown:>12}"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench tco", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--nodes", type=int)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--every", type=int, help="recompute Low-ODA every this many rounds")
    parser.add_argument("--popularity", choices=POPULARITIES, default="uniform")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.quick:
        shape = Shape(nodes=args.nodes or 300, topics=40, min_topics=2, max_topics=18, popularity=args.popularity)
        rounds, every = args.rounds or 100, args.every or 10
    else:
        shape = Shape(nodes=args.nodes or 2000, popularity=args.popularity)
        rounds, every = args.rounds or 1000, args.every or 50
    began = time.monotonic()
    print(f"== tco (paper 001 §VI): {shape.nodes} nodes, {shape.topics} topics, {shape.min_topics}-"
          f"{shape.max_topics} each, {shape.popularity} popularity, {rounds} rounds, seed {args.seed}, ρ = {RHO}")
    for name, value in OPEN_PARAMETERS.items():
        print(f"   open parameter, {name}: {value}")
    base, _ = low_oda_fast(Workload(shape, args.seed).initial(), RHO)
    print(f"   base TCO: {len(base.edges())} edges, maximum degree {base.max_degree()}, "
          f"average {base.average_degree():.2f}")
    greedy = backups_table(base, "greedy", 3, args.seed)
    dual = backups_table(base, "primal-dual", 3, args.seed)
    runs = {}
    for label, make in (
        ("shadow primal-dual λ=3", lambda o: ShadowDynAlg(o, rng=random.Random(args.seed), coverage=3)),
        ("shadow greedy λ=3", lambda o: ShadowDynAlg(o, rng=random.Random(args.seed), coverage=3, method="greedy")),
        ("shadow primal-dual λ=1", lambda o: ShadowDynAlg(o, rng=random.Random(args.seed), coverage=1)),
        ("shadow primal-dual λ=2", lambda o: ShadowDynAlg(o, rng=random.Random(args.seed), coverage=2)),
        ("shadow primal-dual λ=4", lambda o: ShadowDynAlg(o, rng=random.Random(args.seed), coverage=4)),
        ("naive", lambda o: NaiveDynAlg(o, rho=RHO)),
    ):
        compared = label in ("shadow primal-dual λ=3", "naive")  # the runs Figs. 6-8 set beside Low-ODA
        runs[label] = churn(shape, args.seed, rounds, make, every if compared else 0)
        print(f"   ran {label} ({time.monotonic() - began:.0f} s so far)", flush=True)
    sums = {label: summary(run) for label, run in runs.items()}
    shadow, naive = sums["shadow primal-dual λ=3"], sums["naive"]
    print(f"\n  {'measure':<58} {'paper (2,000)':>16} {'here':>12}")
    print("  " + "-" * 88)
    print(_row("Fig. 2: mean backup set, % of nodes, greedy", "1.1", greedy["mean_backups_percent_of_nodes"]))
    print(_row("Fig. 3: mean backup set, % of nodes, primal-dual", "2.8", dual["mean_backups_percent_of_nodes"]))
    print(_row("Fig. 2: nodes with < 5 primaries, %, greedy", "42.9", greedy["nodes_under_5_primaries_percent"]))
    spread = f"{dual['primaries_min']} - {dual['primaries_max']}"
    print(_row("Fig. 3: primaries min - max, primal-dual", "21 - 59", spread))
    same = [abs(b["mean_primaries"] - b["mean_backups"]) < 1e-9 for b in (greedy, dual)]
    print(_row("mean primaries = mean backups (greedy / primal-dual)", "(must hold)", f"{same[0]} / {same[1]}"))
    greedy_end = sums["shadow greedy λ=3"]["max_degree_end"]
    print(_row(f"Fig. 4: max degree after {rounds} rounds, greedy λ=3", "84", greedy_end))
    for lam, paper in ((1, "31"), (2, "25"), (3, "24"), (4, "24")):
        print(_row(f"Fig. 5: max degree after {rounds} rounds, λ={lam}", paper,
                   sums[f"shadow primal-dual λ={lam}"]["max_degree_end"]))
    print(_row("Fig. 6: mean gap to Low-ODA, maximum degree", "<= 5.5", shadow.get("gap_max_degree")))
    print(_row("Fig. 6: mean gap to Low-ODA, average degree", "<= 0.798", shadow.get("gap_average_degree")))
    print(_row("Fig. 6: Shadow max degree, start -> end", "13 -> 22",
               f"{shadow['max_degree_start']} -> {shadow['max_degree_end']}"))
    print(_row("Fig. 7: join time, % of Low-ODA, Shadow / Naive", "0.014 / 0.043",
               f"{shadow['join_time_percent_of_low_oda']:.3g} / {naive['join_time_percent_of_low_oda']:.3g}"))
    print(_row("Fig. 7: leave time, % of Low-ODA, Shadow / Naive", "1.78 / 14",
               f"{shadow['leave_time_percent_of_low_oda']:.3g} / {naive['leave_time_percent_of_low_oda']:.3g}"))
    print(_row("Fig. 7: shadow set, % of nodes, mean / max", "1.59 / 4.97",
               f"{shadow['shadow_percent_mean']:.3g} / {shadow['shadow_percent_max']:.3g}"))
    print(_row("Fig. 8: Low-ODA edges changed per round, % / count", "9.4 / 610",
               f"{shadow['low_oda_repair_percent']:.3g} / {shadow['low_oda_changed_edges']:.1f}"))
    print(_row("Fig. 8: Shadow edges changed per join, % / count", "0.068 / 4.83",
               f"{shadow['join_repair_percent']:.3g} / {shadow['join_changed_edges']:.2f}"))
    print(_row("Fig. 8: Shadow edges changed per leave, % / count", "0.17 / 12.24",
               f"{shadow['leave_repair_percent']:.3g} / {shadow['leave_changed_edges']:.2f}"))
    print(_row("rounds that widened past the shadow set (Shadow λ=3)", "(none said)", shadow["widened_rounds"]))
    print(f"\n  (the paper's column is its 2,000-node workload; at another size compare directions, not values;"
          f" {time.monotonic() - began:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "tco.json"
    out.write_text(json.dumps({
        "machine": machine(), "shape": asdict(shape), "rounds": rounds, "every": every, "seed": args.seed,
        "rho": RHO, "open_parameters": OPEN_PARAMETERS, "backups": {"greedy": greedy, "primal-dual": dual},
        "summaries": sums,
    }, indent=1, default=str))
    print(f"written to {out}")
