"""A client session with no socket behind it: the node's messages for it wait in a queue.

The node's HTTP API (`pubsub.node.http`) and an application that runs its node in its own
process (`pubsub.client.embedded`) talk to the node's application in-process, through the
same entry points as a TCP client (``session_request``, ``control``, the delivery streams of
`pubsub.node.delivery`).  What the node sends such a client -- replies, acknowledgements,
deliveries -- are message objects put in a `QueuedSession`'s queue, never encoded.

The reader takes them one at a time, either by awaiting `QueuedSession.next` (a task per
reader, as the HTTP handlers do) or from a callback: `on_ready(callback)` calls it once per
pass of the event loop while messages wait, and the callback takes them with `take` (no
task switch per message, as `pubsub.client.library.Subscription.consume` reads a socket).
The callback never runs inside `send`: a reader that calls back into the node (publishes
from its delivery callback, say) does so from a later loop pass, as with a socket.

Backpressure: once `limit` messages wait, the session is `backlogged` and `drain` waits
until the reader has taken it down to half of that (the node's streams wait there, as they
wait for a TCP client's socket); nothing is dropped.

Ending.  `close` ends the session from the reader's side: it runs the `on_close` callbacks
(how the node learns the client is gone), wakes every waiter, and what was still queued is
discarded.  `finish` ends it from the node's side (the node stops): nothing more is
accepted and the callbacks run, but the reader still takes what was queued, then finds
the end (`next` returns None, `ended` is True), as a client reads what a closing daemon
wrote before its socket's end.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from pubsub.kernel.message import Message
from pubsub.runtime.connection import ClientSession

#: Messages a session's queue holds before the node's streams wait (backpressure).
QUEUE_LIMIT = 256


class QueuedSession(ClientSession):
    """A `ClientSession` whose messages go to a queue (see the module docstring).

    It has no connection behind it, so `ClientSession.__init__` (which takes one) is not
    called and every method that would touch the connection is replaced.
    """

    encodes = False  # messages are queued as objects, never encoded

    def __init__(self, address: str, limit: int = QUEUE_LIMIT) -> None:
        if limit < 2:
            raise ValueError("a session's queue limit must be at least 2")
        self._address = address
        self._callbacks: list[Callable[[], None]] = []
        self._gone = False
        self.streaming = False
        self._limit = limit
        self._queue: deque[Message] = deque()
        self._room = asyncio.Event()
        self._room.set()
        self._arrived = asyncio.Event()
        self._ready: Callable[[], None] | None = None
        self._ready_scheduled = False

    @property
    def address(self) -> str:
        return self._address

    @property
    def closed(self) -> bool:
        return self._gone

    # ------------------------------------------------------------------ the node's side
    def send(self, msg: Message) -> bool:
        return self.send_many([msg]) is not None

    def send_many(self, msgs: list[Message]) -> list[int] | None:
        """Queue `msgs` (one signal to the reader for all of them); None once ended."""
        if self._gone:
            return None
        queue = self._queue
        queue.extend(msgs)
        if len(queue) >= self._limit:
            self._room.clear()
        self._signal()
        return []

    def buffered(self) -> int:
        return 0

    def backlogged(self) -> bool:
        return not self._room.is_set()

    def takes_more(self) -> bool:
        return not self._gone and self._room.is_set()

    async def drain(self) -> None:
        """Wait until the reader has taken enough from the queue, or the session ended."""
        await self._room.wait()

    # ------------------------------------------------------------------ the reader's side
    @property
    def ended(self) -> bool:
        """True once the session ended and nothing is left to take."""
        return self._gone and not self._queue

    def take(self) -> Message | None:
        """The next message if one waits, else None."""
        if not self._queue:
            return None
        msg = self._queue.popleft()
        if len(self._queue) <= self._limit // 2:
            self._room.set()
        return msg

    async def next(self, timeout: float | None = None) -> Message | None:
        """The next message; None once closed.  TimeoutError after `timeout` seconds
        without one."""
        async with asyncio.timeout(timeout):
            while not self._gone and not self._queue:
                self._arrived.clear()
                await self._arrived.wait()
        return self.take()

    def on_ready(self, callback: Callable[[], None] | None) -> None:
        """Call `callback` on a later loop pass whenever messages wait or the session
        ends (None: stop); on the next pass already if that is so now."""
        self._ready = callback
        if callback is not None and (self._queue or self._gone):
            self._signal()

    def close(self) -> None:
        """The reader is done: what is queued is dropped; wake whoever waits and tell
        the node."""
        self._queue.clear()
        self.finish()

    def finish(self) -> None:
        """The node's side is done: nothing more is accepted; the reader takes what is
        queued, then finds the end."""
        if self._gone:
            return
        self._room.set()
        self._closed()  # ends it (`closed`) and runs the on_close callbacks
        self._signal()

    def _signal(self) -> None:
        self._arrived.set()
        if self._ready is not None and not self._ready_scheduled:
            self._ready_scheduled = True
            asyncio.get_running_loop().call_soon(self._run_ready)

    def _run_ready(self) -> None:
        self._ready_scheduled = False
        if self._ready is not None and (self._queue or self._gone):
            self._ready()
