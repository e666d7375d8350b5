"""Running client commands: stopping cleanly on Ctrl-C / SIGTERM, and publishing many items
with a bounded number in flight.

Shared by the skip-ring commands (`pubsub.cli.main`) and the broker-mode commands (`broker.cli`).

Two ways to publish many items:

* `publish_pipelined` -- items from an iterator (read in a worker thread), results reported
  in order; it knows nothing of signals (a stop cancels it).
* `publish_window` -- items from an async source (`stdin_lines`: standard input read by a
  daemon thread, so that a blocked read never holds the process), each result reported as
  soon as it and those before it are in, and a graceful stop: on SIGINT/SIGTERM
  (`until_done`) reading stops, the publications in flight get `ACK_GRACE` seconds to be
  acknowledged, and the `Outcome` says which were acknowledged and which are unknown
  (sent, not acknowledged: they may or may not be stored).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")
E = TypeVar("E", bound=Exception)

#: Seconds a client command may spend closing its connections after Ctrl-C / SIGTERM.
STOP_GRACE = 2.0


async def until_stopped(make: Callable[[], Awaitable[Any]]) -> None:
    """Run `make()` until it ends or SIGINT/SIGTERM arrives; then stop it within STOP_GRACE.

    The signals are handled by the event loop itself, so an interrupted command closes its
    streams and exits 0 without depending on how a KeyboardInterrupt unwinds the loop.  An
    error the cancelled work raises while stopping is retrieved and dropped: we are
    stopping anyway (e.g. the daemon went away at the same moment).
    """
    loop = asyncio.get_running_loop()
    work = asyncio.ensure_future(make())
    stop = loop.create_future()

    def request_stop() -> None:
        if not stop.done():
            stop.set_result(None)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, request_stop)
    try:
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    if work.done():
        work.result()
        return
    work.cancel()
    await asyncio.wait({work}, timeout=STOP_GRACE)
    if work.done() and not work.cancelled():
        work.exception()


#: Publications in flight at once when a command publishes many (lines from stdin).
PUBLISH_WINDOW = 32


async def publish_pipelined(
    items: Iterator[T],
    publish: Callable[[T], Awaitable[R]],
    on_done: Callable[[R], None],
    failure_type: type[E],
) -> tuple[int, E | None]:
    """Publish `items` with at most PUBLISH_WINDOW requests in flight; report results in order.

    The items are read in a worker thread (they may come from stdin).  Reading stops at the
    first failure -- of a request, or an item that raises `failure_type` while being read --
    and the requests already sent are still awaited.  Returns (requests that succeeded, the
    first failure or None); `on_done` is called with each success, in order.
    """
    loop = asyncio.get_running_loop()
    window: deque[asyncio.Future[R]] = deque()
    done = 0
    failure: E | None = None

    async def settle() -> None:
        nonlocal done, failure
        try:
            result = await window.popleft()
        except failure_type as exc:
            failure = failure or exc
            return
        done += 1
        on_done(result)

    while failure is None:
        try:
            item = await loop.run_in_executor(None, next, items, _END)
        except failure_type as exc:
            failure = exc
            break
        if item is _END:
            break
        window.append(asyncio.ensure_future(publish(item)))
        while window and (len(window) >= PUBLISH_WINDOW or window[0].done()):
            await settle()
    while window:
        await settle()
    return done, failure


_END: Any = object()


# --- graceful stops -----------------------------------------------------------------------------
#: Seconds the publications in flight get to be acknowledged after SIGINT/SIGTERM.
ACK_GRACE = 1.0


class Stopping:
    """SIGINT / SIGTERM as an event the work watches (`until_done`)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        #: The signal's name (SIGINT, SIGTERM) once one arrived.
        self.signal: str | None = None

    def set(self, signum: int) -> None:
        if self.signal is None:
            self.signal = signal.Signals(signum).name
        self.event.set()

    @property
    def requested(self) -> bool:
        return self.event.is_set()


async def until_done(make: Callable[[Stopping], Awaitable[Any]], grace: float = STOP_GRACE) -> None:
    """Run `make(stopping)`, which finishes by itself once `stopping` is set by SIGINT or
    SIGTERM; if it has not finished `ACK_GRACE + grace` seconds after the signal, cancel it."""
    loop = asyncio.get_running_loop()
    stopping = Stopping()
    work = asyncio.ensure_future(make(stopping))
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set, signum)
    try:
        stop = asyncio.ensure_future(stopping.event.wait())
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not work.done():
            await asyncio.wait({work}, timeout=ACK_GRACE + grace)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    if not work.done():
        work.cancel()
        await asyncio.wait({work}, timeout=grace)
        return
    work.result()


# --- standard input, line by line -----------------------------------------------------------------
#: Bytes asked of the input per read.
READ_BYTES = 64 * 1024


async def stdin_lines(fd: int = 0, queued: int = PUBLISH_WINDOW) -> AsyncIterator[tuple[int, bytes]]:
    """(line number from 1, line without its end of line) for every line of file
    descriptor `fd`; a last line without a newline counts too.

    A daemon thread reads the descriptor with ``os.read`` (no Python-level lock is held while
    it waits), at most `queued` lines ahead of the consumer: a process that stops while the
    input is idle (``tail -F log | pubsub publish``) is not held by the read.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[int, bytes] | BaseException | None] = asyncio.Queue()
    #: Lines the reader may hand over before the consumer takes them (the bound above).  The
    #: thread waits on it and hands over with a plain callback: a coroutine made in the
    #: thread would be left un-awaited (and warned about) if the loop closed first.
    room = threading.Semaphore(queued)

    def hand_over(item: tuple[int, bytes] | BaseException | None) -> bool:
        room.acquire()
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: we are exiting
            return False
        return True

    def read() -> None:
        number = 0
        rest = b""
        try:
            while True:
                data = os.read(fd, READ_BYTES)
                if not data:
                    break
                rest += data
                *lines, rest = rest.split(b"\n")
                for line in lines:
                    number += 1
                    if not hand_over((number, line[:-1] if line.endswith(b"\r") else line)):
                        return
            if rest:
                number += 1
                if not hand_over((number, rest)):
                    return
        except OSError as exc:
            hand_over(exc)
            return
        hand_over(None)

    threading.Thread(target=read, name="stdin-reader", daemon=True).start()
    while True:
        item = await queue.get()
        room.release()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


# --- publishing with a graceful stop --------------------------------------------------------------
@dataclass
class Outcome(Generic[T, R, E]):
    """How a `publish_window` run ended."""

    #: Items acknowledged, in the order they were read.
    acknowledged: int = 0
    #: The first failure (reading stops there), or None.
    failure: E | None = None
    #: The number of the item whose request failed first (None: none did, or reading failed).
    failed_number: int | None = None
    #: Numbers of the items acknowledged after the first failure: sent before it was known
    #: (they were in flight), so stored although the run stopped at the failure.
    acknowledged_after_failure: list[int] = field(default_factory=list)
    #: (number, item) sent and neither acknowledged nor refused when the run stopped.
    unknown: list[tuple[int, T]] = field(default_factory=list)
    #: Failures of publications in flight after the first one, (number, error).
    also_failed: list[tuple[int, E]] = field(default_factory=list)
    #: The signal that stopped the run (SIGINT, SIGTERM), or None when the input ended.
    stopped_by: str | None = None


async def publish_window(
    source: AsyncIterator[tuple[int, T]],
    publish: Callable[[T], Awaitable[R]],
    on_done: Callable[[int, R], None],
    failure_type: type[E],
    stopping: Stopping | None = None,
    *,
    window: int = PUBLISH_WINDOW,
    grace: float = ACK_GRACE,
) -> Outcome[T, R, E]:
    """Publish the numbered items of `source` with at most `window` in flight.

    `on_done(number, result)` is called for each success as soon as it and every item before
    it are settled (so in order, and never waiting for input that has not come).  Reading
    stops at the first failure (of a request, or of reading: `failure_type` raised by the
    source) or when `stopping` is set; after a failure the requests in flight are awaited
    (those acknowledged are listed in `Outcome.acknowledged_after_failure`), after a stop
    they get `grace` seconds and whatever is still open is cancelled and reported as
    unknown.
    """
    outcome: Outcome[T, R, E] = Outcome()
    flight: deque[tuple[int, T, asyncio.Future[R]]] = deque()
    stop_wait = asyncio.ensure_future(stopping.event.wait()) if stopping is not None else None
    reading: asyncio.Future[tuple[int, T]] | None = None
    source_open = True

    def settle_heads() -> None:
        while flight and flight[0][2].done():
            number, _, future = flight.popleft()
            _settle(number, future)

    def _settle(number: int, future: asyncio.Future[R]) -> None:
        exc = future.exception() if not future.cancelled() else None
        if future.cancelled():
            return
        if exc is None:
            outcome.acknowledged += 1
            if outcome.failure is not None:
                outcome.acknowledged_after_failure.append(number)
            on_done(number, future.result())
        elif isinstance(exc, failure_type):
            if outcome.failure is None:
                outcome.failure, outcome.failed_number = exc, number
            else:
                outcome.also_failed.append((number, exc))
        else:
            raise exc

    try:
        while True:
            settle_heads()
            if stopping is not None and stopping.requested:
                break
            if outcome.failure is not None or not source_open:
                if not flight:
                    break
            elif reading is None and len(flight) < window:
                reading = asyncio.ensure_future(anext(source))
            waits: set[asyncio.Future[Any]] = set()
            if reading is not None:
                waits.add(reading)
            if flight:
                waits.add(flight[0][2])
            if stop_wait is not None:
                waits.add(stop_wait)
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if reading is not None and reading.done():
                done, reading = reading, None
                try:
                    number, item = done.result()
                except StopAsyncIteration:
                    source_open = False
                except failure_type as exc:
                    outcome.failure = exc
                else:
                    flight.append((number, item, asyncio.ensure_future(publish(item))))
        if flight:  # stopped: the publications in flight get `grace` seconds
            await asyncio.wait([f for _, _, f in flight], timeout=grace)
            for number, item, future in flight:
                if future.done():
                    _settle(number, future)
                else:
                    future.cancel()
                    outcome.unknown.append((number, item))
            await asyncio.gather(*(f for _, _, f in flight), return_exceptions=True)
            flight.clear()
    finally:
        if reading is not None:
            reading.cancel()
        if stop_wait is not None:
            stop_wait.cancel()
        for _, _, future in flight:
            future.cancel()
    if stopping is not None and stopping.requested:
        outcome.stopped_by = stopping.signal
    return outcome
