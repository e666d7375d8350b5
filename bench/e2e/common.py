"""What every part of the end-to-end benchmark shares: names, payloads, frame kinds,
percentiles, CPU time of a process from /proc, and the event loop."""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar

#: The pubsub topic, the NATS subject (and JetStream stream) and the Redis channel.
TOPIC = "bench-e2e"
SUBJECT = "bench.e2e"
STREAM = "BENCH_E2E"
CHANNEL = "bench-e2e"

#: Every payload has this size: "<phase>:<id>:<send ns>:" padded with '.'.
PAYLOAD_BYTES = 64

#: Phases, the first field of every payload: a short warm-up (not measured), the paced
#: latency run, the throughput run.
WARMUP, LATENCY, THROUGHPUT = "w", "L", "T"

#: pubsub frame kinds (status `stats.frames_out`) that carry a publication from node to
#: node.  `spread` is announced by the node rewrite; a kind that does not occur counts 0.
PUBLICATION_FRAME_KINDS = frozenset({"spread", "publish_new", "publish", "hand_over"})
#: Kinds a node sends to clients (status replies, stream deliveries, publish answers), not to
#: peers; "peer frames" below are all kinds except these.
CLIENT_FRAME_KINDS = frozenset({"reply", "error", "publish_ack", "publish_failed", "delivery"})

CLK_TCK = os.sysconf("SC_CLK_TCK")
CPUS = len(os.sched_getaffinity(0)) or 1

T = TypeVar("T")


# --- payloads --------------------------------------------------------------------------------
def make_payload(phase: str, index: int, send_ns: int) -> bytes:
    head = b"%s:%d:%d:" % (phase.encode(), index, send_ns)
    if len(head) > PAYLOAD_BYTES:
        raise ValueError(f"payload header {head!r} exceeds {PAYLOAD_BYTES} bytes")
    return head.ljust(PAYLOAD_BYTES, b".")


def parse_payload(data: bytes) -> tuple[str, int, int] | None:
    """(phase, id, send ns) of a benchmark payload, None for anything else."""
    parts = data.split(b":", 3)
    if len(parts) < 4:
        return None
    try:
        return parts[0].decode(), int(parts[1]), int(parts[2])
    except (UnicodeDecodeError, ValueError):
        return None


# --- CPU -------------------------------------------------------------------------------------
def cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process in clock ticks (/proc/<pid>/stat), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2 :].split()
    # After "pid (comm) ": state is field 3 of stat(5), utime 14, stime 15.
    return int(fields[11]) + int(fields[12])


def cpu_snapshot(pids: Mapping[str, int]) -> dict[str, int | None]:
    return {name: cpu_ticks(pid) for name, pid in pids.items()}


def cpu_delta_seconds(
    before: Mapping[str, int | None], after: Mapping[str, int | None]
) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, start in before.items():
        end = after.get(name)
        out[name] = None if start is None or end is None else (end - start) / CLK_TCK
    return out


def machine_busy_ticks() -> int:
    """Busy time of the whole machine, every CPU, in clock ticks (/proc/stat: user, nice,
    system, irq, softirq, steal)."""
    with open("/proc/stat", "rb") as f:
        fields = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return user + nice + system + irq + softirq + steal


class Contention:
    """CPU the rest of the machine used while we measured: machine busy time minus the CPU
    time of the processes we measure (`pids`, all of ours).  Kernel threads count as others
    (including loopback network work the kernel does outside our processes)."""

    def __init__(self, pids: Mapping[str, int]) -> None:
        self.pids = dict(pids)
        self.t0 = time.monotonic()
        self.busy0 = machine_busy_ticks()
        self.ours0 = cpu_snapshot(self.pids)
        #: CPU seconds of each measured process over the window, by name (set by `result`).
        self.per_process: dict[str, float | None] = {}

    def result(self) -> dict[str, Any]:
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        busy = (machine_busy_ticks() - self.busy0) / CLK_TCK
        self.per_process = cpu_delta_seconds(self.ours0, cpu_snapshot(self.pids))
        ours = sum(v for v in self.per_process.values() if v is not None)
        others = max(busy - ours, 0.0)
        return {
            "elapsed_s": round(elapsed, 3),
            "machine_busy_s": round(busy, 2),
            "ours_s": round(ours, 2),
            "others_s": round(others, 2),
            "others_share": round(others / (elapsed * CPUS), 3),
        }


def wait_quiet(max_wait: float, threshold_cores: float = 0.15) -> dict[str, Any]:
    """Wait (at most `max_wait` s) for a second in which the rest of the machine used less
    than `threshold_cores` of CPU; returns how long it waited and what it saw last."""
    began = time.monotonic()
    while True:
        probe = Contention({"harness": os.getpid()})
        time.sleep(1.0)
        seen = probe.result()
        cores = seen["others_s"] / seen["elapsed_s"]
        if cores < threshold_cores or time.monotonic() - began >= max_wait:
            return {"waited_s": round(time.monotonic() - began, 1), "others_cores": round(cores, 2),
                    "quiet": cores < threshold_cores}


# --- numbers ---------------------------------------------------------------------------------
def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100), None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def rnd(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def spread(values: Iterable[float | None]) -> dict[str, Any]:
    """Median, min and max of the values that exist, and how many there were."""
    known = [v for v in values if v is not None]
    if not known:
        return {"median": None, "min": None, "max": None, "count": 0}
    return {
        "median": statistics.median(known),
        "min": min(known),
        "max": max(known),
        "count": len(known),
    }


def frame_kinds(status: Mapping[str, Any]) -> dict[str, int]:
    """`stats.frames_out` of a status body."""
    return dict((status.get("stats") or {}).get("frames_out") or {})


def kinds_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)}


# --- the event loop --------------------------------------------------------------------------
def run_async(coro: Awaitable[T]) -> T:
    """Run on uvloop when available (the daemons use it too), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)  # type: ignore[arg-type]
