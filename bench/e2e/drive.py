"""The publisher's two loops, the same for every system.

`paced`: one publication every 1/rate seconds, each its own task (a slow acknowledgement
does not delay the next publication); the send time (time.monotonic_ns() just before the
call) travels in the payload and is kept here by publication id.

`windowed`: `window` publications in flight.  For a system that acknowledges each
publication (pubsub, JetStream, Redis) that is `window` workers, each waiting for its
acknowledgement before the next call.  NATS core acknowledges nothing: the publisher
sends `window` publications and then confirms them with one flush (PING/PONG: the server
has processed everything before it), so at most `window` are unconfirmed there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Protocol

from bench.e2e.common import make_payload


class Publisher(Protocol):
    #: True when `publish` returns only after the system acknowledged the publication.
    acknowledged: bool

    async def publish(self, payload: bytes) -> None: ...

    async def confirm(self) -> None:
        """For a system without acknowledgements: the server processed what was sent."""

    async def close(self) -> None: ...


@dataclass
class Published:
    sent_ns: dict[int, int] = field(default_factory=dict)
    #: publish call -> acknowledged (or confirmed), ns, by id
    ack_ns: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    first_ns: int = 0
    last_ack_ns: int = 0
    timed_out: bool = False

    def failure(self, index: int, exc: BaseException) -> None:
        if len(self.failures) < 20:
            self.failures.append(f"#{index}: {type(exc).__name__}: {exc}")
        else:
            self.failures.append("...")


async def paced(publisher: Publisher, phase: str, count: int, rate: float, timeout: float) -> Published:
    out = Published()

    async def one(index: int) -> None:
        start = time.monotonic_ns()
        out.sent_ns[index] = start
        try:
            await publisher.publish(make_payload(phase, index, start))
            if not publisher.acknowledged:
                await publisher.confirm()
        except Exception as exc:  # noqa: BLE001 - counted, not fatal
            out.failure(index, exc)
            return
        done = time.monotonic_ns()
        out.ack_ns[index] = done - start
        out.last_ack_ns = max(out.last_ack_ns, done)

    tasks: list[asyncio.Task[None]] = []
    began = time.monotonic()
    out.first_ns = time.monotonic_ns()
    try:
        for index in range(count):
            delay = began + index / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(index)))
        async with asyncio.timeout(timeout):
            await asyncio.gather(*tasks)
    except TimeoutError:
        out.timed_out = True
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return out


async def windowed(publisher: Publisher, phase: str, count: int, window: int, timeout: float) -> Published:
    out = Published()
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < count:
            index = next_index
            next_index += 1
            start = time.monotonic_ns()
            out.sent_ns[index] = start
            try:
                await publisher.publish(make_payload(phase, index, start))
            except Exception as exc:  # noqa: BLE001 - counted, not fatal
                out.failure(index, exc)
                continue
            done = time.monotonic_ns()
            out.ack_ns[index] = done - start
            out.last_ack_ns = max(out.last_ack_ns, done)

    async def batches() -> None:
        for first in range(0, count, window):
            batch = range(first, min(first + window, count))
            for index in batch:
                start = time.monotonic_ns()
                out.sent_ns[index] = start
                await publisher.publish(make_payload(phase, index, start))
            try:
                await publisher.confirm()
            except Exception as exc:  # noqa: BLE001 - counted, not fatal
                for index in batch:
                    out.failure(index, exc)
                continue
            done = time.monotonic_ns()
            for index in batch:
                out.ack_ns[index] = done - out.sent_ns[index]
            out.last_ack_ns = done

    out.first_ns = time.monotonic_ns()
    if publisher.acknowledged:
        tasks = [asyncio.create_task(worker()) for _ in range(window)]
    else:
        tasks = [asyncio.create_task(batches())]
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*tasks)
    except TimeoutError:
        out.timed_out = True
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
    return out
