"""End to end, real processes on 127.0.0.1: pubsub beside NATS core, NATS JetStream and Redis
pub/sub, in one interleaved run, with ratios pubsub/X.

Systems (each run is a fresh deployment, started alone and stopped before the next):
  pubsub      LocalCluster: a supervisor and n node processes, every node in one topic, once
              the ring is legitimate; publishing through node 0 with the client library (each
              call returns after a durable acknowledgement); subscriber i follows node i.
  pubsub-tls  the same cluster with mutual TLS and signed publications (every publication signed
              by its node, checked by every node; `pubsub.node.signing`): beside the plain path,
              with the ratios pubsub-tls/pubsub.
  pubsub-embedded  the same with each subscriber process running its node inside itself
              (`pubsub.client.embedded`); only the supervisor runs apart.
  relay-floor not a pub/sub system: pubsub's process topology at its cheapest (a relay process
              beside every subscriber process: forward along the arc tree, append to SQLite,
              hand to the subscriber; relay 0 acknowledges after its commit; nothing else),
              the floor under any pubsub member in Python (bench/e2e/floor.py).
  nats        Debian's nats-server (2.9) on a free port; nats-py; core publish/subscribe.
  jetstream   the same with -js (file storage in the run's directory); a stream with file
              storage on the subject; js.publish awaits each PubAck; each subscriber process has
              its own durable push consumer (deliver policy "new") that receives and
              acknowledges every message -- durable and acknowledged like a pubsub
              subscription, the anchor of the targets.
  jetstream-ordered  the same, each subscriber an ordered push consumer without
              acknowledgements (ephemeral, lighter), for reference.
  redis       Debian's redis-server on a free port (--save '' --appendonly no); redis-py.

Subscribers are separate OS processes for every system (bench/e2e/subscriber.py), one per
subscriber; each records (publication id, time.monotonic_ns() at receipt); the publisher (this
process) puts the id and its send time in a 64-byte payload.  CLOCK_MONOTONIC is system-wide on
Linux, so the times compare across processes.

Measurements, for n in 4 8 16 32 (quick: 4 16):
  latency      after a 10-publication warm-up (not measured), M publications (300; quick 60)
               paced at 50/s: time from the publish call until the LAST of the n subscribers
               received it; p50, p99, max; and the publish call's own p50 ("ack").
  throughput   at n = 16 (quick 8): one publisher with W = 32 publications in flight, K = 5000
               (quick 1000) publications: held/s = K / (first publish call -> every subscriber
               holds every publication), and acked/s.  pubsub's subscribers are its nodes: a
               node holds a publication once it stored it (status `publications.stored`,
               polled after the last acknowledgement; the follow-stream processes are closed
               first); zero loss and, for pubsub, exactly K stored at every node are checked.
               NATS core acknowledges nothing: its publisher flushes (PING/PONG) after every W.
  CPU          /proc utime+stime before/after the throughput run: pubsub µs per publication
               per node (median, max), the servers', the subscriber processes' per message and
               this harness's.  In the latency run, the whole deployment's CPU per
               paced publication, and the same by role (node 0, the other nodes, subscriber
               processes, server, harness: µs per publication of each role's median process).
  frames       pubsub only, latency run: status `stats.frames_out` summed over nodes per
               publication per node, for the kinds that carry a publication and for all kinds.
  idle         pubsub only: a legitimate ring of 32 (quick 8) nodes without publications for 10 s
               (quick 4 s), and 4 nodes in 50 topics: frames/s per node, frames per peer per
               Timeout interval, CPU %.
Latency and throughput are repeated R = 3 (quick 1) times, interleaving the systems (for each
repeat, for each n: pubsub, nats, jetstream, jetstream-ordered, redis), reported as medians
[min-max].  A system
whose server or client library is missing is reported as "not run: <reason>".
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench.e2e.common import PAYLOAD_BYTES, PUBLICATION_FRAME_KINDS, wait_quiet
from bench.e2e.idle import idle_run
from bench.e2e.pubsub_system import default_interval
from bench.e2e.report import print_contention, print_guarantees, print_idle, print_tables, summarize
from bench.e2e.run import Plan, run_once
from bench.e2e.systems import GUARANTEES, SYSTEMS, make_system, unavailable, versions
from bench.machine import machine

RESULTS = Path("bench-results")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench endtoend", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--quick", action="store_true", help="n in {4, 16}, throughput at 8, fewer publications, 1 repeat")
    add("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {','.join(SYSTEMS)}")
    add("--sizes", type=int, nargs="+", help="latency: n values (default 4 8 16 32; quick 4 16)")
    add("--count", type=int, help="latency: publications (default 300; quick 60)")
    add("--rate", type=float, default=50.0, help="latency: publications per second (default 50)")
    add("--warmup", type=int, default=10, help="publications before the latency run, not measured")
    add("--throughput-n", type=int, help="throughput: subscribers (default 16; quick 8)")
    add("--total", type=int, help="throughput: publications K (default 5000; quick 1000)")
    add("--window", type=int, default=32, help="throughput: publications in flight W (default 32)")
    add("--repeats", type=int, help="repeats of latency and throughput (default 3; quick 1)")
    add("--idle-n", type=int, help="idle: nodes in the one-topic ring (default 32; quick 8)")
    add("--idle-seconds", type=float, help="idle: measuring window (default 10; quick 4)")
    add("--idle-topics", type=int, default=50, help="idle: topics of the second scenario (default 50)")
    add("--idle-topic-nodes", type=int, default=4, help="idle: nodes of the second scenario (default 4)")
    add("--no-idle", action="store_true", help="skip the idle measurements")
    add("--interval", type=float, help="pubsub Timeout interval in s (default: the daemons' own default)")
    add("--pubsub-store-sync", choices=["full", "normal"], help="PUBSUB_STORE_SYNC for the nodes (default: theirs)")
    add("--out", type=Path, help="results file (default bench-results/endtoend.json; -partial if not the default run)")
    add("--quiet-wait", type=float, default=60.0,
        help="before each run, wait up to this many s for a second in which other processes use < 0.15 "
        "of a core (default 60; 0: do not wait)")
    add("--keep-dir", type=Path, help="put the runs' temporary directories here (for debugging)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> None:
    args = parse(argv)
    started = time.monotonic()
    quick = args.quick
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad or not systems:
        raise SystemExit(f"unknown system(s) {bad}; choose from {', '.join(SYSTEMS)}")
    systems = [s for s in SYSTEMS if s in systems]
    sizes = sorted(set(args.sizes or ([4, 16] if quick else [4, 8, 16, 32])))
    tput_n = args.throughput_n or (8 if quick else 16)
    params: dict[str, Any] = {
        "quick": quick,
        "systems": systems,
        "sizes": sizes,
        "count": args.count or (60 if quick else 300),
        "rate": args.rate,
        "warmup": args.warmup,
        "throughput_n": tput_n,
        "total": args.total or (1000 if quick else 5000),
        "window": args.window,
        "repeats": args.repeats or (1 if quick else 3),
        "payload_bytes": PAYLOAD_BYTES,
        "interval_s": args.interval or default_interval(),
        "pubsub_store_sync": args.pubsub_store_sync or "daemon default",
        "idle": None if args.no_idle else {
            "n": args.idle_n or (8 if quick else 32),
            "seconds": args.idle_seconds or (4.0 if quick else 10.0),
            "topics": args.idle_topics,
            "topic_nodes": args.idle_topic_nodes,
        },
        "publication_frame_kinds": sorted(PUBLICATION_FRAME_KINDS),
        "order": "for each repeat, for each n: " + ", ".join(systems),
    }
    notrun = {s: f"{why}" for s in systems if (why := unavailable(s))}
    env = environment(systems)
    env["git_at_start"] = git_state()
    info = machine()
    print(f"End to end on 127.0.0.1: {', '.join(systems)} -- {info}")
    print(
        f"latency n={sizes}, {params['count']} publications at {args.rate:g}/s; throughput n={tput_n}, "
        f"W={params['window']}, K={params['total']}; {params['repeats']} repeat(s), interleaved ({params['order']}); "
        f"pubsub interval {params['interval_s']:g} s, store sync {params['pubsub_store_sync']}"
    )
    for system, why in notrun.items():
        print(f"NOTE: {system} not run: {why}")
    print(flush=True)
    runnable = [s for s in systems if s not in notrun]
    pubsub_options = {"interval": params["interval_s"], "store_sync": args.pubsub_store_sync}
    runs: list[dict[str, Any]] = []
    for repeat in range(params["repeats"]):
        for n in sorted(set(sizes) | {tput_n}):
            for system in runnable:
                plan = Plan(
                    n=n, latency=n in sizes, throughput=n == tput_n, count=params["count"], rate=args.rate,
                    total=params["total"], window=args.window, warmup=args.warmup,
                )
                quiet = wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
                result = run_once(make_system(system, **pubsub_options), plan, args.keep_dir)
                result["repeat"] = repeat
                result["quiet_before"] = quiet
                runs.append(result)
                print(progress(result), flush=True)

    idle: list[dict[str, Any]] = []
    if params["idle"] is not None and "pubsub" in systems:
        spec = params["idle"]
        for label, n, topics in (
            ("one topic", spec["n"], 1),
            (f"{spec['topics']} topics per node", spec["topic_nodes"], spec["topics"]),
        ):
            quiet = wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
            row = idle_run(
                label, n, topics, spec["seconds"], params["interval_s"], args.pubsub_store_sync, args.keep_dir
            )
            row["quiet_before"] = quiet
            idle.append(row)
            said = row.get("error") or f"{row['frames_per_s_per_node']['median']} frames/s per node"
            print(f"idle {label}, n={n}: {said}", flush=True)

    summary = summarize(runs, systems, sizes, tput_n)
    print_tables(summary, params, systems, notrun)
    print_idle(idle)
    print_guarantees(systems)
    print_contention(runs, idle)
    errors = [f"{r['system']} n={r['n']} repeat {r['repeat']}: {r['error']}" for r in runs if "error" in r]
    errors += [f"idle {r['scenario']}: {r['error']}" for r in idle if "error" in r]
    if errors:
        print("\nerrors:\n  " + "\n  ".join(errors))
    elapsed = time.monotonic() - started
    env["git_at_end"] = git = git_state()
    if git and git["uncommitted_daemon_code"]:
        print(
            f"\nNOTE: pubsub ran the working tree of {git['commit'][:10]} with uncommitted changes to "
            f"{len(git['uncommitted_daemon_code'])} file(s) under pubsub/, broker/ "
            "(listed in the JSON)"
        )
    if git != env["git_at_start"]:
        print("NOTE: the daemons' code changed while the benchmark ran (git_at_start / git_at_end in the JSON)")
    print(f"\nrun time {elapsed:.0f} s")

    default = all(
        getattr(args, k) is None
        for k in ("sizes", "count", "throughput_n", "total", "repeats", "idle_n", "idle_seconds", "interval",
                  "pubsub_store_sync")
    ) and args.systems == ",".join(SYSTEMS) and not args.no_idle and not quick
    out = args.out or RESULTS / f"endtoend{'' if default else '-partial'}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "machine": info,
        "environment": env,
        "parameters": params,
        "guarantees": {s: GUARANTEES[s] for s in systems},
        "systems": {s: ("not run: " + notrun[s]) if s in notrun else "ran" for s in systems},
        "summary": summary,
        "runs": runs,
        "idle": idle,
        "errors": errors,
        "run_seconds": round(elapsed, 1),
    }
    out.write_text(json.dumps(document, indent=1))
    print(f"written to {out}")


def progress(result: dict[str, Any]) -> str:
    head = f"{result['system']:<10} n={result['n']:<3} repeat {result['repeat'] + 1}: "
    if "error" in result:
        return head + f"FAILED after {result.get('run_s')} s: {result['error']}"
    parts = []
    if lat := result.get("latency"):
        parts.append(
            f"latency p50 {lat['p50_ms']} ms p99 {lat['p99_ms']} ms ({lat['incomplete']} incomplete, "
            f"others used {100 * lat['contention']['others_share']:.0f}% of the machine)"
        )
    if tput := result.get("throughput"):
        parts.append(
            f"held {tput['held_per_s']}/s acked {tput['acked_per_s']}/s zero loss {tput['zero_loss']} "
            f"(others {100 * tput['contention']['others_share']:.0f}%)"
        )
    return head + "; ".join(parts) + f" [{result.get('run_s')} s]"


def environment(systems: list[str]) -> dict[str, Any]:
    """Server and client versions, and where the runs' files live (fsync cost depends on it)."""
    import os
    import subprocess
    import tempfile

    out: dict[str, Any] = {s: versions(s) for s in systems if s != "pubsub"}
    try:
        done = subprocess.run(
            ["df", "-T", tempfile.gettempdir()], capture_output=True, text=True, timeout=10
        )
        fields = done.stdout.splitlines()[-1].split()
        out["tmp_filesystem"] = {"path": tempfile.gettempdir(), "device": fields[0], "type": fields[1]}
    except (OSError, subprocess.TimeoutExpired, IndexError):
        out["tmp_filesystem"] = None
    out["cpus_usable"] = len(os.sched_getaffinity(0))
    return out


def git_state() -> dict[str, Any] | None:
    """The commit measured, and uncommitted changes to the daemons' code (others may be
    editing the same checkout: pubsub's numbers are those of the working tree), with a hash
    of their content to tell whether they changed during the run."""
    import hashlib
    import subprocess

    root = Path(__file__).resolve().parent.parent
    dirs = ["pubsub", "broker"]

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30)
        if done.returncode != 0:
            raise OSError(done.stderr.decode(errors="replace").strip())
        return done.stdout.decode(errors="replace")

    try:
        head = git("rev-parse", "HEAD").strip()
        dirty = git("status", "--porcelain", "--", *dirs).splitlines()
        digest = hashlib.sha256(git("diff", "HEAD", "--", *dirs).encode())
        for name in sorted(git("ls-files", "--others", "--exclude-standard", "--", *dirs).splitlines()):
            digest.update(name.encode())
            digest.update((root / name).read_bytes())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head, "uncommitted_daemon_code": dirty, "uncommitted_sha256": digest.hexdigest()[:16]}
