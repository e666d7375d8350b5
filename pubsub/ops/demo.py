"""``make demo``: a supervisor and eight subscriber nodes as real processes, two topics.

Run as ``python -m pubsub.ops.demo [--workdir DIR]``.  The demo

1. starts a supervisor and 8 node daemons on free ports of 127.0.0.1 (`LocalCluster`), in a
   temporary directory unless ``--workdir`` names one to keep (logs, data), and prints the
   address of the supervisor's web view (``--web-listen``: the rings drawn live);
2. subscribes all 8 nodes to "news" and 5 of them to "sports";
3. waits, under a deadline, until both rings agree with the supervisor and stay so between
   two looks (the overlay's own check, `Overlay.legitimate`; for the skip ring: labels as
   the supervisor assigned them, left/right/ring following the supervisor's order, every
   shortcut resolved to the node holding that label);
4. prints each topic as its overlay lays it out (`Overlay.member_table`; for the skip ring
   in ring order: label, r(label) as a fraction, node, reference and shortcuts), and what
   the web view says of it (``/api/rings``);
5. publishes a few messages on each topic from different nodes, one of them through a
   node that does not subscribe to "sports" (it hands the publication over to a member),
   and prints the acknowledgements;
6. waits until every member holds every publication and prints what several nodes
   deliver, with their local sequence numbers;
7. lets a late joiner subscribe to "sports" and prints the history it receives;
8. stops every process it started -- also on Ctrl-C, SIGTERM or an error -- and exits 0
   when everything went as described.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import ClusterError, sigterm_unwinds

N_NODES = 8
TOPICS: dict[str, range] = {"news": range(8), "sports": range(5)}
INTERVAL = 0.2
CONVERGE_TIMEOUT = 30.0
#: (topic, node index, message); node 7 does not subscribe to "sports".
PUBLICATIONS: list[tuple[str, int, str]] = [
    ("news", 0, "hello from node-00"),
    ("news", 3, "node-03 has news too"),
    ("news", 6, "and node-06 says hi"),
    ("sports", 1, "kick-off at 3pm"),
    ("sports", 4, "half time: 1-1"),
    ("sports", 7, "final score 2-1 (sent through node-07, which is not a member)"),
]
#: Nodes whose deliveries are shown, per topic.
SHOWN: dict[str, tuple[int, ...]] = {"news": (2, 7), "sports": (0, 3)}
#: Joins "sports" after the publications and receives the history.
LATE_JOINER = 5

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


def render_ring(cluster: LocalCluster, topic: str, snapshot: Snapshot) -> str:
    """One topic as a table, as the cluster's overlay lays it out (`Overlay.member_table`:
    for the skip ring its ring order, by r, with labels and shortcuts)."""
    members, states = snapshot
    order, header, rows = cluster.overlay.member_table(members, states, cluster.name_of)
    title = f"topic {topic!r}: {len(members)} members, {order}"
    return title + "\n" + _table(header, rows)


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
            found.extend(f"{topic}: {p}" for p in cluster.problems(topic, states))
        if not found and latest != previous:
            found.append("legitimate; looking once more to see it stays so")
        previous = latest
        return found

    cluster.poll(problems, CONVERGE_TIMEOUT, "legitimate rings", interval=2 * INTERVAL)
    return latest


def web_view_says(cluster: LocalCluster, topics: Sequence[str]) -> str:
    """One line per topic from the web view's JSON (``GET /api/rings``), waiting (bounded)
    for the poll that sees every topic."""
    url = f"{cluster.web_url}api/rings"
    view: dict[str, Any] = {}

    def problems() -> list[str]:
        nonlocal view
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                view = json.load(response)
        except (OSError, ValueError) as exc:
            return [f"{url}: {exc}"]
        shown = view.get("topics") or {}
        return [f"{topic}: not legitimate yet" for topic in topics if not (shown.get(topic) or {}).get("legitimate")]

    cluster.poll(problems, CONVERGE_TIMEOUT, "the web view to show every ring", interval=0.5)
    return "\n".join(
        f"  {topic}: {view['topics'][topic]['n']} members, legitimate, "
        f"{len(view['topics'][topic]['edges'])} edges drawn"
        for topic in topics
    )


def render_deliveries(cluster: LocalCluster, ref: str, entries: list[dict[str, Any]]) -> str:
    """What one node delivers for a topic: local number, publisher#seq, payload."""
    rows = [
        [f"#{e['local_seq']}", f"{cluster.name_of(e['publisher'])}#{e['seq']}", e["payload"]]
        for e in entries
    ]
    return _table(["local", "publisher#seq", "payload"], rows)


def wait_for_history(
    cluster: LocalCluster, topic: str, refs: Sequence[str], count: int
) -> dict[str, list[dict[str, Any]]]:
    """Poll until every node in `refs` holds `count` publications of `topic`."""
    latest: dict[str, list[dict[str, Any]]] = {}

    def problems() -> list[str]:
        nonlocal latest
        latest = cluster.histories(refs, topic)
        return [
            f"{cluster.name_of(ref)} holds {len(entries)} of {count} {topic} publications"
            for ref, entries in latest.items()
            if len(entries) != count
        ]

    cluster.poll(problems, CONVERGE_TIMEOUT, f"every node to hold the {topic} publications", 0.3)
    return latest


def publish_and_show(cluster: LocalCluster, wanted: Mapping[str, set[str]]) -> None:
    """Steps 5-7 of the module docstring."""
    print("publishing (each acknowledged once a member has it on disk; local #N is its number at that member):")
    counts: dict[str, int] = {}
    for topic, i, text in PUBLICATIONS:
        ack = cluster.publish(i, topic, text)
        how = (
            f"local #{ack['local_seq']}"
            if ack["local_seq"] is not None
            else f"handed over to {cluster.name_of(ack['stored_by'])}"
        )
        print(f"  {topic:<7} via {cluster.name_of(cluster.node_refs[i])}: {text!r} -> {how}")
        counts[topic] = counts.get(topic, 0) + 1
    print()
    for topic, count in counts.items():
        t0 = time.monotonic()
        histories = wait_for_history(cluster, topic, sorted(wanted[topic]), count)
        print(
            f"every {topic!r} member holds all {count} publications "
            f"({time.monotonic() - t0:.1f} s after the last acknowledgement)"
        )
        for i in SHOWN[topic]:
            ref = cluster.node_refs[i]
            print(f"deliveries of {topic!r} at {cluster.name_of(ref)} (its own local order):")
            print(render_deliveries(cluster, ref, histories[ref]))
        print()
    late = cluster.node_refs[LATE_JOINER]
    print(f"{cluster.name_of(late)} subscribes to 'sports' late ...")
    cluster.subscribe(LATE_JOINER, "sports")
    t0 = time.monotonic()
    history = wait_for_history(cluster, "sports", [late], counts["sports"])[late]
    print(
        f"... and receives the whole history within {time.monotonic() - t0:.1f} s (in the order it stored"
        " them: each publisher's own are in order, different publishers' are not ordered with each other):"
    )
    print(render_deliveries(cluster, late, history))
    print()


def run(workdir: Path, kept: bool = True) -> None:
    """The demo itself, in `workdir` (removed afterwards unless `kept`); every process is
    stopped when this returns or raises."""
    started = time.monotonic()
    with LocalCluster(workdir, N_NODES, interval=INTERVAL, web=True) as cluster:
        print(f"supervisor {cluster.supervisor_ref}")
        print(f"web view   {cluster.web_url}  (open it in a browser while the demo runs)")
        print("nodes      " + ", ".join(f"{d.name}={d.ref}" for d in cluster.nodes))
        removed = "" if kept else "  (removed at the end: keep them with --workdir DIR)"
        print(f"logs       {cluster.logs_dir}{removed}")
        wanted: dict[str, set[str]] = {}
        for topic, nodes in TOPICS.items():
            for i in nodes:
                cluster.subscribe(i, topic)
            wanted[topic] = {cluster.node_refs[i] for i in nodes}
            print(f"subscribed {len(nodes)} nodes to {topic!r}")
        t0 = time.monotonic()
        snapshots = wait_for_rings(cluster, wanted)
        print(f"rings legitimate after {time.monotonic() - t0:.1f} s\n")
        for topic in TOPICS:
            print(render_ring(cluster, topic, snapshots[topic]))
            print()
        print(f"the web view ({cluster.web_url}) says:")
        print(web_view_says(cluster, list(TOPICS)))
        print()
        publish_and_show(cluster, wanted)
        print("stopping the cluster ...")
    print(f"done in {time.monotonic() - started:.1f} s; every process stopped")



def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m pubsub.ops.demo``; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m pubsub.ops.demo", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--workdir", type=Path, default=None,
        help="keep logs and data here (default: a temporary directory, removed afterwards)",
    )
    args = parser.parse_args(argv)
    try:
        with sigterm_unwinds():  # through LocalCluster.__exit__, which stops every process
            if args.workdir is not None:
                run(args.workdir)
            else:
                with tempfile.TemporaryDirectory(prefix="pubsub-demo-") as tmp:
                    run(Path(tmp), kept=False)
    except ClusterError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; every process stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
