"""End-to-end latency and sustained throughput of real daemons, with Redis as a reference.

Everything runs on this machine over TCP on 127.0.0.1, one monotonic clock for all.

pubsub (LocalCluster: a supervisor and n node processes in a temporary directory)
  latency     every node subscribes one topic; once the ring is consistent (the supervisor
              lists n members and `ring_problems` finds nothing) a follow stream
              (``new_only``) is opened at every node with the client library, and M
              publications are published through node 0, paced at R per second.  The
              latency of a publication is the time its LAST node delivered it minus the
              time the publish call was made (the send time, time.monotonic_ns(), travels
              in the payload).  p50 / p99 / max over the M publications, and each node's own
              p50 (reported as min / median / max over the nodes).  "ack p50" is the
              publish call's own latency (a durable write at the first member).
  throughput  at n = 16 (quick: 8), P concurrent publishers (one client each, on nodes
              0..P-1, each with W publish calls in flight) publish K publications as fast
              as the acknowledgements allow.  Reported: acknowledged publications per
              second (first call to last ack), the time until every node had delivered
              every acknowledged publication, and whether loss was zero, checked by the
              follow streams and again by each node's history.

Redis (redis-server on a free port, --save '' --appendonly no; the `redis` package)
  the same fan-out: n subscriber connections on one channel, one publisher, the same
  payloads and pacing (latency to the last subscriber); and the same throughput run with
  16 (quick: 8) subscribers and P publishers with W calls in flight each.

Redis pub/sub is in memory, fire-and-forget (PUBLISH answers once the message is queued to
the connected subscribers; nothing is stored, a subscriber that is slow or away loses
messages) while pubsub acknowledges a publication only after a member wrote it durably and
then spreads and stores it at every node.  Redis is a reference point, not a like-for-like
comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.machine import machine
from pubsub.client.library import Client, ClientError
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports
from pubsub.ops.ringview import ring_problems

TOPIC = "bench-e2e"
RESULTS = Path("bench-results")
REDIS_NOTE = (
    "Redis pub/sub is in-memory, unacknowledged and not durable (PUBLISH returns once the "
    "message is queued to connected subscribers); pubsub acknowledges only after a durable "
    "write and stores every publication at every node. Reference point, not like-for-like."
)

Publish = Callable[[bytes], Awaitable[object]]


# --- helpers ---------------------------------------------------------------------------------
def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 2)


def fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def run_async(coro: Awaitable[Any]) -> Any:
    """Run on uvloop when available (the daemons use it too), else asyncio's loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)  # type: ignore[arg-type]


async def _cancel(tasks: list[asyncio.Task[Any]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# --- the two measurements, for any system ----------------------------------------------------
async def measure_latency(
    publish: Publish, streams: list[AsyncIterator[bytes]], count: int, rate: float, drain: float
) -> dict[str, Any]:
    """Publish `count` paced publications; per publication, when each stream delivered it."""
    n = len(streams)
    arrivals: list[dict[int, int]] = [{} for _ in range(n)]
    sent: dict[int, int] = {}
    acked: dict[int, int] = {}
    failures: list[str] = []
    complete = asyncio.Event()
    done_nodes = 0

    async def read(node: int, stream: AsyncIterator[bytes]) -> None:
        nonlocal done_nodes
        mine = arrivals[node]
        async for payload in stream:
            now = time.monotonic_ns()
            if not payload.startswith(b"L:"):
                continue
            index = int(payload.split(b":")[1])
            if index not in mine:
                mine[index] = now
                if len(mine) == count:
                    done_nodes += 1
                    if done_nodes == n:
                        complete.set()

    async def one(index: int) -> None:
        start = time.monotonic_ns()
        sent[index] = start
        try:
            await publish(b"L:%d:%d" % (index, start))
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            failures.append(f"#{index}: {exc}")
            return
        acked[index] = time.monotonic_ns() - start

    readers = [asyncio.create_task(read(i, s)) for i, s in enumerate(streams)]
    publishers: list[asyncio.Task[None]] = []
    try:
        began = time.monotonic()
        for index in range(count):
            delay = began + index / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            publishers.append(asyncio.create_task(one(index)))
        await asyncio.gather(*publishers)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain):
                await complete.wait()
    finally:
        await _cancel(publishers + readers)
    last: list[float] = []
    incomplete = 0
    for index in acked:
        times = [arr.get(index) for arr in arrivals]
        if any(t is None for t in times):
            incomplete += 1
            continue
        last.append(max(times) - sent[index])  # type: ignore[type-var, operator]
    node_p50 = [
        statistics.median([t - sent[i] for i, t in arr.items() if i in sent]) if arr else None
        for arr in arrivals
    ]
    known = [v for v in node_p50 if v is not None]
    return {
        "n": n,
        "sent": count,
        "acked": len(acked),
        "publish_failures": failures[:10],
        "complete": len(last),
        "incomplete": incomplete,
        "p50_ms": ms(percentile(last, 50)),
        "p99_ms": ms(percentile(last, 99)),
        "max_ms": ms(max(last) if last else None),
        "ack_p50_ms": ms(percentile(list(acked.values()), 50)),
        "node_p50_ms": [ms(v) for v in node_p50],
        "node_p50_min_ms": ms(min(known) if known else None),
        "node_p50_median_ms": ms(statistics.median(known) if known else None),
        "node_p50_max_ms": ms(max(known) if known else None),
    }


async def measure_throughput(
    publishers: list[Publish],
    streams: list[AsyncIterator[bytes]],
    total: int,
    window: int,
    drain: float,
) -> dict[str, Any]:
    """`total` publications from len(publishers) publishers, `window` calls in flight each."""
    n = len(streams)
    received: list[set[bytes]] = [set() for _ in range(n)]
    acked: set[bytes] = set()
    failures: list[str] = []
    publishing_done = False
    everything = asyncio.Event()
    last_ack = 0.0

    def check() -> None:
        if publishing_done and all(acked <= got for got in received):
            everything.set()

    async def read(node: int, stream: AsyncIterator[bytes]) -> None:
        mine = received[node]
        async for payload in stream:
            if payload.startswith(b"T:"):
                mine.add(payload)
                if publishing_done and len(mine) >= len(acked):
                    check()

    per = [total // len(publishers) + (1 if i < total % len(publishers) else 0) for i in range(len(publishers))]

    async def worker(p: int, publish: Publish, counter: list[int]) -> None:
        nonlocal last_ack
        while counter[0] < per[p]:
            index = counter[0]
            counter[0] += 1
            payload = b"T:%d:%d:%d" % (p, index, time.monotonic_ns())
            try:
                await publish(payload)
            except Exception as exc:  # noqa: BLE001 - reported, not fatal
                failures.append(f"{p}#{index}: {exc}")
                continue
            acked.add(payload)
            last_ack = time.monotonic()

    readers = [asyncio.create_task(read(i, s)) for i, s in enumerate(streams)]
    workers: list[asyncio.Task[None]] = []
    delivered_at: float | None = None
    try:
        began = time.monotonic()
        for p, publish in enumerate(publishers):
            counter = [0]
            workers += [asyncio.create_task(worker(p, publish, counter)) for _ in range(window)]
        await asyncio.gather(*workers)
        publishing_done = True
        check()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(drain):
                await everything.wait()
                delivered_at = time.monotonic()
    finally:
        await _cancel(workers + readers)
    seconds = max(last_ack - began, 1e-9)
    missing = [len(acked - got) for got in received]
    return {
        "n": n,
        "publishers": len(publishers),
        "window": window,
        "sent": total,
        "acked": len(acked),
        "publish_failures": len(failures),
        "failure_examples": failures[:5],
        "publish_seconds": round(seconds, 3),
        "acked_per_s": round(len(acked) / seconds, 1),
        "all_delivered_seconds": None if delivered_at is None else round(delivered_at - began, 3),
        "delivered_per_s": (
            None if delivered_at is None else round(len(acked) / max(delivered_at - began, 1e-9), 1)
        ),
        "missing_per_node": missing,
        "zero_loss": not any(missing) and not failures,
        "_acked": acked,
    }


# --- pubsub ----------------------------------------------------------------------------------
def ring_ready_problems(cluster: LocalCluster, n: int) -> list[str]:
    members, states = cluster.snapshot(TOPIC)
    problems = [] if len(members) == n else [f"the supervisor lists {len(members)} of {n} members"]
    return problems + ring_problems(members, states)


async def _pubsub_stream(client: Client) -> tuple[Any, AsyncIterator[bytes]]:
    sub = client.subscribe(TOPIC, new_only=True, join=False)
    await sub.open()

    async def payloads() -> AsyncIterator[bytes]:
        async for delivery in sub:
            yield delivery.payload

    return sub, payloads()


async def _pubsub_streams(
    clients: list[Client], subs: list[Any]
) -> list[AsyncIterator[bytes]]:
    """One new-only stream per client; each subscription goes into `subs` for closing."""
    streams = []
    for client in clients:
        sub, stream = await _pubsub_stream(client)
        subs.append(sub)
        streams.append(stream)
    return streams


async def _pubsub_latency(refs: list[str], count: int, rate: float) -> dict[str, Any]:
    clients = [Client(ref) for ref in refs]
    subs: list[Any] = []
    try:
        streams = await _pubsub_streams(clients, subs)
        publisher = clients[0]
        return await measure_latency(
            lambda data: publisher.publish(TOPIC, data), streams, count, rate, drain=30.0
        )
    finally:
        for sub in subs:
            await sub.close()
        for client in clients:
            await client.close()


async def _pubsub_throughput(
    refs: list[str], total: int, publishers: int, window: int
) -> dict[str, Any]:
    readers = [Client(ref) for ref in refs]
    writers = [Client(refs[i % len(refs)]) for i in range(publishers)]
    subs: list[Any] = []
    try:
        streams = await _pubsub_streams(readers, subs)

        def publish_via(client: Client) -> Publish:
            return lambda data: client.publish(TOPIC, data)

        result = await measure_throughput(
            [publish_via(c) for c in writers], streams, total, window, drain=120.0
        )
        # Cross-check with every node's history (what it holds durably).
        acked: set[bytes] = result.pop("_acked")
        held: list[int | str] = []
        for client in readers:
            try:
                history = await client.history(TOPIC)
            except ClientError as exc:
                held.append(f"error: {exc}")
                continue
            payloads = {d.payload for d in history}
            held.append(len(acked - payloads))
        result["history_missing_per_node"] = held
        result["zero_loss"] = result["zero_loss"] and all(m == 0 for m in held)
        return result
    finally:
        for sub in subs:
            await sub.close()
        for client in readers + writers:
            await client.close()


def pubsub_run(
    n: int, count: int, rate: float, throughput: dict[str, int] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One cluster of n nodes: the latency run, and the throughput run if asked."""
    with tempfile.TemporaryDirectory(prefix=f"bench-e2e-{n}-") as tmp:
        with LocalCluster(Path(tmp), n, start_timeout=60.0, log_level="warning") as cluster:
            began = time.monotonic()
            for i in range(n):
                cluster.subscribe(i, TOPIC)
            cluster.poll(
                lambda: ring_ready_problems(cluster, n), 300.0, f"a consistent ring of {n}", 0.25
            )
            ready = round(time.monotonic() - began, 2)
            latency = run_async(_pubsub_latency(cluster.node_refs, count, rate))
            latency["ring_ready_s"] = ready
            tput = None
            if throughput is not None:
                tput = run_async(_pubsub_throughput(cluster.node_refs, **throughput))
    return latency, tput


# --- Redis -----------------------------------------------------------------------------------
class RedisServer:
    """redis-server as a subprocess on a free port, no persistence; stopped on exit."""

    def __init__(self) -> None:
        self.port = pick_free_ports(1)[0]
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RedisServer:
        self.process = subprocess.Popen(
            [
                "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            run_async(self._wait_ready())
        except BaseException:
            self.stop()
            raise
        return self

    async def _wait_ready(self) -> None:
        import redis.asyncio as aioredis

        deadline = time.monotonic() + 15
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            client = aioredis.Redis(host="127.0.0.1", port=self.port)
            try:
                if await client.ping():
                    return
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
            finally:
                await client.aclose()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _redis_subscribers(port: int, n: int) -> tuple[list[Any], list[AsyncIterator[bytes]]]:
    import redis.asyncio as aioredis

    conns: list[Any] = []
    streams: list[AsyncIterator[bytes]] = []
    for _ in range(n):
        client = aioredis.Redis(host="127.0.0.1", port=port)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        await pubsub.subscribe(TOPIC)
        conns.append((client, pubsub))

        async def payloads(ps: Any = pubsub) -> AsyncIterator[bytes]:
            async for message in ps.listen():
                if message["type"] == "message":
                    yield message["data"]

        streams.append(payloads())
    checker = aioredis.Redis(host="127.0.0.1", port=port)
    try:
        deadline = time.monotonic() + 10
        while (await checker.pubsub_numsub(TOPIC))[0][1] < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Redis does not list {n} subscribers")
            await asyncio.sleep(0.05)
    finally:
        await checker.aclose()
    return conns, streams


async def _redis_close(conns: list[Any]) -> None:
    for client, pubsub in conns:
        with contextlib.suppress(Exception):
            await pubsub.aclose()
        with contextlib.suppress(Exception):
            await client.aclose()


async def _redis_latency(port: int, n: int, count: int, rate: float) -> dict[str, Any]:
    import redis.asyncio as aioredis

    conns: list[Any] = []
    publisher = aioredis.Redis(host="127.0.0.1", port=port)
    try:
        conns, streams = await _redis_subscribers(port, n)
        return await measure_latency(
            lambda data: publisher.publish(TOPIC, data), streams, count, rate, drain=30.0
        )
    finally:
        await _redis_close(conns)
        await publisher.aclose()


async def _redis_throughput(
    port: int, n: int, total: int, publishers: int, window: int
) -> dict[str, Any]:
    import redis.asyncio as aioredis

    conns: list[Any] = []
    writers = [
        aioredis.Redis(host="127.0.0.1", port=port, max_connections=window)
        for _ in range(publishers)
    ]
    try:
        conns, streams = await _redis_subscribers(port, n)

        def publish_via(client: Any) -> Publish:
            return lambda data: client.publish(TOPIC, data)

        result = await measure_throughput(
            [publish_via(w) for w in writers], streams, total, window, drain=120.0
        )
        result.pop("_acked")
        return result
    finally:
        await _redis_close(conns)
        for writer in writers:
            await writer.aclose()


def redis_available() -> str | None:
    """None if redis-server and the redis package are usable, else why not."""
    if shutil.which("redis-server") is None:
        try:
            done = subprocess.run(
                ["apt-get", "install", "-y", "redis-server"],
                capture_output=True, text=True, timeout=600,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"redis-server is missing and apt-get install failed: {exc}"
        if done.returncode != 0 or shutil.which("redis-server") is None:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            return f"redis-server is missing and `apt-get install -y redis-server` failed: {tail[0]}"
    try:
        import redis.asyncio  # noqa: F401
    except ImportError:
        return "the `redis` Python package is missing (pip install -e '.[bench]')"
    return None


# --- tables ----------------------------------------------------------------------------------
LAT_HEADER = (
    f"{'system':<8}{'n':>4}{'sent':>6}{'acked':>6}{'all-n':>6}{'p50 ms':>9}{'p99 ms':>9}"
    f"{'max ms':>9}{'node p50 min/med/max ms':>26}{'ack p50':>9}{'ring s':>8}"
)
TPUT_HEADER = (
    f"{'system':<8}{'n':>4}{'pubs':>6}{'win':>5}{'sent':>7}{'acked':>7}{'acked/s':>10}"
    f"{'all-delivered s':>17}{'delivered/s':>13}{'zero loss':>11}"
)


def lat_line(system: str, row: dict[str, Any]) -> str:
    node = f"{fmt(row['node_p50_min_ms'])}/{fmt(row['node_p50_median_ms'])}/{fmt(row['node_p50_max_ms'])}"
    return (
        f"{system:<8}{row['n']:>4}{row['sent']:>6}{row['acked']:>6}{row['complete']:>6}"
        f"{fmt(row['p50_ms']):>9}{fmt(row['p99_ms']):>9}{fmt(row['max_ms']):>9}{node:>26}"
        f"{fmt(row['ack_p50_ms']):>9}{fmt(row.get('ring_ready_s')):>8}"
    )


def tput_line(system: str, row: dict[str, Any]) -> str:
    return (
        f"{system:<8}{row['n']:>4}{row['publishers']:>6}{row['window']:>5}{row['sent']:>7}"
        f"{row['acked']:>7}{fmt(row['acked_per_s']):>10}{fmt(row['all_delivered_seconds']):>17}"
        f"{fmt(row['delivered_per_s']):>13}{('yes' if row['zero_loss'] else 'NO'):>11}"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench endtoend", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n in {4, 8}, smaller counts")
    parser.add_argument("--sizes", type=int, nargs="+", help="n values (default 4 8 16 32)")
    parser.add_argument("--count", type=int, help="latency: publications (default 200; quick 100)")
    parser.add_argument("--rate", type=float, default=50.0, help="latency: publications per second")
    parser.add_argument("--throughput-n", type=int, help="throughput: nodes (default 16; quick 8)")
    parser.add_argument("--total", type=int, help="throughput: publications (default 3000; quick 600)")
    parser.add_argument("--publishers", type=int, default=4, help="throughput: publishers")
    parser.add_argument("--window", type=int, default=16, help="throughput: calls in flight per publisher")
    parser.add_argument("--no-redis", action="store_true", help="skip the Redis reference")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([4, 8] if args.quick else [4, 8, 16, 32])
    count = args.count or (100 if args.quick else 200)
    tput_n = args.throughput_n or (8 if args.quick else 16)
    total = args.total or (600 if args.quick else 3000)
    tput_args = {"total": total, "publishers": args.publishers, "window": args.window}

    RESULTS.mkdir(exist_ok=True)
    info = machine()
    print(f"End-to-end latency and throughput, real daemons on 127.0.0.1 -- {info}")
    print(
        f"latency: {count} publications at {args.rate:g}/s through one node, time until the "
        f"LAST subscriber delivered it; throughput: n={tput_n}, {args.publishers} publishers x "
        f"{args.window} in flight, {total} publications"
    )
    print()
    latency: list[dict[str, Any]] = []
    throughput: list[dict[str, Any]] = []
    redis_latency: list[dict[str, Any]] = []
    redis_throughput: list[dict[str, Any]] = []
    errors: list[str] = []

    print(LAT_HEADER)
    print("-" * len(LAT_HEADER))
    runs = sorted(set(sizes) | {tput_n})
    for n in runs:
        try:
            lat, tput = pubsub_run(n, count, args.rate, tput_args if n == tput_n else None)
        except Exception as exc:  # noqa: BLE001 - one size failing does not end the benchmark
            errors.append(f"pubsub n={n}: {exc}")
            print(f"pubsub  {n:>4}  FAILED: {str(exc).splitlines()[0]}", flush=True)
            continue
        if n in sizes:
            latency.append(lat)
            print(lat_line("pubsub", lat), flush=True)
        if tput is not None:
            throughput.append(tput)

    redis_skipped = "skipped (--no-redis)" if args.no_redis else redis_available()
    if redis_skipped is None:
        try:
            with RedisServer() as server:
                for n in sizes:
                    row = run_async(_redis_latency(server.port, n, count, args.rate))
                    redis_latency.append(row)
                    print(lat_line("redis", row), flush=True)
                redis_throughput.append(
                    run_async(_redis_throughput(server.port, tput_n, **tput_args))
                )
        except Exception as exc:  # noqa: BLE001
            errors.append(f"redis: {exc}")
            redis_skipped = f"failed: {exc}"
    if redis_skipped is not None:
        print(f"NOTE: Redis reference {redis_skipped}")

    print()
    print(TPUT_HEADER)
    print("-" * len(TPUT_HEADER))
    for row in throughput:
        print(tput_line("pubsub", row))
    for row in redis_throughput:
        print(tput_line("redis", row))
    for row in throughput + redis_throughput:
        if not row["zero_loss"]:
            print(f"  loss/failures: missing per node {row['missing_per_node']}, "
                  f"{row['publish_failures']} failed publishes {row['failure_examples']}")
    print()
    print(f"NOTE: {REDIS_NOTE}")
    if errors:
        print("errors:\n  " + "\n  ".join(errors))

    default = args.sizes is None and args.count is None and args.total is None and args.throughput_n is None
    suffix = "" if default and not args.quick else "-partial"
    out = RESULTS / f"endtoend{suffix}.json"
    out.write_text(
        json.dumps(
            {
                "machine": info,
                "parameters": {
                    "sizes": sizes, "count": count, "rate": args.rate, "throughput_n": tput_n,
                    **tput_args,
                },
                "pubsub": {"latency": latency, "throughput": throughput},
                "redis": {
                    "latency": redis_latency,
                    "throughput": redis_throughput,
                    "skipped": redis_skipped,
                    "note": REDIS_NOTE,
                },
                "errors": errors,
            },
            indent=2,
        )
    )
    print(f"\nwritten to {out}")
