"""What anti-entropy costs to repair d missing publications out of N (paper 000 §4.2, Alg. 5).

Two `AntiEntropy` cores, u and v, are driven directly: no simulator, no network.  u holds N
publications, v the same publications minus d random ones.  Anti-entropy rounds run until
both roots are equal; every message is delivered as soon as it is sent (FIFO), and every
message is encoded with `pubsub.kernel.wire.encode` to count its bytes (the 4-byte frame header
included).  For N in {10^4, 10^5, 10^6} and d in {1, 10, 100, 1000}, and for each side
starting the first round, the table reports

  messages     every CheckTrie, CheckAndPublish and Publish of the exchange
  bytes        sum of len(wire.encode(msg)) over those messages
  hops         the longest causal chain of messages: a round's PublishTimeout message is
               hop 1, and a message sent while handling a message of hop h is hop h + 1.
               With several rounds, the rounds' longest chains are added up (a round only
               starts after the previous one has ended).  This is the exchange's latency
               in one-way message delays.
  round trips  ceil(hops / 2), summed over rounds: latency in request/response pairs
  rounds       PublishTimeouts until the two roots are equal; the starting side alternates
               (round 1 by the "starts" side, round 2 by the other, ...).  A round whose
               starter has an empty trie sends nothing (Alg. 5 as implemented skips it) but
               still counts.  One round is not always enough: a CheckTrie chain only finds
               a difference at the side that *lacks* a node label, and which side receives
               a given level of the tries alternates hop by hop, so a missing publication
               whose differing level has the wrong parity for this starter is found only
               in a round started by the other side (the paper's Figure 2 example and the
               parity argument in the proof of Lemma 5.24).
  pubs sent    publications carried by the Publish messages (d when nothing is sent twice)

next to the cost of sending the whole set instead: N publications in the Publish batches
the core builds itself (what it answers to CheckAndPublish((), ⊥)), and the ratio
full-set bytes / repair bytes.

Publications have 32..100 random payload bytes, 16 publishers with their own sequence
numbers, and keys from `publication_key`.  u's trie is built by inserting every
publication; v is a structural copy of a trie built once from N - max(d) of the same
publication objects (hashes, labels and publications shared, nodes copied), plus the
max(d) - d publications it needs for this d.  The copy is checked against a trie built by
plain insertion in tests/bench/test_bench_antientropy.py, and every run checks that v ends with
exactly u's keys.  Build time and resident memory are reported per N.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import resource
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.machine import machine
from pubsub.kernel import wire
from pubsub.kernel.message import Ref, Send, Topic
from pubsub.publications.antientropy import AntiEntropy
from pubsub.publications.messages import CheckAndPublish, Publication, Publish
from pubsub.publications.topicstate import make_publication
from pubsub.publications.trie import EMPTY_LABEL

TOPIC = Topic("bench")
U = Ref("10.0.1.1:7000")
V = Ref("10.0.1.2:7000")
PUBLISHERS = [Ref(f"10.0.0.{i}:7000") for i in range(1, 17)]
PAYLOAD_BYTES = (32, 100)
SIZES = (10**4, 10**5, 10**6)
QUICK_SIZES = (10**3, 10**4)
MISSING = (1, 10, 100, 1000)
#: A repair that has not converged after this many rounds is a bug, not a measurement.
MAX_ROUNDS = 64
RESULTS = Path("bench-results")

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@contextmanager
def _no_gc():
    """Millions of long-lived objects: keep the cyclic collector out of the build times."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def rss_mb() -> float:
    """Current resident set size in MiB (Linux /proc; the peak elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------- building the tries
def make_publications(n: int, rng: random.Random) -> list[Publication]:
    """n publications: 16 publishers round-robin, 32..100 random payload bytes each."""
    lo, hi = PAYLOAD_BYTES
    npub = len(PUBLISHERS)
    return [
        make_publication(PUBLISHERS[i % npub], i // npub, rng.randbytes(rng.randint(lo, hi)))
        for i in range(n)
    ]


def build_core(
    ref: Ref, publications: Sequence[Publication], progress: Progress = _quiet, what: str = ""
) -> AntiEntropy:
    """A core holding `publications`, inserted one by one."""
    core = AntiEntropy(ref, TOPIC)
    step = max(len(publications) // 10, 1)
    with _no_gc():
        for i, publication in enumerate(publications, 1):
            core.store(publication)
            if i % step == 0 and len(publications) >= 100_000:
                progress(f"  {what}: {i:,} / {len(publications):,} inserted")
            if len(core.new) >= 65536:
                core.drain_new()
    core.drain_new()
    return core


def clone_core(src: AntiEntropy, ref: Ref) -> AntiEntropy:
    """A fresh core (own counters) whose trie is a structural copy of `src`'s."""
    core = AntiEntropy(
        ref,
        src.topic,
        key_bits=src.key_bits,
        batch_publications=src.batch_publications,
        batch_bytes=src.batch_bytes,
    )
    core.trie = src.trie.copy()
    return core


# ---------------------------------------------------------------------- one repair
@dataclass
class Exchange:
    """The traffic of a sequence of anti-entropy rounds between two cores."""

    messages: int = 0
    bytes: int = 0
    hops: int = 0
    round_trips: int = 0
    rounds: int = 0
    publications_sent: int = 0
    digests_sent: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    bytes_by_kind: Counter[str] = field(default_factory=Counter)
    converged: bool = False


def run_round(cores: dict[Ref, AntiEntropy], first: list[Send], cost: Exchange) -> int:
    """Deliver `first` and everything it causes, FIFO; add to `cost`; the round's hops."""
    queue = deque((send, 1) for send in first)
    longest = 0
    while queue:
        (dest, msg), hop = queue.popleft()
        longest = max(longest, hop)
        size = len(wire.encode(msg))
        cost.messages += 1
        cost.bytes += size
        cost.by_kind[msg.kind] += 1
        cost.bytes_by_kind[msg.kind] += size
        if isinstance(msg, Publish):
            cost.publications_sent += len(msg.publications)
        else:
            cost.digests_sent += len(msg.tuples)  # type: ignore[attr-defined]
        queue.extend((send, hop + 1) for send in cores[dest].handle(msg))
    return longest


def repair(
    u: AntiEntropy, v: AntiEntropy, starts: str, rng: random.Random, max_rounds: int = MAX_ROUNDS
) -> Exchange:
    """Anti-entropy rounds between u and v until their roots are equal.

    Round 1 is started by `starts` ("u" or "v"), then the sides alternate.
    """
    if starts not in ("u", "v"):
        raise ValueError(f"starts must be 'u' or 'v', got {starts!r}")
    cores = {u.ref: u, v.ref: v}
    order = (u, v) if starts == "u" else (v, u)
    cost = Exchange()
    while u.trie.root() != v.trie.root():
        if cost.rounds >= max_rounds:
            return cost
        starter, other = order[cost.rounds % 2], order[(cost.rounds + 1) % 2]
        first = starter.publish_timeout([other.ref])
        cost.rounds += 1
        hops = run_round(cores, first, cost)
        cost.hops += hops
        cost.round_trips += math.ceil(hops / 2)
    cost.converged = True
    return cost


def full_set_cost(u: AntiEntropy, dest: Ref) -> tuple[int, int]:
    """(messages, bytes) of sending u's whole set to `dest` in u's own Publish batches.

    This is what u answers to CheckAndPublish((), ⊥): every publication, batched.
    """
    messages = size = 0
    for _, msg in u.handle(CheckAndPublish(TOPIC, dest, [], EMPTY_LABEL)):
        assert isinstance(msg, Publish)
        messages += 1
        size += len(wire.encode(msg))
    return messages, size


def same_keys(a: AntiEntropy, b: AntiEntropy) -> bool:
    """Whether the two tries hold exactly the same keys (walked, not just root hashes)."""
    return len(a.trie) == len(b.trie) and all(
        x == y for x, y in zip(a.trie.keys(), b.trie.keys(), strict=True)
    )


# ---------------------------------------------------------------------- one N
def measure(
    n: int,
    missing: Sequence[int] = MISSING,
    seed: int = 0,
    starts: Sequence[str] = ("u", "v"),
    progress: Progress = _quiet,
) -> dict:
    """Build u (n publications) and, per d, v (n - d); repair; return the rows and build info.

    The missing sets are nested (the first d of one random order), so one base trie of
    n - max(d) serves every d.  Each row says whether v ended with exactly u's keys.
    """
    ds = sorted({d for d in missing if 0 <= d <= n})
    rng = random.Random(seed)
    info: dict[str, object] = {"n": n, "rss_start_mb": round(rss_mb(), 1)}

    began = time.perf_counter()
    publications = make_publications(n, rng)
    info["publications_s"] = round(time.perf_counter() - began, 2)
    info["rss_publications_mb"] = round(rss_mb(), 1)
    progress(f"N={n:,}: {n:,} publications in {info['publications_s']} s")

    began = time.perf_counter()
    u = build_core(U, publications, progress, "u")
    info["u_build_s"] = round(time.perf_counter() - began, 2)
    info["rss_with_u_mb"] = round(rss_mb(), 1)
    info["trie_depth"] = u.trie.depth()
    progress(f"N={n:,}: u built in {info['u_build_s']} s (depth {info['trie_depth']})")

    dmax = max(ds, default=0)
    order = rng.sample(range(n), dmax)
    dropped = set(order)
    began = time.perf_counter()
    base = build_core(V, [p for i, p in enumerate(publications) if i not in dropped], progress, "v")
    info["v_base_build_s"] = round(time.perf_counter() - began, 2)
    info["rss_with_u_and_v_mb"] = round(rss_mb(), 1)
    progress(f"N={n:,}: v base (N - {dmax}) built in {info['v_base_build_s']} s")

    full_messages, full_bytes = full_set_cost(u, V)
    info["full_set_messages"] = full_messages
    info["full_set_bytes"] = full_bytes

    rows = []
    clone_s = []
    for d in ds:
        for side in starts:
            began = time.perf_counter()
            v = clone_core(base, V)
            with _no_gc():
                for i in order[d:]:
                    v.store(publications[i])
            v.drain_new()
            clone_s.append(time.perf_counter() - began)
            assert len(v.trie) == n - d
            began = time.perf_counter()
            cost = repair(u, v, side, random.Random(seed))
            seconds = time.perf_counter() - began
            complete = cost.converged and same_keys(u, v)
            row = {
                "n": n,
                "d": d,
                "starts": side,
                "messages": cost.messages,
                "bytes": cost.bytes,
                "hops": cost.hops,
                "round_trips": cost.round_trips,
                "rounds": cost.rounds,
                "publications_sent": cost.publications_sent,
                "digests_sent": cost.digests_sent,
                "by_kind": dict(cost.by_kind),
                "bytes_by_kind": dict(cost.bytes_by_kind),
                "full_set_messages": full_messages,
                "full_set_bytes": full_bytes,
                "full_over_repair_bytes": round(full_bytes / cost.bytes, 1) if cost.bytes else None,
                "v_after": len(v.trie),
                "complete": complete,
                "repair_s": round(seconds, 3),
            }
            rows.append(row)
            del v
    info["v_copy_s_mean"] = round(sum(clone_s) / len(clone_s), 2) if clone_s else None
    info["rss_peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    del u, base, publications
    gc.collect()
    return {"build": info, "rows": rows}


# ---------------------------------------------------------------------- command line
HEADER = (
    f"{'N':>9}{'d':>6}{'starts':>7}{'messages':>10}{'bytes':>11}{'hops':>6}{'RTs':>5}"
    f"{'rounds':>7}{'pubs':>6}{'full msgs':>11}{'full bytes':>13}{'full/repair':>13}{'ok':>4}"
)


def format_row(row: dict) -> str:
    ratio = row["full_over_repair_bytes"]
    return (
        f"{row['n']:>9,}{row['d']:>6}{row['starts']:>7}{row['messages']:>10,}{row['bytes']:>11,}"
        f"{row['hops']:>6}{row['round_trips']:>5}{row['rounds']:>7}{row['publications_sent']:>6}"
        f"{row['full_set_messages']:>11,}{row['full_set_bytes']:>13,}"
        f"{'-' if ratio is None else f'{ratio:,.1f}x':>13}{'yes' if row['complete'] else 'NO':>4}"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench antientropy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help=f"N in {QUICK_SIZES} only")
    parser.add_argument("--sizes", type=int, nargs="+", help=f"N values (default {SIZES})")
    parser.add_argument("--missing", type=int, nargs="+", help=f"d values (default {MISSING})")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    missing = args.missing or MISSING

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    RESULTS.mkdir(exist_ok=True)
    info = machine()
    print(f"Anti-entropy repair of d missing publications out of N -- {info}")
    print("RTs = round trips = ceil(hops / 2); pubs = publications sent; full/repair = bytes")
    print()
    print(HEADER)
    print("-" * len(HEADER), flush=True)
    results = []
    for n in sizes:
        result = measure(n, missing, args.seed, progress=progress)
        results.append(result)
        for row in result["rows"]:
            print(format_row(row), flush=True)
    print()
    print("Building the tries (seconds, resident MiB after each step)")
    for result in results:
        b = result["build"]
        print(
            f"  N={b['n']:<9,} publications {b['publications_s']:>6} s"
            f"  u {b['u_build_s']:>6} s  v base {b['v_base_build_s']:>6} s"
            f"  v copy {b['v_copy_s_mean']} s   depth {b['trie_depth']}"
            f"   RSS {b['rss_start_mb']} -> {b['rss_publications_mb']} (publications)"
            f" -> {b['rss_with_u_mb']} (u) -> {b['rss_with_u_and_v_mb']} (v) MiB",
            flush=True,
        )
    default = args.sizes is None and args.missing is None and not args.quick and args.seed == 0
    out = RESULTS / f"antientropy{'' if default else '-partial'}.json"
    out.write_text(
        json.dumps(
            {
                "machine": info,
                "definitions": {
                    "hops": "longest causal chain of messages per round (the round's first "
                    "message is hop 1), summed over rounds",
                    "round_trips": "ceil(hops / 2) per round, summed over rounds",
                    "bytes": "sum of len(pubsub.kernel.wire.encode(msg)), frame header included",
                    "full_set": "the Publish batches u sends for CheckAndPublish((), ⊥)",
                },
                "results": results,
            },
            indent=2,
        )
    )
    print(f"\nwritten to {out}")
    if not all(row["complete"] for result in results for row in result["rows"]):
        raise SystemExit("some repair did not leave v with exactly u's publications")
