"""Routing around a failed inner broker and rebuilding it, on real processes (issue 46 items 2
and 4): a 3×3 SCOT of nine broker processes on 127.0.0.1 (path a - b - c times K_3).

The publisher is at a,1 and the inner broker b,1 lies on the path to the subscriber at c,1;
other subscribers sit at c,0, b,2 and a,1 itself, every one taking every publication through
``pubsub subscribe --broker`` processes.  Three failures of b,1 in turn, each followed by a
stream of publications once every neighbour suspects it:

1. SIGSTOP, then SIGCONT; then SIGSTOP in the middle of a stream (the copies it took and
   never acknowledged go around it once suspected; its late ones are suppressed);
2. a partition (``pubsub chaos partition`` at its admin listener), healed after its duration;
3. kill -9, then a restart with empty tables.

Every subscriber holds every publication exactly once (those published while b,1 was down
went around it, through the parallel clusters), the neighbours' detour counters moved, and
after the restart every broker's tables (CLT rows with their CIVs, PRT sizes) equal those of
before the failures: the restarted b,1 rebuilt its PRT from its neighbours.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path
from typing import Any

import pytest

from broker.clisubscriber import CliSubscriber
from broker.localscot import LocalScot
from broker.topologyfile import scot3x3
from pubsub.ops.processes import poll

pytestmark = pytest.mark.integration

VICTIM = "b,1"
HOST = "a,1"
PUBLISHER = "feed"
SUBSCRIBERS = ("c,1", "c,0", "b,2", "a,1")
WAIT = 60.0
STREAM = 20


def tables(scot: LocalScot) -> dict[str, Any]:
    return {bid: (sorted((r["uid"], r["civ"], r["last_hop"]) for r in body["clt"]), body["prt_size"])
            for bid, body in scot.broker_statuses().items()}


def test_publications_go_around_a_failed_inner_broker_and_its_restart_rebuilds_its_tables(tmp_path: Path) -> None:
    events = tmp_path / "events"
    with LocalScot(tmp_path / "scot", scot3x3(), heartbeat=0.2, suspect_after=3, admin=True,
                   events_dir=events) as scot:
        neighbours = sorted(scot.topology.neighbours(VICTIM))
        out = scot.cli("advertise", "--broker", scot.address(HOST), "--client", PUBLISHER, "--filter", "seq >= 0")
        assert "advertised" in out
        subs = {bid: CliSubscriber(scot, bid, "seq >= 0") for bid in SUBSCRIBERS}
        published: list[int] = []
        try:
            poll(lambda: [b for b, s in subs.items() if not s.started], WAIT, "subscribers started")
            poll(lambda: [f"{b}: PRT {p}" for b, (_, p) in tables(scot).items() if p != 1 + (b[-1] == "1")],
                 WAIT, "every subscription in its cluster's PRTs")
            reference = tables(scot)

            def stream() -> None:
                seqs = list(range(len(published), len(published) + STREAM))
                lines = "".join(json.dumps({"seq": s}) + "\n" for s in seqs)
                scot.cli("publish", "--broker", scot.address(HOST), "--client", PUBLISHER, "--quiet", stdin=lines)
                published.extend(seqs)
                poll(lambda: [f"{b} misses {sorted(set(published) - set(s.seqs()))[:5]}"
                              for b, s in subs.items() if set(s.seqs()) != set(published)], WAIT, "deliveries")
                twice = {b: [k for k, n in s.seqs().items() if n > 1] for b, s in subs.items()}
                assert not any(twice.values()), f"delivered twice: {twice}"

            def suspected_by_all(reason: str | None) -> list[str]:
                return [f"{b}: {VICTIM} is {body['links'][VICTIM]['suspected']!r}"
                        for b, body in scot.broker_statuses(neighbours).items()
                        if (body["links"][VICTIM]["suspected"] is None) != (reason is None)]

            def detours() -> int:
                return sum(body["counters"].get("detoured_publications", 0)
                           for body in scot.broker_statuses(neighbours).values())

            stream()  # the normal paths
            assert detours() == 0

            scot.kill_broker(VICTIM, signal.SIGSTOP)
            try:
                poll(lambda: suspected_by_all("silent"), WAIT, f"every neighbour suspecting the hung {VICTIM}", 0.1)
                stream()
                assert detours() >= STREAM
            finally:
                scot.kill_broker(VICTIM, signal.SIGCONT)
            poll(lambda: suspected_by_all(None), WAIT, f"{VICTIM} cleared")
            stream()

            # Hung in the middle of a stream: the copies it took and never acknowledged go around
            # it once it is suspected; when it runs again, its late copies are suppressed.
            scot.kill_broker(VICTIM, signal.SIGSTOP)
            try:
                stream()
            finally:
                scot.kill_broker(VICTIM, signal.SIGCONT)
            poll(lambda: suspected_by_all(None), WAIT, f"{VICTIM} cleared")
            poll(lambda: [] if sum(body["counters"].get("suppressed_duplicates", 0)
                                   for body in scot.broker_statuses().values()) else ["none yet"],
                 WAIT, f"the late copies of {VICTIM} suppressed")
            stream()

            went_around = detours()
            scot.cli("chaos", "partition", "--admin", scot.admin_ref(VICTIM), "--duration", "6")
            poll(lambda: suspected_by_all("silent"), WAIT, f"every neighbour suspecting the cut-off {VICTIM}", 0.1)
            stream()
            assert detours() >= went_around + STREAM
            poll(lambda: suspected_by_all(None), WAIT, f"{VICTIM} cleared after the heal")
            stream()

            scot.kill_broker(VICTIM)  # kill -9
            poll(lambda: suspected_by_all("any"), WAIT, f"every neighbour suspecting the killed {VICTIM}", 0.1)
            stream()
            scot.restart_broker(VICTIM)
            poll(lambda: suspected_by_all(None), WAIT, f"the restarted {VICTIM} heard by every neighbour")
            poll(lambda: [f"{b}: {now} != {reference[b]}" for b, now in tables(scot).items() if now != reference[b]],
                 WAIT, "every table as before the failures")
            stream()
        finally:
            for sub in subs.values():
                sub.stop()
        assert all(s.proc.returncode in (0, -2, 130) for s in subs.values()), [s.errors[-3:] for s in subs.values()]
    # The neighbours' event streams show the suspicion and the detours (docs/events.md, `broker`).
    seen = [json.loads(line) for path in sorted(events.glob("*.jsonl")) for line in path.read_text().splitlines()]
    failures = [e["failures"] for e in seen if e.get("kind") == "broker" and e.get("broker") in neighbours]
    assert any(f["suspected"] == [VICTIM] and f["detoured_publications"] > 0 for f in failures), failures[-3:]
    assert any(f["prt_syncs_applied"] > 0 for f in failures)


def normalised(scot: LocalScot) -> dict[str, Any]:
    """`tables`, with each id's start epoch left out (a restarted broker makes its clients'
    advertisements and subscriptions again, under ids of its new start)."""
    return {bid: (sorted((re.sub(r"/[0-9a-z]+\.", "/", u), c, h) for u, c, h in rows), prt)
            for bid, (rows, prt) in tables(scot).items()}


def test_a_restarted_broker_keeps_its_clients_advertisement_and_session(tmp_path: Path) -> None:
    """kill -9 of b,1, which hosts a publisher and a subscriber: after the restart the publisher
    publishes without advertising again, the subscriber's `pubsub subscribe` goes on after a
    gap notice, and every table is as before (ids aside)."""
    with LocalScot(tmp_path / "scot", scot3x3(), heartbeat=0.2, suspect_after=3) as scot:
        assert "advertised" in scot.cli("advertise", "--broker", scot.address(VICTIM), "--client", "local",
                                         "--filter", "seq >= 0")
        assert "advertised" in scot.cli("advertise", "--broker", scot.address(HOST), "--client", PUBLISHER,
                                         "--filter", "seq >= 0")
        subs = {bid: CliSubscriber(scot, bid, "seq >= 0", retry_for=WAIT) for bid in ("c,1", VICTIM)}
        published: list[int] = []
        try:
            poll(lambda: [b for b, s in subs.items() if not s.started], WAIT, "subscribers started")
            poll(lambda: [f"{b}: PRT {p}" for b, (_, p) in tables(scot).items() if p != (2 if b[-1] == "1" else 0)],
                 WAIT, "every subscription in its cluster's PRTs")
            reference = normalised(scot)

            def publish(at: str, client: str, count: int) -> list[int]:
                seqs = list(range(len(published), len(published) + count))
                lines = "".join(json.dumps({"seq": s}) + "\n" for s in seqs)
                scot.cli("publish", "--broker", scot.address(at), "--client", client, "--quiet", stdin=lines)
                published.extend(seqs)
                return seqs

            def holds(bid: str, seqs: list[int]) -> None:
                poll(lambda: [f"{bid} misses {sorted(set(seqs) - set(subs[bid].seqs()))[:5]}"]
                     if not set(seqs) <= set(subs[bid].seqs()) else [], WAIT, f"deliveries at {bid}")

            before = publish(HOST, PUBLISHER, 10)
            holds("c,1", before)
            holds(VICTIM, before)
            scot.kill_broker(VICTIM)  # kill -9
            down = publish(HOST, PUBLISHER, 10)  # around b,1 to c,1; b,1's own subscriber misses them
            holds("c,1", down)
            scot.restart_broker(VICTIM)
            poll(lambda: [] if any("resumed the session" in e for e in subs[VICTIM].errors)
                 and any("gap: an unknown number of deliveries lost (broker_restarted)" in e
                         for e in subs[VICTIM].errors) else subs[VICTIM].errors[-2:],
                 WAIT, "the subscriber at the restarted broker resuming its session, with a gap notice")
            poll(lambda: [f"{b}: {now} != {reference[b]}" for b, now in normalised(scot).items()
                          if now != reference[b]], WAIT, "every table as before the failure, ids aside")
            local = publish(VICTIM, "local", 10)  # no new advertisement
            after = publish(HOST, PUBLISHER, 10)
            holds("c,1", local + after)
            holds(VICTIM, local + after)
            for bid, sub in subs.items():
                twice = [k for k, n in sub.seqs().items() if n > 1]
                assert not twice, f"{bid} got {twice} twice"
            assert not set(down) & set(subs[VICTIM].seqs())
            assert subs[VICTIM].proc.poll() is None, "the subscriber's command went on"
        finally:
            for sub in subs.values():
                sub.stop()
