"""Running a client command's coroutine so that Ctrl-C / SIGTERM stop it cleanly.

Shared by the skip-ring commands (`pubsub.cli`) and the broker-mode commands (`broker.cli`).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any

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
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, lambda: stop.done() or stop.set_result(None))
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
