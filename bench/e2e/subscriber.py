"""One subscriber of the end-to-end benchmark, as its own OS process:

    python -m bench.e2e.subscriber SYSTEM TARGET --out FILE --expect PHASE=COUNT ...

SYSTEM is pubsub (TARGET: a node, HOST:PORT; a new-only follow stream with the client
library, read with a callback, `Subscription.consume`, as the NATS subscribers read with
one), pubsub-embedded (TARGET: the address of a node this process runs itself,
`pubsub.client.embedded`, with --supervisor and --data-dir; the same stream, in memory),
nats (TARGET: nats://HOST:PORT; a core subscription), jetstream (a durable push consumer of
its own that acknowledges every message, delivering only messages published after it was
created), jetstream-ordered (an ordered push consumer, no acknowledgements), redis
(TARGET: HOST:PORT; SUBSCRIBE) or relay-floor (TARGET: its relay, HOST:PORT;
`bench.e2e.floor`).

For every benchmark payload it receives it records (phase, publication id,
time.monotonic_ns() at receipt), first receipt only; repeats are counted.  CLOCK_MONOTONIC is
system-wide on Linux, so these times compare with the publisher's.

Protocol, one line each on stdout: ``ready`` once subscribed; ``complete PHASE NS`` when it
holds every publication of a phase it was told to expect (NS: receipt time of the last one);
``dumped`` after writing its records to FILE as JSON when ``dump`` arrives on stdin; ``error
TEXT`` before exiting on a failure.  ``quit`` on stdin, or the end of stdin (the harness went
away), ends the process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.e2e.common import CHANNEL, STREAM, SUBJECT, TOPIC, parse_payload, run_async

OnPayload = Callable[[bytes], None]


class Recorder:
    """First receipt time of each (phase, id); says `complete` when a phase is whole."""

    def __init__(self, expect: dict[str, int]) -> None:
        self.expect = expect
        self.received: dict[str, dict[int, int]] = {}
        self.repeats: dict[str, int] = {}
        self.foreign = 0

    def __call__(self, payload: bytes) -> None:
        now = time.monotonic_ns()
        parsed = parse_payload(payload)
        if parsed is None:
            self.foreign += 1
            return
        phase, index, _ = parsed
        mine = self.received.setdefault(phase, {})
        if index in mine:
            self.repeats[phase] = self.repeats.get(phase, 0) + 1
            return
        mine[index] = now
        if len(mine) == self.expect.get(phase, -1):
            say(f"complete {phase} {now}")

    def dump(self) -> dict[str, Any]:
        return {
            "received": {
                phase: {"ids": list(got), "ns": list(got.values())} for phase, got in self.received.items()
            },
            "repeats": self.repeats,
            "foreign": self.foreign,
        }


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


# --- one adapter per system: subscribe, feed payloads to on_payload, close -------------------
def pumped(sub: Any, client: Any, on_payload: OnPayload, *after: Callable[[], Any]) -> Callable[[], Any]:
    """Read the pubsub stream `sub` (of `client`) with a callback, in a task; the close
    returned ends the task, the stream, the client and then each of `after`."""

    async def pump() -> None:
        try:
            await sub.consume(lambda delivery: on_payload(delivery.payload))
        except Exception as exc:  # noqa: BLE001 - reported to the harness
            say(f"error stream ended: {exc}")

    task = asyncio.create_task(pump())

    async def close() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await sub.close()
        await client.close()
        for step in after:
            await step()

    return close


async def pubsub_subscribe(target: str, on_payload: OnPayload) -> Callable[[], Any]:
    from pubsub.client.library import Client

    client = Client(target)
    sub = client.subscribe(TOPIC, new_only=True, join=False)
    await sub.open()
    return pumped(sub, client, on_payload)


async def embedded_subscribe(
    target: str, on_payload: OnPayload, supervisor: str, data_dir: Path, interval: float | None, store_sync: str | None
) -> Callable[[], Any]:
    """pubsub with the node inside this process (`pubsub.client.embedded`): the node listens
    on `target`, joins the topic's ring through `supervisor`, and this process reads its
    stream in memory, with the same callback as the ``pubsub`` subscriber.  The collector
    is tuned as the daemons tune theirs (``tune_gc``): this process is the node."""
    from pubsub.client.embedded import EmbeddedNode
    from pubsub.node.settings import NodeSettings
    from pubsub.runtime.settings import RuntimeSettings, load

    settings = load(NodeSettings, data_dir=data_dir, store_sync=store_sync)
    runtime_settings = load(RuntimeSettings, timeout_interval=interval)
    node = EmbeddedNode(target, supervisor, settings=settings, runtime_settings=runtime_settings, tune_gc=True)
    await node.start()
    try:
        client = node.client()
        sub = client.subscribe(TOPIC, new_only=True, join=True)
        await sub.open()
    except BaseException:
        await node.stop()
        raise
    return pumped(sub, client, on_payload, node.stop)


async def nats_subscribe(target: str, on_payload: OnPayload, consumer: str | None) -> Callable[[], Any]:
    """A NATS subscriber: core (`consumer` None), or a JetStream consumer, "durable" (explicit
    acknowledgement of every message) or "ordered" (none)."""
    import nats

    nc = await nats.connect(servers=[target], allow_reconnect=False, connect_timeout=5)

    async def callback(msg: Any) -> None:
        on_payload(msg.data)

    async def acking(msg: Any) -> None:
        on_payload(msg.data)
        await msg.ack()

    if consumer is not None:
        from nats.js.api import DeliverPolicy

        js = nc.jetstream()
        if consumer == "ordered":
            await js.subscribe(
                SUBJECT, stream=STREAM, cb=callback, ordered_consumer=True, deliver_policy=DeliverPolicy.NEW
            )
        else:
            await js.subscribe(
                SUBJECT, stream=STREAM, cb=acking, durable=f"sub{os.getpid()}", manual_ack=True,
                deliver_policy=DeliverPolicy.NEW,
            )
    else:
        await nc.subscribe(SUBJECT, cb=callback)
    await nc.flush(5)  # the server has processed the subscription

    async def close() -> None:
        with contextlib.suppress(Exception):
            await nc.close()

    return close


async def redis_subscribe(target: str, on_payload: OnPayload) -> Callable[[], Any]:
    import redis.asyncio as aioredis

    host, _, port = target.rpartition(":")
    client = aioredis.Redis(host=host, port=int(port))
    pubsub = client.pubsub()
    await pubsub.subscribe(CHANNEL)
    async with asyncio.timeout(5):  # the server's confirmation: subscribed from here on
        while True:
            message = await pubsub.get_message(timeout=1.0)
            if message is not None and message["type"] == "subscribe":
                break

    async def pump() -> None:
        try:
            async for message in pubsub.listen():
                if message["type"] == "message":
                    on_payload(message["data"])
        except Exception as exc:  # noqa: BLE001 - reported to the harness
            say(f"error subscription ended: {exc}")

    task = asyncio.create_task(pump())

    async def close() -> None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        with contextlib.suppress(Exception):
            await pubsub.aclose()
        with contextlib.suppress(Exception):
            await client.aclose()

    return close


async def subscribe(system: str, target: str, on_payload: OnPayload, args: argparse.Namespace) -> Callable[[], Any]:
    if system == "pubsub":
        return await pubsub_subscribe(target, on_payload)
    if system == "pubsub-embedded":
        if args.supervisor is None or args.data_dir is None:
            raise SystemExit("pubsub-embedded needs --supervisor and --data-dir")
        return await embedded_subscribe(
            target, on_payload, args.supervisor, args.data_dir, args.interval, args.store_sync
        )
    if system in ("nats", "jetstream", "jetstream-ordered"):
        consumer = {"nats": None, "jetstream": "durable", "jetstream-ordered": "ordered"}[system]
        return await nats_subscribe(target, on_payload, consumer)
    if system == "redis":
        return await redis_subscribe(target, on_payload)
    if system == "relay-floor":
        from bench.e2e.floor import floor_subscribe

        return await floor_subscribe(target, on_payload)
    raise SystemExit(f"unknown system {system!r}")


async def serve(args: argparse.Namespace, expect: dict[str, int]) -> int:
    system, target, out = args.system, args.target, args.out
    recorder = Recorder(expect)
    try:
        async with asyncio.timeout(60):
            close = await subscribe(system, target, recorder, args)
    except Exception as exc:  # noqa: BLE001 - one line for the harness
        say(f"error cannot subscribe: {type(exc).__name__}: {exc}")
        return 1
    say("ready")
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    try:
        while True:
            line = (await commands.readline()).decode().strip()
            if line == "dump":
                out.write_text(json.dumps(recorder.dump()))
                say("dumped")
            elif line in ("quit", ""):  # "" is the end of stdin
                return 0
    finally:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e.subscriber")
    parser.add_argument(
        "system",
        choices=["pubsub", "pubsub-embedded", "relay-floor", "nats", "jetstream", "jetstream-ordered", "redis"],
    )
    parser.add_argument("target", help="the node, server or (pubsub-embedded) this process's node's address")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--expect", action="append", default=[], help="PHASE=COUNT")
    parser.add_argument("--supervisor", help="pubsub-embedded: the supervisor's address")
    parser.add_argument("--data-dir", type=Path, help="pubsub-embedded: the node's data directory")
    parser.add_argument("--interval", type=float, help="pubsub-embedded: the node's Timeout interval, s")
    parser.add_argument("--store-sync", choices=["normal", "full"], help="pubsub-embedded: the store's sync mode")
    args = parser.parse_args()
    expect = {phase: int(count) for phase, _, count in (e.partition("=") for e in args.expect)}
    raise SystemExit(run_async(serve(args, expect)))


if __name__ == "__main__":
    main()
