"""Publication copies handed to a neighbour and not yet acknowledged (issue 46 item 2) -- no I/O.

A copy written to a socket can still vanish with the broker at the other end.  So every broker
counts the publication copies it receives from each neighbour, and every heartbeat it sends
that neighbour carries the count (`broker.cores.control.BrokerHeartbeat.acked`, with the
incarnation of the neighbour it counts for).  The sender keeps each copy until a count covers
it.  When the neighbour is suspected, the copies it has not acknowledged are taken back and
sent around it (OctopiA, `broker.cores.octopia`) or counted as possibly lost (the baseline);
a copy the suspect did handle after all (it was only slow) reaches the exits twice, and the
second is suppressed there (`SeenPublications`).

`InFlight` holds at most `limit` copies per neighbour; beyond, the oldest is let go unprotected
and counted.  After a neighbour's restart its counts start again from zero on both sides.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Generic, TypeVar

M = TypeVar("M")
#: Copies kept per neighbour for a possible reroute (a heartbeat period's worth at a high rate).
DEFAULT_LIMIT = 8192
#: Publications remembered per broker for suppressing duplicates.
DEFAULT_SEEN = 65536


class InFlight(Generic[M]):
    """The unacknowledged copies per neighbour, and the copies received from each."""

    def __init__(self, neighbours: Iterable[str], limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.sent: dict[str, int] = dict.fromkeys(neighbours, 0)
        self.received: dict[str, int] = dict.fromkeys(self.sent, 0)
        self.pending: dict[str, deque[tuple[int, M]]] = {n: deque() for n in self.sent}
        #: copies let go unprotected because a neighbour's buffer was full
        self.unprotected = 0

    def sending(self, neighbour: str, copy: M) -> None:
        self.sent[neighbour] += 1
        held = self.pending[neighbour]
        held.append((self.sent[neighbour], copy))
        if len(held) > self.limit:
            held.popleft()
            self.unprotected += 1

    def receiving(self, neighbour: str) -> None:
        self.received[neighbour] += 1

    def acknowledged(self, neighbour: str, count: int) -> None:
        """The neighbour has handled the first `count` copies sent to it."""
        held = self.pending.get(neighbour)
        while held and held[0][0] <= count:
            held.popleft()

    def take(self, neighbour: str) -> list[M]:
        """The unacknowledged copies for `neighbour`, given up here."""
        held = self.pending[neighbour]
        out = [copy for _, copy in held]
        held.clear()
        return out

    def restarted(self, neighbour: str) -> list[M]:
        """The neighbour started again: both counts start from zero; what it had not
        acknowledged is returned (its former incarnation will never handle it)."""
        out = self.take(neighbour)
        self.sent[neighbour] = self.received[neighbour] = 0
        return out


class SeenPublications:
    """The last `limit` publication keys a broker handled (oldest forgotten first)."""

    def __init__(self, limit: int = DEFAULT_SEEN) -> None:
        self.limit = limit
        self._keys: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def first_time(self, key: tuple[str, str, str]) -> bool:
        """True the first time `key` is offered (and remembers it), False after."""
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self.limit:
            self._keys.popitem(last=False)
        return True
