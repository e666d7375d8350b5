"""One client session at a broker: subscriptions that outlive their connection (issue 46 item 5).

A session is opened by a `ClientSessionRequest` with no token; the broker answers with a
token (128 random bits, the session's only credential).  Its subscriptions belong to the
session, not to the connection: when the connection drops, the session waits `expiry`
seconds for the client to come back with `ClientSessionRequest(token, after)`, and keeps
what is delivered meanwhile.  Every delivery in a session is numbered (`Deliver.seq`, from 1);
the session keeps the last `keep` of them, so a client that resumes after number `after` gets
every later one again, in order, none twice, preceded by a `DeliveryGap` with the count of
those no longer kept (``overflow``).  Deliveries a connected client did not read in time are
not written (``slow_client``): a gap notice with their count comes before the next one written,
and a resume hands them over if they are still kept.  A session restored after the broker's
restart (`broker.clientstate`) kept nothing: a resume there starts with a gap of unknown size
(``broker_restarted``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from broker.cores.language.filters import Filter
from broker.cores.messages import Deliver
from pubsub.runtime.connection import ClientSession

#: Seconds a disconnected session waits for its client (the default of --session-expiry).
DEFAULT_EXPIRY = 60.0
#: Deliveries a session keeps for a resume (the default of --session-keep).
DEFAULT_KEEP = 10_000


@dataclass
class DurableSession:
    """A session's subscriptions, its numbered deliveries and its connection (if any)."""

    token: str
    #: the client name the core files the session's subscriptions under ("~s<n>")
    ref: str
    keep: int
    subscriptions: dict[str, Filter] = field(default_factory=dict)
    connection: ClientSession | None = None
    #: when the connection went away (None while connected)
    detached_at: float | None = None
    #: the number of the last delivery
    seq: int = 0
    kept: deque[Deliver] = field(default_factory=deque)
    #: deliveries not written to the connected client since the last gap notice
    unwritten: int = 0
    #: restored from the state file after a restart: nothing kept from before
    restored: bool = False

    def record(self, msg: Deliver) -> Deliver:
        """Number a delivery and keep it (the oldest kept is forgotten beyond `keep`)."""
        self.seq += 1
        numbered = Deliver(msg.client, msg.pid, msg.publisher, msg.attrs, msg.sub_ids, self.seq)
        self.kept.append(numbered)
        if len(self.kept) > self.keep:
            self.kept.popleft()
        return numbered

    def after(self, after: int) -> tuple[int, list[Deliver]]:
        """What a resume after delivery number `after` hands over: how many of the later
        ones are no longer kept, and the kept ones, in order."""
        after = max(0, min(after, self.seq))
        first = self.kept[0].seq if self.kept else self.seq + 1
        missed = max(0, first - after - 1)
        return missed, [d for d in self.kept if d.seq > after]

    def expired(self, now: float, expiry: float) -> bool:
        return self.detached_at is not None and now - self.detached_at > expiry
