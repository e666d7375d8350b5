"""Membership and anti-entropy at scale in the simulator (issue 14, acceptance items 1-3).

Three tables, each a median over a few seeds, "until" judged by the independent checker in
tests/ (`tests.simhelpers.is_legitimate`: members, labels, explicit edges and channels exactly
SR(n), paper 000 §1.1) or by comparing trie roots:

  (a) repair  Messages per leave and per crash repair in a legitimate ring (`legitimate_start`,
              paper 000 §4.1 for Unsubscribe, §3.3 for crashes), counted from the leave / crash
              until SR(n-1) is exact again (checked after every timeout interval):
                repair   messages of kinds a quiescent legitimate ring never sends (measured in
                         the same run before the event: Linearize, Introduce, Delegate, Subscribe,
                         Unsubscribe, RemoveConnections, SuspectCrash, Ping, ...),
                excess   all messages minus what the ring sent per interval before the event
                         (the periodic Check / IntroduceShortcut / CheckTrie / SetData traffic),
                         so extra periodic messages a repair causes are counted too; noisy at
                         large n (the baseline is ~n messages per interval, its noise ~sqrt),
              and c = repair / ceil(log2 n); "quiet": repair messages until, in addition, no
              message of a repair kind is in flight (right contacts still travelling -- what
              the older churn table of `bench skipring` counted, "quiescence to quiescence").
              Goal (issue 14): <= 100 messages at n = 1,024.
  (b) corrupt Timeout intervals from `corrupted_start` (random labels, pointers, a database with
              all four corruptions of §3.1, junk in flight) to exactly SR(n), with the
              supervisor's configured budget (the paper's 1 by default); then, in the
              legitimate state, GetConfiguration requests received and SetData sent by the
              supervisor per interval over `--legit-intervals` intervals (Theorem 3.1: < 1) and
              the supervisor's effective budget at the end.  Goal: I(4096)/I(256) <= 2 and
              I(4096) <= 200.
  (j) join    n processes subscribe at time 0 (`fresh_start`, a mass join); timeout intervals
              until exactly SR(n), wall and CPU seconds per interval (simulation, and the
              legitimacy check after each interval), and the process's peak RSS during the
              row (VmHWM, reset before each row).  What issue 14 item 6 asks: the
              simulator at 10^5 subscribers in one process.
  (c) spread  With flooding off (Theorem 5.19's setting: anti-entropy alone, §4.2), 40
              publications stored at random subscribers of a legitimate ring; timeout
              intervals until all tries have the same root.  Goal: <= 100 at n = 1,024.

A run that exceeds its wall-clock cap is reported as "> k" (the intervals it managed); a
size that was not run is absent from the JSON and printed as "not run".  The module uses
only the simulator's public surface, so the same file measures an older tree (run it from a
`git worktree` of that commit).

Sizes: the default (`make bench`, about half an hour) a: 16..1,024, b and c: 256, 1,024,
4,096 (so that I(4,096) / I(256) is in the default tables), j: 256, 1,024, 4,096; `--large`
adds 4,096 and 16,384 to a, b, c and 16,384 to j; `--huge` adds 32,768 and 65,536 to a, b and
c, and 32,768, 65,536 and 100,000 to j, with one seed and one leave / crash per seed for a
unless `--seeds` / `--events` are given (about an hour for a and j at 65,536 / 100,000 on two
shared cores; b and c take a few dozen intervals of ~10-20 s each at 65,536).

    python -m bench scale [--tables a b c j] [--sizes-a ...] [--sizes-b ...] [--sizes-c ...]
                          [--sizes-j ...] [--seeds k] [--wall-cap s] [--large] [--huge]
                          [--quick] [--label text]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import statistics
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.machine import machine
from pubsub.kernel.message import Ref, Topic
from pubsub.publications.topicstate import make_publication
from pubsub.sim.scenarios import corrupted_start, fresh_start, legitimate_start
from pubsub.sim.world import Simulation
from tests.simhelpers import is_legitimate

TOPIC = Topic("bench")
RESULTS = Path("bench-results")

DEFAULT_A = [16, 64, 256, 1024]
DEFAULT_B = [256, 1024, 4096]
DEFAULT_C = [256, 1024, 4096]
DEFAULT_J = [256, 1024, 4096]
LARGE = [4096, 16384]
HUGE = [32768, 65536]
HUGE_J = [32768, 65536, 100000]
QUICK = [16, 64]

Row = dict[str, Any]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


# ---------------------------------------------------------------------- (a) leave / crash
def _baseline(sim: Simulation, intervals: int) -> tuple[set[str], float]:
    """Kinds a quiescent legitimate ring sends, and its messages per interval."""
    before = sim.traffic.by_kind.copy()
    sim.run_for(intervals * sim.interval)
    delta = sim.traffic.by_kind - before
    return set(delta), sum(delta.values()) / intervals


def repair_cost(sim: Simulation, action: str, victim: Ref, max_intervals: int, wall_cap: float) -> Row:
    """One leave or crash of `victim` in a legitimate ring: messages until SR(n-1) is exact."""
    periodic, rate = _baseline(sim, 4)
    before = sim.traffic.by_kind.copy()
    started = time.monotonic()
    if action == "leave":
        sim.leave(victim, TOPIC)
    else:
        sim.crash(victim)
    reached = False
    intervals = 0
    for intervals in range(1, max_intervals + 1):  # noqa: B007 - read after the loop
        sim.run_for(sim.interval)
        if is_legitimate(sim, TOPIC):
            reached = True
            break
        if time.monotonic() - started > wall_cap:
            break
    delta: Counter[str] = sim.traffic.by_kind - before
    repair = {kind: count for kind, count in delta.items() if kind not in periodic}
    # Also until quiescence (what the older churn table counted): legitimate, and no message
    # of a repair kind left in flight -- contacts that are right but still travelling.
    quiet = reached
    for _ in range(max_intervals):
        if not quiet or not any(m.kind not in periodic for _, _, m in sim.in_flight()):
            break
        sim.run_for(sim.interval)
    after = sim.traffic.by_kind - before
    to_quiet = sum(count for kind, count in after.items() if kind not in periodic)
    return {
        "action": action,
        "intervals": intervals,
        "reached": reached,
        "repair": sum(repair.values()),
        "repair_to_quiescence": to_quiet,
        "excess": round(sum(delta.values()) - rate * intervals),
        "repair_by_kind": dict(sorted(repair.items(), key=lambda kv: -kv[1])),
        "periodic_by_kind": {k: v for k, v in delta.items() if k in periodic},
        "baseline_per_interval": round(rate, 1),
    }


def repair_row(n: int, seeds: int, events: int, wall_cap: float) -> Row:
    runs: list[Row] = []
    for seed in range(seeds):
        sim = Simulation(seed)
        legitimate_start(sim, n, TOPIC)
        rng = random.Random(seed)
        assert is_legitimate(sim, TOPIC), "legitimate_start is not legitimate"
        for i in range(events):
            for action in ("leave", "crash"):
                members = sorted(r for r, node in sim.nodes.items() if TOPIC in node.wanted_topics)
                victim = rng.choice(members)
                run = repair_cost(sim, action, victim, 50 + 4 * n, wall_cap)
                run.update(seed=seed, event=i, victim=victim)
                runs.append(run)
                if not run["reached"]:
                    break
    out: Row = {"n": n, "seeds": seeds, "events_per_seed": events, "log2n": math.ceil(math.log2(n))}
    for action in ("leave", "crash"):
        mine = [r for r in runs if r["action"] == action]
        done = [r for r in mine if r["reached"]]
        kinds: Counter[str] = Counter()
        for r in done:
            kinds.update(r["repair_by_kind"])
        out[action] = {
            "runs": len(mine),
            "reached": len(done),
            "median_repair": _median([r["repair"] for r in done]),
            "mean_repair": round(statistics.mean(r["repair"] for r in done), 1) if done else None,
            "median_to_quiescence": _median([r["repair_to_quiescence"] for r in done]),
            "mean_to_quiescence": round(statistics.mean(r["repair_to_quiescence"] for r in done), 1) if done else None,
            "max_repair": max((r["repair"] for r in done), default=None),
            "median_excess": _median([r["excess"] for r in done]),
            "median_intervals": _median([r["intervals"] for r in done]),
            "mean_repair_by_kind": {k: round(v / max(len(done), 1), 1) for k, v in kinds.most_common(6)},
        }
        median = out[action]["median_repair"]
        out[action]["c"] = None if median is None else round(median / out["log2n"], 1)
    out["runs"] = runs
    return out


# ---------------------------------------------------------------------- (b) corrupted states
def corrupted_row(n: int, seeds: int, budget: int, wall_cap: float, legit_intervals: int) -> Row:
    runs: list[Row] = []
    for seed in range(seeds):
        sim = Simulation(seed, config_budget=budget)
        corrupted_start(sim, n, TOPIC, random.Random(seed))
        started = time.monotonic()
        reached = False
        intervals = 0
        for intervals in range(0, 100 * n + 1):  # noqa: B007 - read after the loop
            if is_legitimate(sim, TOPIC):
                reached = True
                break
            if time.monotonic() - started > wall_cap:
                break
            sim.run_for(sim.interval)
        run: Row = {
            "seed": seed,
            "intervals": intervals,
            "reached": reached,
            "seconds": round(time.monotonic() - started, 1),
        }
        if reached:
            to_sup = sim.traffic.to_supervisor.copy()
            from_sup = sim.traffic.from_supervisor.copy()
            sim.run_for(legit_intervals * sim.interval)
            requests = sim.traffic.to_supervisor["get_configuration"] - to_sup["get_configuration"]
            configs = sim.traffic.from_supervisor["set_data"] - from_sup["set_data"]
            run["requests_per_interval"] = round(requests / legit_intervals, 3)
            run["set_data_per_interval"] = round(configs / legit_intervals, 3)
            run["still_legitimate"] = is_legitimate(sim, TOPIC)
            effective = getattr(sim.supervisor, "effective_budget", None)
            run["budget_at_end"] = effective(TOPIC) if callable(effective) else sim.supervisor.config_budget
        runs.append(run)
    done = [r for r in runs if r["reached"]]
    return {
        "n": n,
        "budget": budget,
        "seeds": seeds,
        "reached": len(done),
        "median_intervals": _median([r["intervals"] for r in done]),
        "max_intervals": max((r["intervals"] for r in done), default=None),
        "unreached_at_least": max((r["intervals"] for r in runs if not r["reached"]), default=None),
        "requests_per_interval": max((r["requests_per_interval"] for r in done), default=None),
        "set_data_per_interval": max((r["set_data_per_interval"] for r in done), default=None),
        "budget_at_end": max((r["budget_at_end"] for r in done), default=None),
        "runs": runs,
    }


def legitimate_load(n: int, seeds: int, intervals: int) -> Row:
    """Theorem 3.1 measured directly: a ring installed in SR(n) (`legitimate_start`), run
    for `intervals` timeout intervals; configuration requests the supervisor receives and
    configurations it sends per interval, and its budget at the end."""
    requests, configs, budgets = [], [], []
    for seed in range(seeds):
        sim = Simulation(seed)
        legitimate_start(sim, n, TOPIC)
        sim.run_for(intervals * sim.interval)
        requests.append(sim.traffic.to_supervisor["get_configuration"] / intervals)
        configs.append(sim.traffic.from_supervisor["set_data"] / intervals)
        effective = getattr(sim.supervisor, "effective_budget", None)
        budgets.append(effective(TOPIC) if callable(effective) else sim.supervisor.config_budget)
    return {
        "n": n,
        "seeds": seeds,
        "intervals": intervals,
        "requests_per_interval": round(statistics.mean(requests), 3),
        "set_data_per_interval": round(statistics.mean(configs), 3),
        "budget_at_end": max(budgets),
    }


# ---------------------------------------------------------------------- (j) mass join
def _memory() -> dict[str, int]:
    """VmRSS and VmHWM (peak) of this process, MB (Linux; {} elsewhere)."""
    found: dict[str, int] = {}
    try:
        with open("/proc/self/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    found[key] = int(value.split()[0]) // 1024
    except OSError:
        pass
    return found


def _reset_peak() -> None:
    """Start a new VmHWM (Linux >= 4.0: writing 5 to clear_refs resets the peak RSS)."""
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def join_row(n: int, seed: int, wall_cap: float) -> Row:
    """A mass join of n fresh processes (`fresh_start`): intervals until exactly SR(n), time
    per interval and peak memory."""
    _reset_peak()
    started, cpu_started = time.monotonic(), time.process_time()
    sim = Simulation(seed)
    fresh_start(sim, n, TOPIC)
    setup, setup_cpu = time.monotonic() - started, time.process_time() - cpu_started
    sim_wall = sim_cpu = check_wall = check_cpu = 0.0
    reached = False
    intervals = 0
    for intervals in range(0, 100 * n + 1):  # noqa: B007 - read after the loop
        wall, cpu = time.monotonic(), time.process_time()
        reached = is_legitimate(sim, TOPIC)
        check_wall += time.monotonic() - wall
        check_cpu += time.process_time() - cpu
        if reached or time.monotonic() - started > wall_cap:
            break
        wall, cpu = time.monotonic(), time.process_time()
        sim.run_for(sim.interval)
        sim_wall += time.monotonic() - wall
        sim_cpu += time.process_time() - cpu
    checks = intervals + 1
    memory = _memory()
    row: Row = {
        "n": n,
        "seed": seed,
        "intervals": intervals,
        "reached": reached,
        "setup_seconds": round(setup, 1),
        "setup_cpu_seconds": round(setup_cpu, 1),
        "sim_seconds_per_interval": round(sim_wall / max(intervals, 1), 2),
        "sim_cpu_per_interval": round(sim_cpu / max(intervals, 1), 2),
        "check_seconds_per_interval": round(check_wall / checks, 2),
        "check_cpu_per_interval": round(check_cpu / checks, 2),
        "seconds": round(time.monotonic() - started, 1),
        "cpu_seconds": round(time.process_time() - cpu_started, 1),
        "messages_per_interval": round(sim.traffic.total() / max(intervals, 1)),
        "peak_rss_mb": memory.get("VmHWM"),
        "rss_mb": memory.get("VmRSS"),
    }
    del sim
    gc.collect()
    return row


# ---------------------------------------------------------------------- (c) anti-entropy alone
def spread_row(n: int, seeds: int, publications: int, wall_cap: float) -> Row:
    runs: list[Row] = []
    for seed in range(seeds):
        sim = Simulation(seed, flooding=False)
        refs = legitimate_start(sim, n, TOPIC)
        rng = random.Random(seed)
        for i in range(publications):
            holder = rng.choice(refs)
            sim.nodes[holder].anti_entropy(TOPIC).store(
                make_publication(holder, i, f"publication {i}".encode())
            )
        cores = [node.publications[TOPIC] for node in sim.nodes.values()]
        started = time.monotonic()
        before = sim.traffic.total()
        reached = False
        intervals = 0
        for intervals in range(0, 100 * n + 1):  # noqa: B007 - read after the loop
            if len({core.trie.root() for core in cores}) == 1:
                reached = True
                break
            if time.monotonic() - started > wall_cap:
                break
            sim.run_for(sim.interval)
        runs.append(
            {
                "seed": seed,
                "intervals": intervals,
                "reached": reached,
                "messages_per_node_interval": round(
                    (sim.traffic.total() - before) / n / max(intervals, 1), 1
                ),
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    done = [r for r in runs if r["reached"]]
    return {
        "n": n,
        "seeds": seeds,
        "publications": publications,
        "reached": len(done),
        "median_intervals": _median([r["intervals"] for r in done]),
        "max_intervals": max((r["intervals"] for r in done), default=None),
        "unreached_at_least": max((r["intervals"] for r in runs if not r["reached"]), default=None),
        "median_messages_per_node_interval": _median([r["messages_per_node_interval"] for r in runs]),
        "runs": runs,
    }


# ---------------------------------------------------------------------- output
def fmt(value: object) -> str:
    return "-" if value is None else str(value)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n in 16, 64 (table a) / 64 (b, c), one seed")
    parser.add_argument("--large", action="store_true",
                        help=f"add n = {LARGE} to tables a, b, c and {LARGE[-1]} to j")
    parser.add_argument("--huge", action="store_true",
                        help=f"add n = {HUGE} to tables a, b and c and {HUGE_J} to j; "
                        "one seed and one event per seed unless --seeds / --events say otherwise")
    parser.add_argument("--tables", nargs="+", choices=("a", "b", "c", "j"), default=["a", "b", "c", "j"])
    parser.add_argument("--sizes-a", type=int, nargs="+")
    parser.add_argument("--sizes-b", type=int, nargs="+")
    parser.add_argument("--sizes-c", type=int, nargs="+")
    parser.add_argument("--sizes-j", type=int, nargs="+")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per size (default 3; 1 with --huge)")
    parser.add_argument("--events", type=int, default=None,
                        help="leaves and crashes per seed, table a (default 2; 1 with --huge)")
    parser.add_argument("--budget", type=int, default=1, help="supervisor config budget (table b)")
    parser.add_argument("--legit-intervals", type=int, default=20)
    parser.add_argument("--wall-cap", type=float, default=None,
                        help="seconds per run (default 300; 7,200 with --huge)")
    parser.add_argument("--label", default="", help="names the JSON file (e.g. before / after)")
    args = parser.parse_args(argv)
    extra = LARGE if args.large else []
    huge = HUGE if args.huge else []
    seeds = 1 if args.quick else (args.seeds or (1 if args.huge else 3))
    events = args.events or (1 if args.huge else 2)
    if args.wall_cap is None:
        args.wall_cap = 7200.0 if args.huge else 300.0
    join_extra = ([LARGE[-1]] if args.large else []) + (HUGE_J if args.huge else [])
    sizes = {
        "a": args.sizes_a or (QUICK if args.quick else DEFAULT_A + extra + huge),
        "b": args.sizes_b or ([64] if args.quick else sorted(set(DEFAULT_B + extra + huge))),
        "c": args.sizes_c or ([64] if args.quick else sorted(set(DEFAULT_C + extra + huge))),
        "j": args.sizes_j or ([64] if args.quick else sorted(set(DEFAULT_J + join_extra))),
    }
    RESULTS.mkdir(exist_ok=True)
    info = machine()
    commit = _git_commit()
    print(f"Issue 14 scale tables in the simulator -- commit {commit} -- {info}")
    result: dict[str, Any] = {"machine": info, "commit": commit, "argv": argv, "seeds": seeds}
    if "a" in args.tables:
        print("\n(a) messages per leave / crash repair in a legitimate ring, until SR(n-1) exact")
        header = (f"{'n':>6}{'event':>7}{'runs':>6}{'ok':>4}{'repair':>9}{'mean':>8}{'max':>8}{'c':>7}"
                  f"{'excess':>9}{'intervals':>10}{'quiet med':>10}{'mean':>8}  dominant kinds (mean per event)")
        print(header)
        print("-" * len(header))
        result["repair"] = []
        for n in sizes["a"]:
            row = repair_row(n, seeds, events, args.wall_cap)
            result["repair"].append(row)
            for action in ("leave", "crash"):
                r = row[action]
                kinds = ", ".join(f"{k} {v}" for k, v in list(r["mean_repair_by_kind"].items())[:4])
                print(f"{n:>6}{action:>7}{r['runs']:>6}{r['reached']:>4}{fmt(r['median_repair']):>9}"
                      f"{fmt(r['mean_repair']):>8}"
                      f"{fmt(r['max_repair']):>8}{fmt(r['c']):>7}{fmt(r['median_excess']):>9}"
                      f"{fmt(r['median_intervals']):>10}{fmt(r['median_to_quiescence']):>10}"
                      f"{fmt(r['mean_to_quiescence']):>8}  {kinds}", flush=True)
    if "b" in args.tables:
        print(f"\n(b) timeout intervals from corrupted states to exactly SR(n), budget {args.budget}")
        header = (f"{'n':>6}{'seeds':>6}{'ok':>4}{'median':>8}{'max':>7}{'>k':>7}"
                  f"{'req/int':>9}{'setdata/int':>12}{'budget':>8}")
        print(header)
        print("-" * len(header))
        result["corrupted"] = []
        for n in sizes["b"]:
            row = corrupted_row(n, seeds, args.budget, args.wall_cap, args.legit_intervals)
            result["corrupted"].append(row)
            print(f"{n:>6}{seeds:>6}{row['reached']:>4}{fmt(row['median_intervals']):>8}"
                  f"{fmt(row['max_intervals']):>7}{fmt(row['unreached_at_least']):>7}"
                  f"{fmt(row['requests_per_interval']):>9}{fmt(row['set_data_per_interval']):>12}"
                  f"{fmt(row['budget_at_end']):>8}", flush=True)
        medians = {r["n"]: r["median_intervals"] for r in result["corrupted"]}
        if medians.get(256) and medians.get(4096):
            ratio = medians[4096] / medians[256]
            result["corrupted_ratio_4096_256"] = round(ratio, 2)
            print(f"    I(4096) / I(256) = {ratio:.2f} (goal <= 2), I(4096) = {medians[4096]} (goal <= 200)")
        print(f"\n    legitimate state (legitimate_start), {args.legit_intervals * 10} intervals, mean over seeds")
        result["legitimate_load"] = []
        for n in sizes["b"]:
            load = legitimate_load(n, seeds, args.legit_intervals * 10)
            result["legitimate_load"].append(load)
            print(f"{n:>6}{seeds:>6}  req/int {load['requests_per_interval']}"
                  f"  setdata/int {load['set_data_per_interval']}  budget {load['budget_at_end']}", flush=True)
    if "c" in args.tables:
        print("\n(c) flooding off: intervals until all tries are equal (40 publications at random nodes)")
        header = f"{'n':>6}{'seeds':>6}{'ok':>4}{'median':>8}{'max':>7}{'>k':>7}{'msg/node/int':>14}"
        print(header)
        print("-" * len(header))
        result["spread"] = []
        for n in sizes["c"]:
            row = spread_row(n, seeds, 40, args.wall_cap)
            result["spread"].append(row)
            print(f"{n:>6}{seeds:>6}{row['reached']:>4}{fmt(row['median_intervals']):>8}"
                  f"{fmt(row['max_intervals']):>7}{fmt(row['unreached_at_least']):>7}"
                  f"{fmt(row['median_messages_per_node_interval']):>14}", flush=True)
    if "j" in args.tables:
        print(f"\n(j) mass join: n processes subscribe at time 0, intervals to exactly SR(n) (seed 0..{seeds - 1})")
        header = (f"{'n':>7}{'seed':>5}{'ok':>4}{'intervals':>10}{'sim s/int':>11}{'cpu':>7}"
                  f"{'check s':>9}{'cpu':>7}{'setup s':>9}{'total s':>9}{'msg/int':>10}{'peak MB':>9}")
        print(header)
        print("-" * len(header))
        result["join"] = []
        for n in sizes["j"]:
            for seed in range(seeds):
                row = join_row(n, seed, args.wall_cap)
                result["join"].append(row)
                shown = row["intervals"] if row["reached"] else f"> {row['intervals']}"
                print(f"{n:>7}{seed:>5}{int(row['reached']):>4}{shown:>10}"
                      f"{row['sim_seconds_per_interval']:>11}{row['sim_cpu_per_interval']:>7}"
                      f"{row['check_seconds_per_interval']:>9}{row['check_cpu_per_interval']:>7}"
                      f"{row['setup_seconds']:>9}{row['seconds']:>9}{row['messages_per_interval']:>10}"
                      f"{fmt(row['peak_rss_mb']):>9}", flush=True)
    label = f"-{args.label}" if args.label else ""
    out = RESULTS / f"scale{label}.json"
    out.write_text(json.dumps(result, indent=2, default=str))
    print(f"\nwritten to {out}")
