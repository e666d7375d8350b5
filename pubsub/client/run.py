"""Running client commands: stopping cleanly on Ctrl-C / SIGTERM, and publishing many items
with a bounded number in flight.

Shared by the skip-ring commands (`pubsub.cli.main`) and the broker-mode commands (`broker.cli`).
"""

from __future__ import annotations

import asyncio
import signal
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

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
