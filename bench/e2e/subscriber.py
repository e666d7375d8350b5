"""One subscriber of the end-to-end benchmark, as its own OS process:

    python -m bench.e2e.subscriber SYSTEM TARGET --out FILE --expect PHASE=COUNT ...

SYSTEM is pubsub (TARGET: a node, HOST:PORT; a new-only follow stream with the client
library, read with a callback, `Subscription.consume`, as the NATS subscribers read with
one), nats (TARGET: nats://HOST:PORT; a core subscription), jetstream (a durable push
consumer of its own that acknowledges every message, delivering only messages published
after it was created), jetstream-ordered (an ordered push consumer, no acknowledgements) or
redis (TARGET: HOST:PORT; SUBSCRIBE).

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
async def pubsub_subscribe(target: str, on_payload: OnPayload) -> Callable[[], Any]:
    from pubsub.client.library import Client

    client = Client(target)
    sub = client.subscribe(TOPIC, new_only=True, join=False)
    await sub.open()

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

    return close


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


async def subscribe(system: str, target: str, on_payload: OnPayload) -> Callable[[], Any]:
    if system == "pubsub":
        return await pubsub_subscribe(target, on_payload)
    if system in ("nats", "jetstream", "jetstream-ordered"):
        consumer = {"nats": None, "jetstream": "durable", "jetstream-ordered": "ordered"}[system]
        return await nats_subscribe(target, on_payload, consumer)
    if system == "redis":
        return await redis_subscribe(target, on_payload)
    raise SystemExit(f"unknown system {system!r}")


async def serve(system: str, target: str, out: Path, expect: dict[str, int]) -> int:
    recorder = Recorder(expect)
    try:
        async with asyncio.timeout(60):
            close = await subscribe(system, target, recorder)
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
    parser.add_argument("system", choices=["pubsub", "nats", "jetstream", "jetstream-ordered", "redis"])
    parser.add_argument("target")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--expect", action="append", default=[], help="PHASE=COUNT")
    args = parser.parse_args()
    expect = {phase: int(count) for phase, _, count in (e.partition("=") for e in args.expect)}
    raise SystemExit(run_async(serve(args.system, args.target, args.out, expect)))


if __name__ == "__main__":
    main()
