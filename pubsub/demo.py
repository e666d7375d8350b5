"""``make demo``: a supervisor and eight subscriber nodes as real processes, two topics.

Run as ``python -m pubsub.demo [--workdir DIR]``.  The demo

1. starts a supervisor and 8 node daemons on free ports of 127.0.0.1 (`LocalCluster`), in a
   temporary directory unless ``--workdir`` names one to keep (logs, data);
2. subscribes all 8 nodes to "news" and 5 of them to "sports";
3. waits, under a deadline, until both rings agree with the supervisor and stay so between
   two looks (`pubsub.localcluster.ring_problems`: labels as the supervisor assigned them,
   left/right/ring following the supervisor's order, every shortcut resolved to the node
   holding that label);
4. prints each ring in ring order: label, r(label) as a fraction, node, reference and
   shortcuts;
5. stops every process it started -- also on Ctrl-C, SIGTERM or an error -- and exits 0
   when everything went as described.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from pubsub.labels import Label
from pubsub.localcluster import ClusterError, LocalCluster, ring_order, ring_problems

N_NODES = 8
TOPICS: dict[str, range] = {"news": range(8), "sports": range(5)}
INTERVAL = 0.2
CONVERGE_TIMEOUT = 30.0

Snapshot = tuple[dict[str, str], dict[str, dict[str, Any]]]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  " + "  ".join("-" * w for w in widths))
    lines.extend(
        "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
    return "\n".join(lines)


def _fraction(bits: str) -> str:
    r = Label(bits).r()
    return str(r.numerator) if r.denominator == 1 else f"{r.numerator}/{r.denominator}"


def render_ring(cluster: LocalCluster, topic: str, snapshot: Snapshot) -> str:
    """One topic's ring as a table, in ring order (by r)."""
    members, states = snapshot
    rows = []
    for position, ref in enumerate(ring_order(members)):
        state = states.get(ref, {})
        shortcuts = state.get("shortcuts") or {}
        shown = ", ".join(
            f"{bits}->{cluster.name_of(str(target)) if target else '?'}"
            for bits, target in sorted(shortcuts.items(), key=lambda kv: Label(kv[0]))
        )
        rows.append(
            [str(position), members[ref], _fraction(members[ref]), cluster.name_of(ref), ref,
             shown or "-"]
        )
    title = f"topic {topic!r}: {len(members)} members, ring order (r = position on [0, 1))"
    return title + "\n" + _table(["#", "label", "r", "node", "ref", "shortcuts"], rows)


def wait_for_rings(cluster: LocalCluster, wanted: Mapping[str, set[str]]) -> dict[str, Snapshot]:
    """Poll until every topic's ring agrees with the supervisor and is unchanged since the
    previous look; returns the final snapshots.  ClusterTimeout after CONVERGE_TIMEOUT."""
    previous: dict[str, Snapshot] = {}
    latest: dict[str, Snapshot] = {}

    def problems() -> list[str]:
        nonlocal previous, latest
        latest = cluster.snapshots(wanted)
        found: list[str] = []
        for topic, (members, states) in latest.items():
            if set(members) != wanted[topic]:
                found.append(f"{topic}: {len(members)} of {len(wanted[topic])} members so far")
            found.extend(f"{topic}: {p}" for p in ring_problems(members, states))
        if not found and latest != previous:
            found.append("consistent; looking once more to see it stays so")
        previous = latest
        return found

    cluster.poll(problems, CONVERGE_TIMEOUT, "consistent rings", interval=2 * INTERVAL)
    return latest


def run(workdir: Path) -> None:
    """The demo itself, in `workdir`; every process is stopped when this returns or raises."""
    started = time.monotonic()
    with LocalCluster(workdir, N_NODES, interval=INTERVAL) as cluster:
        print(f"supervisor {cluster.supervisor_ref}")
        print("nodes      " + ", ".join(f"{d.name}={d.ref}" for d in cluster.nodes))
        print(f"logs       {cluster.logs_dir}")
        wanted: dict[str, set[str]] = {}
        for topic, nodes in TOPICS.items():
            for i in nodes:
                cluster.subscribe(i, topic)
            wanted[topic] = {cluster.node_refs[i] for i in nodes}
            print(f"subscribed {len(nodes)} nodes to {topic!r}")
        t0 = time.monotonic()
        snapshots = wait_for_rings(cluster, wanted)
        print(f"rings consistent after {time.monotonic() - t0:.1f} s\n")
        for topic in TOPICS:
            print(render_ring(cluster, topic, snapshots[topic]))
            print()
        print(
            "note: publications are not implemented yet; once the publications feature "
            "lands, messages published to a topic flow along these rings."
        )
        print("stopping the cluster ...")
    print(f"done in {time.monotonic() - started:.1f} s; every process stopped")


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through LocalCluster.__exit__, which stops all


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pubsub.demo``; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m pubsub.demo", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--workdir", type=Path, default=None,
        help="keep logs and data here (default: a temporary directory, removed afterwards)",
    )
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.workdir is not None:
            run(args.workdir)
        else:
            with tempfile.TemporaryDirectory(prefix="pubsub-demo-") as tmp:
                run(Path(tmp))
    except ClusterError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; every process stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
