"""Convergence of BuildSR in the simulator: timeout intervals until exactly SR(n).

Two starting points (issue: "make bench" table):
  (a) n simultaneous fresh subscribes,
  (b) random corrupted states (random labels or ⊥, random weakly connected pointers,
      a supervisor database with all four corruptions of §3.1, junk messages in flight),
for n in {16, 64, 256, 1024, 4096} and configuration budget 1 (the paper) and 16.
"Until SR(n)" is judged by the independent checker in tests/, channels included.
A run that exceeds its wall-clock cap is reported as "> k" (the intervals it managed).

Also measured: the repair traffic one join and one leave cause in a quiescent ring
(Theorem 4.3 concerns the supervisor's share, which the tests pin exactly).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from bench.machine import machine
from pubsub.kernel.message import Topic
from pubsub.sim.scenarios import corrupted_start, fresh_start
from pubsub.sim.world import Simulation
from tests.simhelpers import REPAIR_KINDS, is_legitimate, settle

TOPIC = Topic("bench")
RESULTS = Path("bench-results")


def intervals_to_legitimacy(
    sim: Simulation, wall_cap: float, max_intervals: int
) -> tuple[int, bool, int]:
    """(intervals, reached, messages) -- checking legitimacy after every interval."""
    started = time.monotonic()
    for done in range(max_intervals + 1):
        if is_legitimate(sim, TOPIC):
            return done, True, sim.traffic.total()
        if time.monotonic() - started > wall_cap:
            return done, False, sim.traffic.total()
        sim.run_for(sim.interval)
    return max_intervals, False, sim.traffic.total()


def convergence_row(start: str, n: int, budget: int, seeds: int, wall_cap: float) -> dict:
    results = []
    for seed in range(seeds):
        sim = Simulation(seed, config_budget=budget)
        if start == "fresh":
            fresh_start(sim, n, TOPIC)
        else:
            corrupted_start(sim, n, TOPIC, random.Random(seed))
        began = time.monotonic()
        intervals, reached, messages = intervals_to_legitimacy(sim, wall_cap, 100 * n)
        results.append(
            {
                "seed": seed,
                "intervals": intervals,
                "reached": reached,
                "messages": messages,
                "seconds": round(time.monotonic() - began, 1),
            }
        )
    reached_intervals = [r["intervals"] for r in results if r["reached"]]
    return {
        "start": start,
        "n": n,
        "budget": budget,
        "seeds": seeds,
        "reached": len(reached_intervals),
        "median_intervals": statistics.median(reached_intervals) if reached_intervals else None,
        "max_intervals": max(reached_intervals) if reached_intervals else None,
        "lower_bound_unreached": max(
            (r["intervals"] for r in results if not r["reached"]), default=None
        ),
        "messages_per_node_interval": round(
            statistics.mean(r["messages"] / n / max(r["intervals"], 1) for r in results), 1
        ),
        "runs": results,
    }


def churn_row(n: int, rounds: int) -> dict:
    """Repair messages caused by one join / one leave, from quiescence to quiescence."""
    sim = Simulation(n)
    fresh_start(sim, n, TOPIC)
    settle(sim, TOPIC, 100 * n)
    rng = random.Random(n)
    cost: dict[str, list[int]] = {"join": [], "leave": []}
    for _ in range(rounds):
        for action in ("join", "leave"):
            before = sim.traffic.by_kind.copy()
            if action == "join":
                sim.join(sim.add_node(), TOPIC)
            else:
                sim.leave(rng.choice(sorted(sim.nodes)), TOPIC)
            settle(sim, TOPIC, 100 * n)
            delta = sim.traffic.by_kind - before
            cost[action].append(sum(delta[kind] for kind in REPAIR_KINDS))
    return {
        "n": n,
        "repair_messages_per_join": statistics.mean(cost["join"]),
        "repair_messages_per_leave": statistics.mean(cost["leave"]),
    }


def fmt(value: object) -> str:
    return "-" if value is None else str(value)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench skipring", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="n <= 256 and one seed only")
    parser.add_argument("--wall-cap", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--sizes", type=int, nargs="+", help="n values (default: all)")
    parser.add_argument(
        "--starts", nargs="+", choices=("fresh", "corrupted"), default=("fresh", "corrupted")
    )
    parser.add_argument("--no-churn", action="store_true", help="skip the join/leave table")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([16, 64, 256] if args.quick else [16, 64, 256, 1024, 4096])
    RESULTS.mkdir(exist_ok=True)
    info = machine()
    print(f"BuildSR convergence in the simulator -- {info}")
    print()
    header = (
        f"{'start':<10}{'n':>6}{'budget':>8}{'seeds':>7}{'reached':>9}{'median':>8}{'max':>6}"
        f"{'>k':>7}{'msg/node/int':>14}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for start in args.starts:
        for n in sizes:
            for budget in (1, 16):
                seeds = 1 if args.quick or n >= 4096 else (3 if n >= 1024 else 5)
                row = convergence_row(start, n, budget, seeds, args.wall_cap)
                rows.append(row)
                print(
                    f"{start:<10}{n:>6}{budget:>8}{seeds:>7}{row['reached']:>9}"
                    f"{fmt(row['median_intervals']):>8}{fmt(row['max_intervals']):>6}"
                    f"{fmt(row['lower_bound_unreached']):>7}{row['messages_per_node_interval']:>14}",
                    flush=True,
                )
    churn = []
    churn_sizes = [] if args.no_churn else [n for n in sizes if n <= 1024]
    if churn_sizes:
        print()
        print("Repair traffic per join / leave (messages of kinds a quiescent ring never sends)")
    for n in churn_sizes:
        row = churn_row(n, rounds=4)
        churn.append(row)
        print(
            f"  n={n:<6} per join {row['repair_messages_per_join']:>8.1f}"
            f"   per leave {row['repair_messages_per_leave']:>8.1f}",
            flush=True,
        )
    suffix = "" if args.sizes is None and not args.quick else "-partial"
    out = RESULTS / f"skipring{suffix}.json"
    out.write_text(json.dumps({"machine": info, "convergence": rows, "churn": churn}, indent=2))
    print(f"\nwritten to {out}")
