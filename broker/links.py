"""The output queue of one broker -> neighbour link, with an optional rate limit (§9.2, Eq. 3).

The broker daemon (`broker.app`) hands every message its core sends to a neighbour to that
neighbour's `OutLink`.  The link's output queue, in the sense of §9.2, is two queues in a row:

1. this object's own queue, which exists only while the link is rate limited
   (``--link-rate x,i=R``, or the admin action ``link_rate`` at run time, `broker.faults`): a pump task
   moves at most R messages per second from it into
2. the network runtime's per-peer send queue (`pubsub.runtime.net`), from which the writer task puts
   frames on the TCP connection as fast as the peer reads them.

Without a limit a message goes straight to the runtime (FIFO order is kept when a limit is
lifted: what is queued here is flushed first).  Every t_w seconds the daemon calls `window`,
which reports what the Link Status Table needs (`broker.cores.corebase.LinkStatusTable`):

- Q_l: messages waiting in both queues now;
- Q_in: messages that entered the link during the window;
- Q_out: messages that left it, i.e. were written to the connection -- the messages the pump
  handed to the runtime minus the growth of the runtime's queue over the window.

Bounded memory: the queue holds at most `bound` messages; a message beyond that is dropped
and counted (``dropped``), which loses it -- the paper's brokers have unbounded queues, a
daemon cannot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from pubsub.kernel.message import Message


class OutLink:
    """The output queue towards one neighbour broker (see the module docstring)."""

    def __init__(
        self,
        bid: str,
        address: str,
        kind: str,
        emit: Callable[[Message], None],
        runtime_queued: Callable[[], int],
        *,
        bound: int = 100_000,
        rate: float | None = None,
    ) -> None:
        self.bid = bid
        self.address = address
        self.kind = kind  # "aLink" or "iLink"
        self._emit_fn = emit
        self._runtime_queued = runtime_queued
        self.bound = bound
        self.rate = rate
        self.queue: deque[Message] = deque()
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._next_at = 0.0
        # lifetime counters
        self.enqueued = 0
        self.sent = 0
        self.dropped = 0
        self.sent_by_kind: Counter[str] = Counter()
        # the current window
        self._win_in = 0
        self._win_sent = 0
        self._prev_runtime_queued = 0
        #: (Q_l, Q_in, Q_out) of the last completed window.
        self.last_window: tuple[int, int, int] = (0, 0, 0)

    # --- the daemon's side -------------------------------------------------------------------
    def put(self, msg: Message) -> bool:
        """Queue `msg` for the neighbour; False (counted) if the queue is full."""
        self.enqueued += 1
        self._win_in += 1
        if self.rate is None and not self.queue:
            self._emit(msg)
            return True
        if len(self.queue) >= self.bound:
            self.dropped += 1
            return False
        self.queue.append(msg)
        self._wake.set()
        return True

    def set_rate(self, rate: float | None) -> None:
        """Limit the link to `rate` messages per second (None: no limit; what is queued is
        handed to the runtime at once, in order)."""
        if rate is not None and not rate > 0:
            raise ValueError(f"a link rate must be > 0 messages per second, not {rate}")
        self.rate = rate
        if rate is None:
            self._flush()
        self._changed.set()
        self._wake.set()

    def queue_len(self) -> int:
        """Q_l now: messages waiting here and in the runtime's queue."""
        return len(self.queue) + self._runtime_queued()

    def window(self) -> tuple[int, int, int]:
        """Close the current window: (Q_l, Q_in, Q_out) for the Link Status Table."""
        runtime_queued = self._runtime_queued()
        q_len = len(self.queue) + runtime_queued
        q_in = self._win_in
        q_out = max(0, self._win_sent - (runtime_queued - self._prev_runtime_queued))
        self._win_in = 0
        self._win_sent = 0
        self._prev_runtime_queued = runtime_queued
        self.last_window = (q_len, q_in, q_out)
        return self.last_window

    def snapshot(self) -> dict[str, Any]:
        """The link's counters (JSON-able), for the daemon's status reply."""
        q_len, q_in, q_out = self.last_window
        return {
            "address": self.address,
            "kind": self.kind,
            "queue_len": self.queue_len(),
            "queued_here": len(self.queue),
            "queued_runtime": self._runtime_queued(),
            "window": {"queue_len": q_len, "q_in": q_in, "q_out": q_out},
            "rate_limit": self.rate,
            "enqueued": self.enqueued,
            "sent": self.sent,
            "dropped": self.dropped,
            "sent_by_kind": dict(sorted(self.sent_by_kind.items())),
        }

    # --- the pump ------------------------------------------------------------------------------
    async def run(self) -> None:
        """Move queued messages to the runtime, at most `rate` per second (a task)."""
        loop = asyncio.get_running_loop()
        while True:
            if not self.queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            rate = self.rate
            if rate is None:
                self._flush()
                continue
            now = loop.time()
            wait = self._next_at - now
            if wait > 0:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), wait)
                continue
            self._emit(self.queue.popleft())
            self._next_at = max(self._next_at, now) + 1.0 / rate

    def _flush(self) -> None:
        while self.queue:
            self._emit(self.queue.popleft())

    def _emit(self, msg: Message) -> None:
        self.sent += 1
        self._win_sent += 1
        self.sent_by_kind[msg.kind] += 1
        self._emit_fn(msg)
