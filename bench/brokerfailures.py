"""The SCOT broker daemon's failure handling on real processes: detection, delivery, recovery.

    python -m bench broker-failures [--quick] [--trials N] [options]

One 3x3 SCOT (`broker.localscot.LocalScot` over `broker.topologyfile.scot3x3`: the path
a - b - c times K_3, nine broker processes on 127.0.0.1, heartbeat 0.2 s, suspect after 3
silent periods, so the detection bound is 0.6 s) is started once.  The victim is the inner
broker b,1, whose neighbours are a,1, b,0, b,2 and c,1.  A publisher (client id ``feed``,
advertised once at a,1 with ``pubsub advertise``) and three long-running subscribers
(``pubsub subscribe --broker ... --filter "seq >= 0" --json`` processes at c,1 -- whose path
from a,1 crosses b,1 --, c,0 and b,2) are started once; a few warm-up publications make sure
every subscription has settled.

Then `--trials` trials of each fault kind, interleaved trial by trial (stop, partition,
kill, stop, partition, kill, ...):

* ``stop``: SIGSTOP to b,1; SIGCONT once the trial's stream is delivered;
* ``partition``: the admin request ``pubsub chaos partition --admin <b,1's admin> --duration
  D`` sends (`pubsub.runtime.admin.admin_request`, sent from this process so that the moment
  of the fault is known to the millisecond rather than after a CLI's start-up), cutting b,1
  off from every other broker for D seconds (--partition-s), after which it heals by itself;
* ``kill``: kill -9 of b,1; `LocalScot.restart_broker` once the stream is delivered (a new
  process with empty tables, which rebuilds them from its neighbours).

Each trial: the publisher (`broker.client.BrokerClient` at a,1, in a thread of its own)
publishes --publications publications ``{"seq": n}`` evenly over --stream-s seconds; the
fault is applied --lead-s after the first.  Measured:

1. detection: from the fault until every neighbour of b,1 reports it suspected in its status
   (``links["b,1"]["suspected"]``; the neighbours' statuses asked concurrently about every
   --poll-s).  The time is taken when the first status round showing all four suspecting
   returns, so it includes that round's latency (a status request is a TCP connection, a
   handshake and a few kilobytes of JSON; the mean round is reported); the earliest it could
   have happened is the start of the round before (``detection_lower_s`` in the JSON).  The
   daemon sends heartbeats and checks its detector from the runtime's Timeout (0.3 s by
   default), so heartbeats go every max(--heartbeat, 0.3 s) -- measured once at the start
   and recorded -- and a silent neighbour is suspected at the first Timeout more than the
   bound after its last heartbeat: between bound - period and bound + Timeout interval after
   the fault (0.3 to 0.9 s here).  A killed broker's refused connects are suspected at once;
2. delivery: every subscriber must end with every publication of the trial exactly once.
   *lost*: publications missing at some subscriber after the bounded wait (--wait-s while
   the fault holds, then again --wait-s after the recovery); *late*: publications that were
   still missing at some subscriber when the in-fault wait ended but arrived after the
   recovery (not lost, but not routed around the fault either); *duplicated*: publications
   delivered more than once to some subscriber (counted when the trial ends, and again when
   the run ends, for copies that arrive later still).  Also the counters
   ``rerouted_unacknowledged``, ``detoured_publications`` and ``suppressed_duplicates``
   summed over the eight brokers other than b,1 (b,1's own, which a kill resets, apart);
3. recovery: from SIGCONT / the partition's end (request sent + D) / the restart call until
   no neighbour suspects b,1 any more; for kill, also until every broker's tables (sorted
   (uid, civ, last_hop) of ``status["clt"]`` and ``status["prt_size"]``) equal those before
   the trial, and the time the restarted process took to answer ``status``.

Every wait is bounded (--wait-s); a trial that times out is recorded with its error and the
run goes on once b,1 is back and nobody suspects it, or stops if that fails.  Results:
``bench-results/broker-failures.json`` (``broker-failures-quick.json`` with --quick), with
the machine, every parameter and every trial.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.machine import machine
from broker.client import BrokerClient
from broker.clisubscriber import CliSubscriber
from broker.localscot import LocalScot
from broker.topologyfile import scot3x3
from pubsub.ops.processes import ClusterError, poll
from pubsub.runtime.admin import admin_request
from pubsub.runtime.adminparams import new_marker_id
from pubsub.runtime.settings import RuntimeSettings

RESULTS = Path("bench-results")
ROOT = Path(__file__).resolve().parent.parent
VICTIM = "b,1"
HOST = "a,1"
PUBLISHER = "feed"
FILTER = "seq >= 0"
SUBSCRIBERS = ("c,1", "c,0", "b,2")
KINDS = ("stop", "partition", "kill")
HEARTBEAT = 0.2
SUSPECT_AFTER = 3
COUNTERS = ("rerouted_unacknowledged", "detoured_publications", "suppressed_duplicates")
DAEMON_COUNTERS = ("suspicions_silent", "suspicions_refused", "suspicions_cleared", "restarts_noticed")
#: The runtime's default Timeout interval; the broker daemon sends heartbeats and checks its
#: detector from the Timeout, so neither happens more often than this.
TIMEOUT_INTERVAL: float = RuntimeSettings.model_fields["timeout_interval"].default
#: Trial publications are numbered from here (the warm-up ones below it).
FIRST_SEQ = 1000


@dataclass(frozen=True)
class Config:
    trials: int = 20
    publications: int = 50
    stream_s: float = 2.0
    lead_s: float = 0.2
    poll_s: float = 0.02
    partition_s: float = 4.0
    settle_s: float = 1.0
    wait_s: float = 30.0


class TrialError(Exception):
    """A bounded wait of a trial ran out."""


# --- clients ------------------------------------------------------------------------------------
def subscriber(scot: LocalScot, bid: str) -> CliSubscriber:
    """``pubsub subscribe --broker B --filter F --json`` as a process (`broker.clisubscriber`)."""
    return CliSubscriber(scot, bid, FILTER, retry_for=30.0, python=scot.python, cwd=ROOT)


class Stream(threading.Thread):
    """One trial's publications from a `BrokerClient` at the publisher's host, evenly spaced,
    on an event loop of its own."""

    def __init__(self, address: str, seqs: list[int], interval: float, timeout: float) -> None:
        super().__init__(daemon=True)
        self.address, self.seqs, self.interval, self.timeout = address, seqs, interval, timeout
        self.began = threading.Event()
        self.began_at = 0.0
        self.sent: dict[int, float] = {}
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            asyncio.run(self._run())
        except Exception as exc:  # noqa: BLE001 - recorded; the trial reports it
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.began.set()

    async def _run(self) -> None:
        async with BrokerClient(self.address, client_id=PUBLISHER, timeout=self.timeout) as client:
            start = time.monotonic()
            self.began_at = start
            self.began.set()
            for k, seq in enumerate(self.seqs):
                delay = start + k * self.interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                at = time.monotonic()
                try:
                    await client.publish({"seq": seq})
                except Exception as exc:  # noqa: BLE001 - recorded per publication
                    self.errors.append(f"seq {seq}: {type(exc).__name__}: {exc}")
                    continue
                self.sent[seq] = at


# --- observing the SCOT ---------------------------------------------------------------------------
@dataclass
class Watched:
    at: float  # when the first round without problems returned
    earliest: float  # when the round before it started (the condition held no earlier)
    rounds: int
    mean_round_s: float


def watch(problems: Callable[[], list[str]], timeout: float, interval: float, what: str) -> Watched:
    """Evaluate `problems` a round every `interval` seconds (or back to back when a round
    takes longer) until it returns []; TrialError after `timeout`."""
    began = time.monotonic()
    deadline = began + timeout
    previous = began
    rounds, spent = 0, 0.0
    while True:
        start = time.monotonic()
        try:
            found = problems()
        except ClusterError as exc:
            found = [str(exc).splitlines()[0]]
        end = time.monotonic()
        rounds += 1
        spent += end - start
        if not found:
            return Watched(end, previous, rounds, spent / rounds)
        if end > deadline:
            raise TrialError(f"timed out after {timeout:g} s waiting for {what}: {'; '.join(found[:4])}")
        previous = start
        time.sleep(max(0.0, interval - (end - start)))


def tables(scot: LocalScot) -> dict[str, Any]:
    """Per broker: sorted (uid, civ, last_hop) of its CLT and its PRT size."""
    return {bid: [sorted((r["uid"], r["civ"], r["last_hop"]) for r in body["clt"]), body["prt_size"]]
            for bid, body in scot.broker_statuses().items()}


def counters(scot: LocalScot) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for bid, body in scot.broker_statuses().items():
        row = {k: int(body.get("counters", {}).get(k, 0)) for k in COUNTERS}
        row.update({k: int(body.get("daemon_counters", {}).get(k, 0)) for k in DAEMON_COUNTERS})
        out[bid] = row
    return out


def counter_deltas(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]],
                   restarted: bool) -> dict[str, Any]:
    keys = COUNTERS + DAEMON_COUNTERS
    others = {k: sum(after[b][k] - before[b][k] for b in after if b != VICTIM) for k in keys}
    victim = {k: after[VICTIM][k] - (0 if restarted else before[VICTIM][k]) for k in keys}
    return {"others": others, "victim": victim}


def miss_and_twice(subs: dict[str, CliSubscriber], seqs: list[int]) -> dict[str, Any]:
    """Per subscriber the seqs of `seqs` it misses and those it got more than once."""
    wanted = set(seqs)
    missing: dict[str, list[int]] = {}
    twice: dict[str, dict[int, int]] = {}
    for bid, sub in subs.items():
        got = sub.seqs()
        missing[bid] = sorted(wanted - set(got))
        twice[bid] = {s: n for s, n in sorted(got.items()) if s in wanted and n > 1}
    return {
        "lost": len(set().union(*missing.values())),
        "duplicated": len(set().union(*(set(t) for t in twice.values()))),
        "extra_copies": sum(n - 1 for t in twice.values() for n in t.values()),
        "missing": {b: m for b, m in missing.items() if m},
        "twice": {b: {str(s): n for s, n in t.items()} for b, t in twice.items() if t},
    }


# --- one trial ----------------------------------------------------------------------------------
class Trials:
    def __init__(self, scot: LocalScot, subs: dict[str, CliSubscriber], cfg: Config) -> None:
        self.scot, self.subs, self.cfg = scot, subs, cfg
        self.neighbours = sorted(scot.topology.neighbours(VICTIM))
        self.next_seq = FIRST_SEQ

    def suspecting(self, suspected: bool) -> Callable[[], list[str]]:
        """Problems while not every neighbour suspects (`suspected`) / has cleared b,1."""

        def problems() -> list[str]:
            found = []
            for bid, body in self.scot.broker_statuses(self.neighbours).items():
                reason = body["links"][VICTIM]["suspected"]
                if (reason is not None) != suspected:
                    found.append(f"{bid}: {VICTIM} is {reason!r}")
            return found

        return problems

    def reasons(self) -> dict[str, Any]:
        return {b: body["links"][VICTIM]["suspected"] for b, body in self.scot.broker_statuses(self.neighbours).items()}

    def delivered(self, seqs: list[int]) -> Callable[[], list[str]]:
        def problems() -> list[str]:
            wanted = set(seqs)
            return [f"{b} misses {len(wanted - set(s.seqs()))}" for b, s in self.subs.items()
                    if not wanted <= set(s.seqs())]

        return problems

    def quiet(self) -> list[str]:
        """Problems while some broker suspects some neighbour."""
        return [f"{b} suspects {body['suspected']}" for b, body in sorted(self.scot.broker_statuses().items())
                if body.get("suspected")]

    def fault(self, kind: str) -> tuple[float, dict[str, Any]]:
        """Apply the fault; the moment it was applied (or its request sent) and what to record."""
        scot = self.scot
        if kind == "stop":
            at = time.monotonic()
            scot.kill_broker(VICTIM, signal.SIGSTOP)
            return at, {}
        if kind == "kill":
            at = time.monotonic()
            scot.kill_broker(VICTIM)
            return at, {"reaped_s": round(time.monotonic() - at, 4)}
        admin = scot.admin_ref(VICTIM)
        info = asyncio.run(admin_request(admin, "info"))
        params = {"duration": self.cfg.partition_s, "marker_id": new_marker_id("partition"), "record": True,
                  "members": [str(info.get("ref"))]}
        at = time.monotonic()
        asyncio.run(admin_request(admin, "partition", params))
        return at, {"admin_request_s": round(time.monotonic() - at, 4)}

    def recover(self, kind: str, fault_at: float) -> tuple[float, dict[str, Any]]:
        """End the fault; the moment it ended (or the restart began) and what to record."""
        if kind == "stop":
            at = time.monotonic()
            self.scot.kill_broker(VICTIM, signal.SIGCONT)
            return at, {}
        if kind == "partition":
            at = fault_at + self.cfg.partition_s
            time.sleep(max(0.0, at - time.monotonic()))
            return at, {}
        at = time.monotonic()
        self.scot.restart_broker(VICTIM)
        return at, {"restart_answering_s": round(time.monotonic() - at, 3)}

    def run(self, kind: str, index: int) -> dict[str, Any]:
        cfg, scot = self.cfg, self.scot
        seqs = list(range(self.next_seq, self.next_seq + cfg.publications))
        self.next_seq += cfg.publications
        rec: dict[str, Any] = {"kind": kind, "trial": index, "seqs": [seqs[0], seqs[-1]]}
        before_tables = tables(scot)
        before_counters = counters(scot)
        stream = Stream(scot.address(HOST), seqs, cfg.stream_s / cfg.publications, cfg.wait_s)
        stream.start()
        faulted = False
        fault_at = recovered_at = 0.0
        errors: list[str] = []
        try:
            if not stream.began.wait(cfg.wait_s) or stream.errors:
                raise TrialError(f"the publisher did not start: {stream.errors[:2]}")
            time.sleep(max(0.0, stream.began_at + cfg.lead_s - time.monotonic()))
            fault_at, info = self.fault(kind)
            faulted = True
            rec.update(info)
            rec["fault_after_first_publication_s"] = round(fault_at - stream.began_at, 4)
            try:
                seen = watch(self.suspecting(True), cfg.wait_s, cfg.poll_s, f"every neighbour suspecting {VICTIM}")
                rec["detection_s"] = round(seen.at - fault_at, 4)
                rec["detection_lower_s"] = round(max(0.0, seen.earliest - fault_at), 4)
                rec["status_rounds"] = seen.rounds
                rec["status_round_s"] = round(seen.mean_round_s, 4)
                rec["suspected"] = self.reasons()
            except TrialError as exc:
                errors.append(str(exc))
            stream.join(cfg.stream_s + cfg.wait_s)
            if stream.is_alive():
                errors.append("the publisher did not finish")
            sent = sorted(stream.sent)
            try:
                done = watch(self.delivered(sent), cfg.wait_s, 0.05, "every publication at every subscriber")
                rec["delivered_in_fault_s"] = round(done.at - fault_at, 3)
            except TrialError as exc:
                rec["delivered_in_fault_s"] = None
                errors.append(f"while faulted: {exc}")
            rec["missing_in_fault"] = miss_and_twice(self.subs, sent)["lost"]
        finally:
            if faulted:
                recovered_at, info = self.recover(kind, fault_at)
                rec.update(info)
                rec["fault_held_s"] = round(recovered_at - fault_at, 3)
            stream.join(cfg.wait_s)
        rec["published"] = len(stream.sent)
        rec["publish_errors"] = stream.errors[:5]
        try:
            seen = watch(self.suspecting(False), cfg.wait_s, cfg.poll_s, f"no neighbour suspecting {VICTIM}")
            rec["recovery_s"] = round(seen.at - recovered_at, 4)
        except TrialError as exc:
            rec["recovery_s"] = None
            errors.append(str(exc))
        if kind == "kill":
            try:
                seen = watch(lambda: [f"{b}: {now} != {before_tables[b]}" for b, now in tables(scot).items()
                                      if now != before_tables[b]], cfg.wait_s, 0.05, "every table as before the trial")
                rec["tables_restored_s"] = round(seen.at - recovered_at, 4)
            except TrialError as exc:
                rec["tables_restored_s"] = None
                errors.append(str(exc))
        time.sleep(cfg.settle_s)
        sent = sorted(stream.sent)
        if rec.get("missing_in_fault"):
            try:
                watch(self.delivered(sent), cfg.wait_s, 0.05, "every publication at every subscriber, after recovery")
            except TrialError as exc:
                errors.append(str(exc))
        tally = miss_and_twice(self.subs, sent)
        rec.update({k: tally[k] for k in ("lost", "duplicated", "extra_copies")})
        rec["late"] = rec.get("missing_in_fault", 0) - tally["lost"]
        rec["missing"], rec["twice"] = tally["missing"], tally["twice"]
        rec["max_delivery_s"] = max_delivery(self.subs, stream.sent)
        rec["tables_as_before"] = tables(scot) == before_tables
        rec["counters"] = counter_deltas(before_counters, counters(scot), restarted=kind == "kill")
        try:
            poll(self.quiet, cfg.wait_s, "no broker suspecting any neighbour", 0.1)
        except ClusterError as exc:
            errors.append(str(exc).splitlines()[0])
        rec["errors"] = errors
        return rec


def max_delivery(subs: dict[str, CliSubscriber], sent: dict[int, float]) -> float | None:
    """The longest time from a publish call to the publication's first arrival at a
    subscriber (as this process read it), over the trial's publications and subscribers."""
    worst = None
    for sub in subs.values():
        first = sub.first_arrivals()
        for seq, at in sent.items():
            if seq in first:
                worst = max(worst or 0.0, first[seq] - at)
    return None if worst is None else round(worst, 4)


# --- the run ------------------------------------------------------------------------------------
def warm_up(scot: LocalScot, subs: dict[str, CliSubscriber], wait: float) -> int:
    """Publish single warm-up publications until one reaches every subscriber, then wait for
    the tables to stay the same for a second; the publications it took."""
    deadline = time.monotonic() + wait
    seq = 0

    async def publish(n: int) -> None:
        async with BrokerClient(scot.address(HOST), client_id=PUBLISHER) as client:
            await client.publish({"seq": n})

    def missing(n: int) -> Callable[[], list[str]]:
        return lambda: [b for b, s in subs.items() if n not in s.seqs()]

    while True:
        asyncio.run(publish(seq))
        seq += 1
        try:
            poll(missing(seq - 1), 2.0, "a warm-up publication")
            break
        except ClusterError:
            if time.monotonic() > deadline:
                raise
    previous = tables(scot)
    while True:
        time.sleep(1.0)
        now = tables(scot)
        if now == previous:
            return seq
        if time.monotonic() > deadline:
            raise ClusterError("the tables did not settle after the warm-up")
        previous = now


def heartbeat_period(scot: LocalScot, seconds: float = 2.0) -> dict[str, float]:
    """Per neighbour of the victim: the seconds between the heartbeats it sent the victim,
    from its link's ``sent_by_kind`` over `seconds` (the daemon sends them from the runtime's
    Timeout, so the period is the larger of --heartbeat and that interval)."""
    neighbours = sorted(scot.topology.neighbours(VICTIM))

    def sent() -> dict[str, int]:
        return {b: int(body["links"][VICTIM]["sent_by_kind"].get("broker_heartbeat", 0))
                for b, body in scot.broker_statuses(neighbours).items()}

    before, began = sent(), time.monotonic()
    time.sleep(seconds)
    after, elapsed = sent(), time.monotonic() - began
    return {b: round(elapsed / (after[b] - before[b]), 4) if after[b] > before[b] else float("inf")
            for b in neighbours}


def run(cfg: Config, workdir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"trials": [], "aborted": None}
    with LocalScot(workdir, scot3x3(), heartbeat=HEARTBEAT, suspect_after=SUSPECT_AFTER, admin=True,
                   log_level="warning") as scot:
        out["neighbours"] = sorted(scot.topology.neighbours(VICTIM))
        scot.cli("advertise", "--broker", scot.address(HOST), "--client", PUBLISHER, "--filter", FILTER)
        subs = {bid: subscriber(scot, bid) for bid in SUBSCRIBERS}
        try:
            poll(lambda: [b for b, s in subs.items() if not s.started], cfg.wait_s, "the subscribers started")
            out["warm_up_publications"] = warm_up(scot, subs, cfg.wait_s * 2)
            out["reference_tables"] = tables(scot)
            out["heartbeat_period_measured_s"] = heartbeat_period(scot)
            period = statistics.median(out["heartbeat_period_measured_s"].values())
            print(f"heartbeats measured every {period:.3f} s (median over the neighbours; configured "
                  f"{HEARTBEAT} s, the runtime's Timeout interval {TIMEOUT_INTERVAL} s)", flush=True)
            trials = Trials(scot, subs, cfg)
            for index in range(cfg.trials):
                for kind in KINDS:
                    try:
                        rec = trials.run(kind, index)
                    except (TrialError, ClusterError) as exc:
                        out["aborted"] = f"{kind} trial {index}: {type(exc).__name__}: {exc}"
                        print(f"aborted: {out['aborted']}", flush=True)
                        return out
                    rec["tables_as_reference"] = tables(scot) == out["reference_tables"]
                    out["trials"].append(rec)
                    print_trial(rec)
            # Copies that arrived after their trial ended.
            for rec in out["trials"]:
                seqs = list(range(rec["seqs"][0], rec["seqs"][1] + 1))
                final = miss_and_twice(subs, seqs)
                rec["final"] = {k: final[k] for k in ("lost", "duplicated", "extra_copies")}
        finally:
            for sub in subs.values():
                sub.stop()
            out["subscribers"] = {b: {"returncode": s.proc.returncode, "bad_lines": s.bad_lines,
                                      "stderr_tail": s.errors[-3:]} for b, s in subs.items()}
    return out


# --- the report ---------------------------------------------------------------------------------
def stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4)}


def summarize(trials: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in KINDS:
        rows = [t for t in trials if t["kind"] == kind]
        if not rows:
            continue

        def values(key: str, rows: list[dict[str, Any]] = rows) -> list[float]:
            return [t[key] for t in rows if t.get(key) is not None]

        final = [t.get("final", t) for t in rows]
        out[kind] = {
            "trials": len(rows),
            "detection_s": stats(values("detection_s")),
            "detection_lower_s": stats(values("detection_lower_s")),
            "status_round_s": stats(values("status_round_s")),
            "recovery_s": stats(values("recovery_s")),
            "tables_restored_s": stats(values("tables_restored_s")),
            "restart_answering_s": stats(values("restart_answering_s")),
            "delivered_in_fault_s": stats(values("delivered_in_fault_s")),
            "max_delivery_s": stats(values("max_delivery_s")),
            "published": sum(t["published"] for t in rows),
            "lost": sum(t["lost"] for t in rows),
            "late": sum(t["late"] for t in rows),
            "duplicated": sum(t["duplicated"] for t in rows),
            "lost_at_end_of_run": sum(f["lost"] for f in final),
            "duplicated_at_end_of_run": sum(f["duplicated"] for f in final),
            "tables_not_as_before": sum(not t["tables_as_before"] for t in rows),
            "trials_with_errors": sum(bool(t["errors"]) for t in rows),
            "counters_others_per_trial": {
                k: stats([t["counters"]["others"][k] for t in rows]) for k in COUNTERS + DAEMON_COUNTERS
            },
            "counters_victim_per_trial": {
                k: stats([t["counters"]["victim"][k] for t in rows]) for k in COUNTERS
            },
        }
    return out


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_trial(t: dict[str, Any]) -> None:
    c = t["counters"]["others"]
    print(f"  {t['kind']:<10}{t['trial']:>3}  detect {fmt(t.get('detection_s'))} s  "
          f"recover {fmt(t.get('recovery_s'))} s"
          + (f"  tables {fmt(t.get('tables_restored_s'))} s" if t["kind"] == "kill" else "")
          + f"  lost {t['lost']} late {t['late']} dup {t['duplicated']}  "
          f"rerouted {c['rerouted_unacknowledged']} detoured {c['detoured_publications']} "
          f"suppressed {c['suppressed_duplicates']}"
          + (f"  ERRORS {t['errors']}" if t["errors"] else ""), flush=True)


HEADER = (f"{'fault':<10}{'trials':>7}{'bound s':>9}  {'detection s: median':>20}{'max':>7}{'min':>7}"
          f"{'lost':>6}{'late':>6}{'dup':>5}  {'recovery s: median':>19}{'max':>7}"
          f"  {'tables s: median':>17}{'max':>7}")


def print_summary(summary: dict[str, Any], bound: float) -> None:
    print(HEADER)
    print("-" * len(HEADER))
    for kind, s in summary.items():
        d, r, tb = s["detection_s"], s["recovery_s"], s["tables_restored_s"]
        print(f"{kind:<10}{s['trials']:>7}{bound:>9.3f}  {fmt(d['median']):>20}{fmt(d['max']):>7}{fmt(d['min']):>7}"
              f"{s['lost_at_end_of_run']:>6}{s['late']:>6}{s['duplicated_at_end_of_run']:>5}"
              f"  {fmt(r['median']):>19}{fmt(r['max']):>7}  {fmt(tb['median']):>17}{fmt(tb['max']):>7}")
    rounds = [s["status_round_s"]["median"] for s in summary.values() if s["status_round_s"]["median"] is not None]
    print(f"detection bound heartbeat x suspect-after = {bound:g} s; a detection time includes the status round "
          f"that saw it (median round {fmt(statistics.median(rounds) if rounds else None)} s)")
    kill = summary.get("kill")
    if kill and kill["restart_answering_s"]["median"] is not None:
        a = kill["restart_answering_s"]
        print(f"kill: recovery and tables are timed from the restart call; the new process answered status after "
              f"{fmt(a['median'])} s (median, max {fmt(a['max'])})")
    print("counters per trial (median [min-max], summed over the 8 brokers other than the victim):")
    for kind, s in summary.items():
        cells = []
        for k in COUNTERS:
            v = s["counters_others_per_trial"][k]
            cells.append(f"{k} {v['median']:g} [{v['min']:g}-{v['max']:g}]")
        print(f"  {kind:<10}" + ", ".join(cells))


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench broker-failures", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    d = Config()
    add("--quick", action="store_true", help="5 trials of each fault kind (default 20)")
    add("--trials", type=int, help="trials of each fault kind (default 20; quick 5)")
    add("--publications", type=int, default=d.publications, help="publications per trial")
    add("--stream-s", type=float, default=d.stream_s, help="seconds the publications are spread over")
    add("--lead-s", type=float, default=d.lead_s, help="seconds from the first publication to the fault")
    add("--poll-s", type=float, default=d.poll_s, help="seconds between status rounds while watching")
    add("--partition-s", type=float, default=d.partition_s, help="duration of each partition")
    add("--settle-s", type=float, default=d.settle_s,
        help="seconds waited after the recovery for late copies before counting")
    add("--wait-s", type=float, default=d.wait_s, help="bound of every wait")
    add("--out", type=Path, help="results file (default bench-results/broker-failures[-quick].json)")
    add("--keep-dir", type=Path, help="put the SCOT's work directory (logs) here, kept")
    args = parser.parse_args(argv)
    cfg = Config(trials=args.trials or (5 if args.quick else 20), publications=args.publications,
                 stream_s=args.stream_s, lead_s=args.lead_s, poll_s=args.poll_s, partition_s=args.partition_s,
                 settle_s=args.settle_s, wait_s=args.wait_s)
    if cfg.partition_s <= cfg.stream_s - cfg.lead_s:
        parser.error("--partition-s must outlast the stream after the fault (--stream-s minus --lead-s)")
    bound = HEARTBEAT * SUSPECT_AFTER
    info = machine()
    commit = _git_commit()
    load = os.getloadavg()
    print(f"SCOT broker failures on real processes: 3x3 SCOT, victim {VICTIM} (inner), heartbeat {HEARTBEAT} s, "
          f"suspect after {SUSPECT_AFTER} (bound {bound:g} s); {cfg.trials} trials per fault kind, "
          f"{cfg.publications} publications over {cfg.stream_s:g} s per trial from {HOST}, subscribers at "
          f"{', '.join(SUBSCRIBERS)}; commit {commit}")
    print(f"machine: {info}; load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    began = time.monotonic()
    if args.keep_dir is not None:
        args.keep_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-broker-failures-", dir=args.keep_dir) as tmp:
        result = run(cfg, Path(tmp) / "scot")
    wall = round(time.monotonic() - began, 1)
    summary = summarize(result["trials"])
    print()
    print(f"Broker failures, {VICTIM} of a 3x3 SCOT ({info['cpus']} CPUs, {info['processor']}, "
          f"Python {info['python']}); lost / late / dup: publications, summed over the trials")
    print_summary(summary, bound)
    out = args.out or RESULTS / ("broker-failures-quick.json" if args.quick else "broker-failures.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "machine": info, "commit": commit, "argv": argv, "load_average_at_start": load,
        "load_average_at_end": os.getloadavg(), "wall_s": wall,
        "topology": "scot3x3", "victim": VICTIM, "publisher_host": HOST, "subscribers": list(SUBSCRIBERS),
        "heartbeat_s": HEARTBEAT, "suspect_after": SUSPECT_AFTER, "bound_s": bound,
        "runtime_timeout_interval_s": TIMEOUT_INTERVAL, "kinds": list(KINDS),
        "config": asdict(cfg), "summary": summary, **result,
    }
    out.write_text(json.dumps(document, indent=1))
    print(f"wrote {out} ({wall} s)")
    if result["aborted"]:
        raise SystemExit(f"python -m bench broker-failures: aborted: {result['aborted']}")


if __name__ == "__main__":
    main(sys.argv[1:])
