"""The Link Status Table's view of one broker -> neighbour link (paper 002, §9.2, Eq. 3).

What a broker's core sends to a neighbour takes the runtime's send path like every
daemon's message: into the runtime's queue for that peer (`pubsub.runtime.links`), which
also holds the link's optional rate limit (``--link-rate x,i=R``, or the admin action
``link_rate`` at run time, `broker.faults`), so that congestion can be produced on purpose.

`NeighbourLink` reads the runtime's counters of that queue.  Every t_w seconds the daemon
calls `window`, which reports what the Link Status Table needs
(`broker.cores.corebase.LinkStatusTable`):

- Q_l: messages waiting in the queue now;
- Q_in: messages that entered it during the window;
- Q_out: messages that left it, i.e. were written to the connection, during the window.

The queue is bounded by the runtime's ``send_queue_bound`` (``PUBSUB_SEND_QUEUE_BOUND``):
beyond it the oldest message is dropped and counted (``dropped``) -- the paper's brokers
have unbounded queues, a daemon cannot.
"""

from __future__ import annotations

from typing import Any, Protocol

from pubsub.kernel.message import Ref


class LinkCounters(Protocol):
    """What a link needs of the runtime (`pubsub.runtime.net.Runtime`)."""

    def link_counters(self, ref: Ref) -> tuple[int, int, int, int]: ...

    def enqueued_by_kind(self, ref: Ref) -> dict[str, int]: ...

    def set_rate(self, ref: Ref, rate: float | None) -> None: ...

    def rate(self, ref: Ref) -> float | None: ...


class NeighbourLink:
    """The output link towards one neighbour broker (see the module docstring)."""

    def __init__(self, bid: str, address: str, kind: str, runtime: LinkCounters) -> None:
        self.bid = bid
        self.address = address
        self.ref = Ref(address)
        self.kind = kind  # "aLink" or "iLink"
        self._runtime = runtime
        self._prev_in = 0
        self._prev_out = 0
        #: (Q_l, Q_in, Q_out) of the last completed window.
        self.last_window: tuple[int, int, int] = (0, 0, 0)

    @property
    def rate(self) -> float | None:
        """Messages per second at most (None: no limit)."""
        return self._runtime.rate(self.ref)

    def set_rate(self, rate: float | None) -> None:
        """Limit the link to `rate` messages per second (None lifts the limit; what waits
        then leaves at once, in order).  ValueError unless `rate` is None or > 0."""
        self._runtime.set_rate(self.ref, rate)

    def queue_len(self) -> int:
        """Q_l now."""
        return self._runtime.link_counters(self.ref)[0]

    @property
    def sent(self) -> int:
        """Messages written towards the neighbour so far."""
        return self._runtime.link_counters(self.ref)[2]

    @property
    def dropped(self) -> int:
        """Messages lost so far (queue full, or the neighbour unreachable)."""
        return self._runtime.link_counters(self.ref)[3]

    def window(self) -> tuple[int, int, int]:
        """Close the current window: (Q_l, Q_in, Q_out) for the Link Status Table."""
        queued, enqueued, written, _ = self._runtime.link_counters(self.ref)
        self.last_window = (queued, enqueued - self._prev_in, written - self._prev_out)
        self._prev_in, self._prev_out = enqueued, written
        return self.last_window

    def snapshot(self) -> dict[str, Any]:
        """The link's counters (JSON-able), for the daemon's status reply."""
        queued, enqueued, written, dropped = self._runtime.link_counters(self.ref)
        q_len, q_in, q_out = self.last_window
        return {
            "address": self.address,
            "kind": self.kind,
            "queue_len": queued,
            "window": {"queue_len": q_len, "q_in": q_in, "q_out": q_out},
            "rate_limit": self.rate,
            "enqueued": enqueued,
            "sent": written,
            "dropped": dropped,
            "sent_by_kind": dict(sorted(self._runtime.enqueued_by_kind(self.ref).items())),
        }
