"""How new publications spread in a legitimate skip ring, in the simulator: the arc broadcast
(the nodes' default) beside the paper's flooding (§4.3).

For n in {16, 32, 256, 1024, 4096, 16384} (quick: up to 1024) the ring is installed in the
legitimate state SR(n) (`pubsub.sim.scenarios.legitimate_start`), links are equally fast (so
the hop count of each node's first copy is its distance in the broadcast), and P
publications (20; quick 8) are issued at random members, one at a time.  Per publication:
the messages that carried it (Spread or PublishNew), and the largest hop count with which a
member first stored it.  Reported: messages per publication (n - 1 is the minimum), the
largest and the median of the per-publication maxima of hops, against ceil(log2 n) + 2.

    python -m bench dissemination [--quick] [--sizes N ...] [--publications P] [--seed S]
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
from pubsub.kernel.message import Topic
from pubsub.sim.scenarios import legitimate_start
from pubsub.sim.world import Simulation

TOPIC = Topic("bench")
RESULTS = Path("bench-results")
CARRIERS = ("spread", "publish_new")


def measure(n: int, mode: str, publications: int, seed: int) -> dict[str, Any]:
    """One ring, `publications` publications one at a time (see the module docstring)."""
    started = time.monotonic()
    sim = Simulation(seed, dissemination=mode, delay=(0.01, 0.01), interval=5.0, keep_rows=True)
    refs = legitimate_start(sim, n, TOPIC)
    rng = random.Random(seed)
    messages: list[int] = []
    depths: list[int] = []
    for i in range(publications):
        assert sim.rows is not None
        for rows in sim.rows.values():
            rows.clear()
        before = sum(sim.traffic.by_kind[k] for k in CARRIERS)
        sim.publish(rng.choice(refs), TOPIC, f"p{i}".encode())
        sim.run_for(0.02 * (2 * math.ceil(math.log2(max(n, 2))) + 10))
        messages.append(sum(sim.traffic.by_kind[k] for k in CARRIERS) - before)
        arrivals = [row for rows in sim.rows.values() for row in rows]
        if len(arrivals) != n:
            raise SystemExit(f"n={n} {mode}: publication {i} reached {len(arrivals)} of {n} members")
        depths.append(max(a.hops or 0 for a in arrivals))
    return {
        "n": n,
        "mode": mode,
        "publications": publications,
        "messages_per_publication": statistics.mean(messages),
        "messages_min": min(messages),
        "messages_max": max(messages),
        "hops_max": max(depths),
        "hops_median": statistics.median(depths),
        "bound": math.ceil(math.log2(n)) + 2,
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench dissemination", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+")
    parser.add_argument("--publications", type=int)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    sizes = args.sizes or ([16, 32, 256, 1024] if args.quick else [16, 32, 256, 1024, 4096, 16384])
    count = args.publications or (8 if args.quick else 20)
    rows = []
    print(f"== Dissemination in a legitimate SR(n), simulator, equal link delays, {count} publications "
          "at random members")
    header = (f"{'n':>6}  {'mode':<6} {'messages/pub':>13} {'(n-1)':>7} {'hops max':>9} {'hops median':>12} "
              f"{'bound':>6}  {'wall s':>7}")
    print(header)
    print("-" * len(header))
    for n in sizes:
        for mode in ("tree", "flood"):
            if mode == "flood" and n > 4096:
                continue  # flooding at 16384 takes long and says nothing new
            row = measure(n, mode, count, args.seed)
            rows.append(row)
            print(f"{n:>6}  {mode:<6} {row['messages_per_publication']:>13.1f} {n - 1:>7} "
                  f"{row['hops_max']:>9} {row['hops_median']:>12} {row['bound']:>6}  {row['seconds']:>7}",
                  flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "dissemination.json"
    out.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1))
    print(f"written to {out}")
