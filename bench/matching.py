"""Content-based matching: the subscription index against a linear scan (issue 4, item 2).

Workload: `broker.stockquote` (OctopiA §10: 500 symbols, 7 attributes, subscriptions of about
2% selectivity).  For 1k, 10k and 100k subscriptions, publications matched per second by
`broker.cores.matching.vectorised.SubscriptionIndex` (the vectorised index: conditions as
columns over subscription slots), by `CountingIndex` (the counting algorithm in pure Python)
and by `LinearIndex` (every filter tried in turn); the time to build each index, and the
measured selectivity.  All must return the same sets on every publication measured; a disagreement
aborts the benchmark.
Each timing cycles through --pubs publications for at least --seconds, single-threaded.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from bench.machine import machine
from broker.cores.matching.counting import CountingIndex
from broker.cores.matching.linear import LinearIndex
from broker.cores.matching.vectorised import SubscriptionIndex
from broker.stockquote import StockQuotes

RESULTS = Path("bench-results")


def rate(match, pubs: list[dict], min_seconds: float) -> tuple[float, int, list[set]]:
    """(publications per second, publications done, results of the first ``len(pubs)``) --
    cycling through ``pubs`` for at least ``min_seconds``."""
    done = 0
    results: list[set] = []
    started = time.perf_counter()
    while True:
        got = match(pubs[done % len(pubs)])
        if done < len(pubs):
            results.append(got)
        done += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds and done >= 3:
            return done / elapsed, done, results


def row(n: int, seed: int, pubs_count: int, min_seconds: float) -> dict:
    workload = StockQuotes(seed)
    rng = random.Random(seed)
    subs = workload.subscriptions(n, rng)
    pubs = workload.publications(pubs_count, rng)
    measured: dict[str, dict] = {}
    for name, cls in (("index", SubscriptionIndex), ("counting", CountingIndex), ("scan", LinearIndex)):
        index: Any = cls()
        began = time.perf_counter()
        for key, f in enumerate(subs):
            index.add(key, f)
        build = time.perf_counter() - began
        per_s, done, results = rate(index.match, pubs, min_seconds)
        measured[name] = {"rate": per_s, "done": done, "results": results, "build": build}
        del index
    reference = measured["scan"]["results"]
    for name, m in measured.items():
        for i, got in enumerate(m["results"][: len(reference)]):
            if got != reference[i]:
                raise SystemExit(f"{name} and scan disagree on publication {i} with {n} subscriptions")
    index_results = measured["index"]["results"]
    matched = sum(len(r) for r in index_results)
    scan_rate = measured["scan"]["rate"]
    return {
        "subscriptions": n,
        "index_pubs_per_s": round(measured["index"]["rate"], 1),
        "counting_pubs_per_s": round(measured["counting"]["rate"], 1),
        "scan_pubs_per_s": round(scan_rate, 1),
        "index_speedup": round(measured["index"]["rate"] / scan_rate, 1),
        "counting_speedup": round(measured["counting"]["rate"] / scan_rate, 1),
        "publications_timed": {name: m["done"] for name, m in measured.items()},
        "index_build_s": round(measured["index"]["build"], 2),
        "counting_build_s": round(measured["counting"]["build"], 2),
        "index_adds_per_s": round(n / measured["index"]["build"]),
        "selectivity": round(matched / len(index_results) / n, 4),
        "mean_matches": round(matched / len(index_results), 1),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench matching", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1k and 10k subscriptions, short runs")
    parser.add_argument("--sizes", type=int, nargs="+", help="subscription counts (default 1k 10k 100k)")
    parser.add_argument("--pubs", type=int, default=2000, help="distinct publications (default 2000)")
    parser.add_argument("--seconds", type=float, default=3.0, help="minimum seconds per timing")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = args.sizes or ([1000, 10000] if args.quick else [1000, 10000, 100000])
    seconds = 1.0 if args.quick else args.seconds
    RESULTS.mkdir(exist_ok=True)
    info = machine()
    print(f"Content-based matching, stock quotes (500 symbols, 7 attributes, ~2% selectivity) -- {info}")
    print()
    header = (
        f"{'subs':>8}{'index pub/s':>13}{'counting pub/s':>16}{'scan pub/s':>12}"
        f"{'index/scan':>12}{'count/scan':>12}{'index build s':>15}{'selectivity':>13}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    for n in sizes:
        r = row(n, args.seed, args.pubs, seconds)
        rows.append(r)
        print(
            f"{n:>8}{r['index_pubs_per_s']:>13}{r['counting_pubs_per_s']:>16}{r['scan_pubs_per_s']:>12}"
            f"{r['index_speedup']:>11}x{r['counting_speedup']:>11}x{r['index_build_s']:>15}"
            f"{r['selectivity']:>13.2%}",
            flush=True,
        )
    suffix = "" if args.sizes is None and not args.quick else "-partial"
    out = RESULTS / f"matching{suffix}.json"
    out.write_text(json.dumps({"machine": info, "rows": rows}, indent=2))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main([])
