"""A small hand-built event stream with known answers, for the analysis tests.

Two topics.  ``news`` has four nodes (labels l(0..3)); ``solo`` has one node.  Times are
seconds after BASE; the first event (the ``start`` marker) is at BASE, so bucket b of width
0.5 s covers [b/2, b/2 + 1/2).

news:  0.2  n0 n1 n2 report their SR(4) state (n3 not yet: 3 members, not legitimate)
       0.3  n3 reports -> legitimate
       2.0  marker corrupt-1 (topic news)
       2.05 n2's right edge and a shortcut go wrong -> not legitimate
       3.25 n2's edges are right again, but its trie root differs -> not legitimate
       3.5  n2's trie root agrees -> legitimate
       4.0  periodic snapshots of everyone (no change)
       4.5  marker crash-1 (no topic) kills n3 -> 3 members with SR(4) edges
       5.6  n0 n1 n2 report SR(3) -> legitimate
       6.0  last event
solo:  0.5  n0 alone with label 0 -> legitimate for good

Known answers (stability window 0.5 s): time to legitimacy after start 0.3 s (news) and
0.5 s (solo); after corrupt-1 1.5 s (news only: the 0.05 s of legitimacy right after the
marker is shorter than the window); after crash-1 1.1 s (news) and 0 s (solo).
Deliveries on news: flood 10, 20, 30, 40, 50 ms; anti-entropy 500 ms and 1500 ms.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.checker import ideal_skip_ring, to_reported

BASE = 1_000_000.0
TOPIC = "news"
SOLO = "solo"
SUPERVISOR = "127.0.0.1:7000"
N = [f"127.0.0.1:{7001 + i}" for i in range(4)]
LABELS = {N[0]: "0", N[1]: "1", N[2]: "01", N[3]: "11"}
ROOT = "a1" * 16

#: Bucket end -> legitimacy of news at that instant (bucket width 0.5, 12 buckets).
NEWS_LEGIT_BY_BUCKET = [True, True, True, True, False, False, True, True, False, False, False, True]
FLOOD_MS = [10, 20, 30, 40, 50]
ANTIENTROPY_MS = [500, 1500]
CONVERGENCE = {
    ("news", "start"): 0.3,
    ("news", "corrupt-1"): 1.5,
    ("news", "crash-1"): 1.1,
    ("solo", "start"): 0.5,
    ("solo", "crash-1"): 0.0,
}


def _common(t: float, kind: str, source: str, role: str) -> dict[str, Any]:
    return {"ts": BASE + t, "kind": kind, "source": source, "role": role}


def snapshot(
    t: float,
    ref: str,
    state: dict[str, Any],
    topic: str = TOPIC,
    root: str = ROOT,
    reason: str = "change",
) -> dict[str, Any]:
    return _common(t, "snapshot", ref, "node") | {
        "topic": topic,
        "member": True,
        "leaving": False,
        "label": state["label"],
        "left": state["left"],
        "right": state["right"],
        "ring": state["ring"],
        "shortcuts": state["shortcuts"],
        "trie_root": root,
        "trie_size": 3,
        "interval": int(t * 10),
        "reason": reason,
    }


def marker(
    t: float, ident: str, action: str, targets: list[str], topic: str | None = None
) -> dict[str, Any]:
    event = _common(t, "marker", "chaos", "chaos") | {
        "id": ident,
        "action": action,
        "targets": targets,
        "params": {"seed": 7, "note": "x"},
    }
    if topic is not None:
        event["topic"] = topic
    return event


def delivery(t: float, ref: str, latency_ms: int, via: str, seq: int) -> dict[str, Any]:
    return _common(t, "delivery", ref, "node") | {
        "topic": TOPIC,
        "key": f"{seq:032x}",
        "publisher": N[0],
        "seq": seq,
        "published_ts": BASE + t - latency_ms / 1000,
        "delivered_ts": BASE + t,
        "via": via,
        "hops": 1 if via == "flood" else None,
    }


def messages(
    t: float, source: str, role: str, interval: int, sent: dict[str, int], received: dict[str, int]
) -> dict[str, Any]:
    return _common(t, "messages", source, role) | {
        "interval": interval,
        "sent": sent,
        "received": received,
        "bytes_sent": 100 * sum(sent.values()),
        "bytes_received": 100 * sum(received.values()),
        "errors": 0,
    }


def events() -> list[dict[str, Any]]:
    """Every well-formed event of the scenario (in no particular file order)."""
    sr4 = to_reported(ideal_skip_ring(LABELS))
    sr3 = to_reported(ideal_skip_ring({r: LABELS[r] for r in N[:3]}))
    wrong = dict(sr4[N[2]]) | {"right": ["11", N[3]], "shortcuts": {"0": N[0]}}
    out: list[dict[str, Any]] = [marker(0.0, "start", "start", [])]
    out += [snapshot(0.2, ref, sr4[ref]) for ref in N[:3]]
    out.append(snapshot(0.3, N[3], sr4[N[3]]))
    out.append(
        snapshot(
            0.5,
            N[0],
            {"label": "0", "left": None, "right": None, "ring": None, "shortcuts": {}},
            topic=SOLO,
            root="",
        )
    )
    out.append(marker(2.0, "corrupt-1", "corrupt_node", [N[2]], topic=TOPIC))
    out.append(snapshot(2.05, N[2], wrong))
    out.append(snapshot(3.25, N[2], sr4[N[2]], root="b2" * 16))
    out.append(snapshot(3.5, N[2], sr4[N[2]]))
    out += [snapshot(4.0, ref, sr4[ref], reason="periodic") for ref in N]
    out.append(marker(4.5, "crash-1", "crash", [N[3]]))
    out += [snapshot(5.6, ref, sr3[ref]) for ref in N[:3]]
    seq = 0
    for i, ms in enumerate(FLOOD_MS):
        seq += 1
        out.append(delivery(1.0 + i * 0.1, N[1 + i % 3], ms, "flood", seq))
    for i, ms in enumerate(ANTIENTROPY_MS):
        seq += 1
        out.append(delivery(2.5 + i, N[3], ms, "antientropy", seq))
    # supervisor: one messages event per 0.5 s interval, 3 frames sent each (SetData x2,
    # MemberIs x1) -> 6 frames/s; the nodes send 4 Check frames per interval each
    for i in range(12):
        t = 0.25 + 0.5 * i
        out.append(
            messages(
                t, SUPERVISOR, "supervisor", i, {"SetData": 2, "MemberIs": 1}, {"Subscribe": 1}
            )
        )
        out.append(messages(t, N[0], "node", i, {"Check": 4}, {"Check": 4}))
    out.append(
        _common(1.0, "status_check", "experiment", "experiment")
        | {"topic": TOPIC, "legitimate": True, "members": 4}
    )
    out.append(
        _common(2.6, "status_check", "experiment", "experiment")
        | {"topic": TOPIC, "legitimate": False, "members": 4}
    )
    out.append(
        _common(6.0, "supervisor", SUPERVISOR, "supervisor")
        | {
            "topic": TOPIC,
            "n": 3,
            "legitimate_database": True,
            "members": [["0", N[0]], ["01", N[2]], ["1", N[1]]],
            "interval": 12,
            "reason": "periodic",
        }
    )
    return out


#: Lines that must be counted as unusable and otherwise ignored.
BAD_LINES = [
    "this is not json",
    json.dumps({"ts": "yesterday", "kind": "snapshot", "source": N[0], "role": "node"}),
    json.dumps({"ts": BASE + 1.0, "kind": "gossip", "source": N[0], "role": "node"}),
    json.dumps(
        {"ts": BASE + 1.0, "kind": "snapshot", "source": N[0], "role": "node", "topic": TOPIC}
    ),
    json.dumps(
        {"ts": -5.0, "kind": "marker", "source": "chaos", "role": "chaos", "id": "m", "action": "x"}
    ),
]
BAD_COUNTS = {"malformed": 2, "unknown_kind": 1, "incomplete": 1, "bad_ts": 1}


def write_events(
    directory: Path, rows: list[dict[str, Any]], tag: str, extra_lines: list[str] = ()
) -> list[Path]:
    """Write rows as the daemons do: one file per source, written aside, renamed into place."""
    directory.mkdir(parents=True, exist_ok=True)
    per_source: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        per_source[row["source"]].append(json.dumps(row))
    if extra_lines:
        per_source["junk"].extend(extra_lines)
    written = []
    for i, (source, lines) in enumerate(sorted(per_source.items())):
        name = f"{source.replace(':', '_')}-{os.getpid()}-{tag}-{i}.jsonl"
        hidden = directory / f".{name}.tmp"
        hidden.write_text("\n".join(lines) + "\n")
        os.replace(hidden, directory / name)
        written.append(directory / name)
    return written
