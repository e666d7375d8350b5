"""What the OctopiA and PADRES broker cores share: clients, the Link Status Table, checks.

A broker core is a state machine without I/O (ARCHITECTURE): ``handle(msg, now)`` returns the
`Send`s it wants made.  Destinations are SCOT broker ids ``"x,i"`` for other brokers and the
client's reference for a client (a `Deliver` or a `ClientRefused`); the runtime tells them
apart by the message type (`broker.cores.messages.TO_CLIENT`) and maps broker ids to addresses.

The client operations are methods (`advertise`, `unadvertise`, `subscribe`, `unsubscribe`,
`publish`) and also arrive as messages (`ClientAdvertise`, ...) through ``handle``.  Clients
name their advertisements, subscriptions and publications with their own ids; the core gives
every advertisement and subscription a network-wide unique id ``"<broker>/a<n>"`` /
``"<broker>/s<n>"`` (a fresh one per incarnation, so a re-advertisement is never confused
with its predecessor by messages still in flight).

Bad input never raises: a refused client operation yields a `ClientRefused` to the client,
a broker message from a non-neighbour, about an unknown id or otherwise out of place is
dropped and counted in ``counters`` (a `collections.Counter` keyed by a short reason).

`LinkStatusTable` is §9.2's LST: for each outgoing link, the output-queue length Q_l and the
numbers of messages that entered (Q_in) and left (Q_out) the queue during the last window
t_w, reported by the runtime (`BrokerCore.link_status`).  Eq. 3: the link is congested when
Q_l * CE > tau, with the congestion element CE = (1 + Q_in) / (1 + Q_out).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.cores.failures import Change
from broker.cores.inflight import InFlight
from broker.cores.language.filters import Filter
from broker.cores.language.values import FilterError, Value, validate_publication
from broker.cores.messages import (
    Attrs,
    ClientAdvertise,
    ClientPublish,
    ClientRefused,
    ClientSubscribe,
    ClientUnadvertise,
    ClientUnsubscribe,
    Deliver,
    PadresPublish,
    ScotPublish,
)
from broker.cores.topology import BrokerId, Scot
from pubsub.kernel.message import Message, Ref, Send

#: The publication copies between brokers (tracked until acknowledged).
PUBLICATIONS = (ScotPublish, PadresPublish)

#: Default congestion threshold tau and window t_w (§10: tau = 10, t_w = 50 ms).
DEFAULT_TAU = 10.0
DEFAULT_TW = 0.05

#: A broker-to-broker message handler of a core: ``handler(msg, now)`` -> the sends.  Its
#: message parameter is the one type it is registered under in `BrokerCore._handlers`, so
#: it is typed Any here (a handler of `Message` could not be registered with its narrower
#: parameter); `handle` looks it up by ``type(msg)``, so it only ever gets its own type.
Handler = Callable[[Any, float], list[Send]]


def conforms(adv: Filter, attrs: Mapping[str, Value]) -> bool:
    """A publication conforms to an advertisement: it matches it and carries only attributes
    the advertisement names (the overlap convention of `broker.cores.language.relations.overlaps`)."""
    return adv.matches(attrs) and adv.attributes.issuperset(attrs)


def civ_bits(civ: int, m: int) -> str:
    """A CIV as the paper prints it: m bits, index 0 rightmost (§8, Fig. 6)."""
    return format(civ & ((1 << m) - 1), f"0{m}b") if m else ""


@dataclass(slots=True)
class LinkStatus:
    """One LST row: the last report for one outgoing link."""

    queue_len: int = 0
    q_in: int = 0
    q_out: int = 0
    updated: float = 0.0
    #: reports (t_w windows) after which the link was congested: a monotonic count, so a
    #: congestion that lasted one window stays visible to a reader that polls less often
    congested_windows: int = 0

    @property
    def ce(self) -> float:
        """The congestion element (1 + Q_in) / (1 + Q_out) of Eq. 3."""
        return (1 + self.q_in) / (1 + self.q_out)

    @property
    def congestion(self) -> float:
        """The left side of Eq. 3: Q_l * CE."""
        return self.queue_len * self.ce


class LinkStatusTable:
    """§9.2's Link Status Table with the test of Eq. 3."""

    def __init__(self, tau: float = DEFAULT_TAU, t_w: float = DEFAULT_TW) -> None:
        if tau < 0 or t_w <= 0:
            raise ValueError(f"tau must be >= 0 and t_w > 0 (got tau={tau}, t_w={t_w})")
        self.tau = tau
        self.t_w = t_w
        self.rows: dict[BrokerId, LinkStatus] = {}

    def update(self, link: BrokerId, queue_len: int, q_in: int, q_out: int, now: float) -> None:
        row = self.rows.get(link)
        if row is None:
            row = self.rows[link] = LinkStatus()
        row.queue_len = max(0, int(queue_len))
        row.q_in = max(0, int(q_in))
        row.q_out = max(0, int(q_out))
        row.updated = now
        if row.congestion > self.tau:
            row.congested_windows += 1

    def queue_len(self, link: BrokerId) -> int:
        row = self.rows.get(link)
        return 0 if row is None else row.queue_len

    def congested_windows(self, link: BrokerId) -> int:
        """How many reports on `link` found it congested (0 for a link never reported)."""
        row = self.rows.get(link)
        return 0 if row is None else row.congested_windows

    def overloaded(self, link: BrokerId) -> bool:
        """Eq. 3: Q_l * CE > tau (a link never reported is not congested)."""
        row = self.rows.get(link)
        return row is not None and row.congestion > self.tau

    def least_loaded(self, links: Iterable[BrokerId]) -> BrokerId | None:
        """The link with the least Q_l among the uncongested ones, or among all when every one
        is congested; ties go to the earlier link in `links`.  None for no links."""
        best: tuple[bool, int, int] | None = None
        choice: BrokerId | None = None
        for k, link in enumerate(links):
            key = (self.overloaded(link), self.queue_len(link), k)
            if best is None or key < best:
                best, choice = key, link
        return choice

    def snapshot(self) -> dict[BrokerId, dict[str, Any]]:
        return {
            link: {
                "queue_len": row.queue_len,
                "q_in": row.q_in,
                "q_out": row.q_out,
                "ce": round(row.ce, 4),
                "congested": row.congestion > self.tau,
                "congested_windows": row.congested_windows,
            }
            for link, row in sorted(self.rows.items())
        }


class BrokerCore:
    """The client side and the dispatch shared by `OctopiaBroker` and `PadresBroker`."""

    protocol = ""

    def __init__(
        self, topo: Scot, me: BrokerId, *, tau: float = DEFAULT_TAU, t_w: float = DEFAULT_TW, epoch: str = ""
    ) -> None:
        self.topo = topo
        self.me = me
        #: Written into every id this core makes (``"<broker>/<epoch>a<n>"``): a restarted
        #: broker's ids never meet its predecessor's in its neighbours' tables.
        self.epoch = epoch
        #: The neighbours the failure detector suspects (`neighbour_changed`).
        self.suspects: set[BrokerId] = set()
        #: Publication copies sent and not yet acknowledged, per neighbour (`broker.cores.inflight`).
        self.inflight: InFlight[Message] = InFlight(topo.neighbours(me))
        self.x, self.i = topo.locate(me)
        self.neighbours = topo.neighbours(me)
        self._neighbour_set = frozenset(self.neighbours)
        self.lst = LinkStatusTable(tau, t_w)
        self.counters: Counter[str] = Counter()
        #: (client, client's advertisement id) -> network-wide id, in creation order.
        self.local_advs: dict[tuple[str, str], str] = {}
        #: (client, client's subscription id) -> network-wide id.
        self.local_subs: dict[tuple[str, str], str] = {}
        #: network-wide subscription id -> (client, client's id), for the local subscriptions.
        self.sub_owner: dict[str, tuple[str, str]] = {}
        self._seq = 0
        #: Inter-broker hops after which a publication is dropped (a guard; never reached).
        self.max_hops = 2 * len(topo) + 2
        self._handler_map: dict[type[Message], Handler] | None = None

    # --- identifiers -------------------------------------------------------------------------
    def _new_id(self, tag: str) -> str:
        self._seq += 1
        return f"{self.me}/{self.epoch}{tag}{self._seq}"

    # --- the runtime's side ------------------------------------------------------------------
    def timeout(self, now: float, rng: object = None) -> list[Send]:
        """Nothing is periodic in the broker cores (the LST is fed by `link_status`)."""
        return []

    def start(self, now: float) -> list[Send]:
        """The runtime starts this core (a first start or a restart): what it sends its
        neighbours then (OctopiA: its tables, `broker.cores.resync`)."""
        return []

    def neighbour_changed(self, change: Change, now: float) -> list[Send]:
        """The failure detector (`broker.cores.failures`) suspected, cleared or noticed the
        restart of a neighbour.  Here the suspicion is only recorded; OctopiA routes around
        suspects and resyncs the others."""
        if change.neighbour not in self._neighbour_set:
            self.counters["change_of_a_stranger"] += 1
            return []
        n = change.neighbour
        if change.kind == "suspected":
            self.suspects.add(n)
            return self._given_back(n, self.inflight.take(n))
        if change.kind == "cleared":
            self.suspects.discard(n)
            return []
        return self._given_back(n, self.inflight.restarted(n))

    def acknowledged(self, neighbour: BrokerId, count: int) -> None:
        """The neighbour's heartbeat: it has handled the first `count` publication copies
        this broker sent it (since its, or this broker's, last start)."""
        if neighbour in self._neighbour_set:
            self.inflight.acknowledged(neighbour, count)

    def received_from(self, neighbour: BrokerId) -> int:
        """Publication copies handled from `neighbour` (what a heartbeat to it acknowledges)."""
        return self.inflight.received.get(neighbour, 0)

    def _given_back(self, neighbour: BrokerId, copies: list[Message]) -> list[Send]:
        """Copies a suspected or restarted neighbour did not acknowledge: counted here (the
        baseline cannot route around a broker); OctopiA sends them around it."""
        self.counters["unacknowledged_copies"] += len(copies)
        return []

    def _around_suspects(self, sends: list[Send], now: float) -> list[Send]:
        """The sends of one input with the suspects taken into account; the baseline keeps
        sending to them (whatever reaches a hung broker is handled when it wakes)."""
        return sends

    def _track(self, sends: list[Send]) -> list[Send]:
        """Keep every publication copy handed to a neighbour until it is acknowledged."""
        for dest, msg in sends:
            if isinstance(msg, PUBLICATIONS) and dest in self._neighbour_set:
                self.inflight.sending(dest, msg)
        return sends

    def link_status(
        self, link: BrokerId, queue_len: int, q_in: int, q_out: int, now: float
    ) -> None:
        """The runtime's report for the output queue towards neighbour `link` over the last
        t_w: its length now, and how many messages entered and left it in the window."""
        if link not in self._neighbour_set:
            self.counters["lst_unknown_link"] += 1
            return
        self.lst.update(link, queue_len, q_in, q_out, now)

    def handle(self, msg: Message, now: float) -> list[Send]:
        """Process one message (from a neighbour broker or from a local client)."""
        if isinstance(msg, PUBLICATIONS) and msg.sender in self._neighbour_set:
            self.inflight.receiving(msg.sender)
        sends = self._handle(msg, now)
        return self._track(self._around_suspects(sends, now) if self.suspects else sends)

    def _handle(self, msg: Message, now: float) -> list[Send]:
        if isinstance(msg, ClientPublish):
            return self.publish(msg.client, msg.attrs, now, pid=msg.pid)
        if isinstance(msg, ClientSubscribe):
            return self.subscribe(msg.client, msg.sub_id, msg.sub, now)
        if isinstance(msg, ClientUnsubscribe):
            return self.unsubscribe(msg.client, msg.sub_id, now)
        if isinstance(msg, ClientAdvertise):
            return self.advertise(msg.client, msg.adv_id, msg.adv, now)
        if isinstance(msg, ClientUnadvertise):
            return self.unadvertise(msg.client, msg.adv_id, now)
        if self._handler_map is None:
            self._handler_map = self._handlers()
        handler = self._handler_map.get(type(msg))
        if handler is None:
            self.counters["unexpected_message"] += 1
            return []
        sender = getattr(msg, "sender", None)
        if sender not in self._neighbour_set:
            self.counters["not_a_neighbour"] += 1
            return []
        return handler(msg, now)

    def _handlers(self) -> dict[type[Message], Handler]:
        raise NotImplementedError

    # --- client operations (validated here, protocol work in the subclasses) -------------------
    def advertise(self, client: str, adv_id: str, adv: Filter, now: float = 0.0) -> list[Send]:
        if not isinstance(adv, Filter):
            return [self._refuse(client, "bad_filter", "an advertisement must be a Filter")]
        if (client, adv_id) in self.local_advs:
            return [self._refuse(client, "duplicate_id", f"advertisement {adv_id!r} exists")]
        uid = self._new_id("a")
        self.local_advs[(client, adv_id)] = uid
        return self._advertise(client, uid, adv, now)

    def unadvertise(self, client: str, adv_id: str, now: float = 0.0) -> list[Send]:
        uid = self.local_advs.pop((client, adv_id), None)
        if uid is None:
            return [self._refuse(client, "unknown_id", f"client {client!r} has no advertisement {adv_id!r} here "
                                 "(ids belong to the client that made them)")]
        return self._unadvertise(client, uid, now)

    def subscribe(self, client: str, sub_id: str, sub: Filter, now: float = 0.0) -> list[Send]:
        if not isinstance(sub, Filter):
            return [self._refuse(client, "bad_filter", "a subscription must be a Filter")]
        if (client, sub_id) in self.local_subs:
            return [self._refuse(client, "duplicate_id", f"subscription {sub_id!r} exists")]
        uid = self._new_id("s")
        self.local_subs[(client, sub_id)] = uid
        self.sub_owner[uid] = (client, sub_id)
        return self._subscribe(client, uid, sub, now)

    def unsubscribe(self, client: str, sub_id: str, now: float = 0.0) -> list[Send]:
        uid = self.local_subs.pop((client, sub_id), None)
        if uid is None:
            return [self._refuse(client, "unknown_id", f"client {client!r} has no subscription {sub_id!r} here "
                                 "(ids belong to the client that made them)")]
        del self.sub_owner[uid]
        return self._unsubscribe(client, uid, now)

    def publish(
        self, client: str, attrs: Mapping[str, Value], now: float = 0.0, *, pid: str = ""
    ) -> list[Send]:
        try:
            clean = Attrs(validate_publication(attrs))
        except FilterError as exc:
            self.counters["bad_publication"] += 1
            return [self._refuse(client, "bad_publication", str(exc))]
        adv_uid = self._conforming_adv(client, clean)
        if adv_uid is None:
            self.counters["not_advertised"] += 1
            detail = "the publication conforms to none of the client's advertisements"
            return [self._refuse(client, "not_advertised", detail)]
        return self._publish(client, pid or self._new_id("p"), clean, adv_uid, now)

    def _conforming_adv(self, client: str, attrs: Mapping[str, Value]) -> str | None:
        """The client's first advertisement the publication conforms to."""
        for (owner, _), uid in self.local_advs.items():
            if owner == client and conforms(self._adv_filter(uid), attrs):
                return uid
        return None

    # --- protocol hooks ------------------------------------------------------------------------
    def _adv_filter(self, uid: str) -> Filter:
        raise NotImplementedError

    def _advertise(self, client: str, uid: str, adv: Filter, now: float) -> list[Send]:
        raise NotImplementedError

    def _unadvertise(self, client: str, uid: str, now: float) -> list[Send]:
        raise NotImplementedError

    def _subscribe(self, client: str, uid: str, sub: Filter, now: float) -> list[Send]:
        raise NotImplementedError

    def _unsubscribe(self, client: str, uid: str, now: float) -> list[Send]:
        raise NotImplementedError

    def _publish(self, client: str, pid: str, attrs: Attrs, adv_uid: str, now: float) -> list[Send]:
        raise NotImplementedError

    # --- helpers -------------------------------------------------------------------------------
    def _refuse(self, client: str, code: str, detail: str) -> Send:
        self.counters[f"refused_{code}"] += 1
        return Send(Ref(client), ClientRefused(client, code, detail[:500]))

    def _deliveries(
        self, pid: str, publisher: str, attrs: Attrs, sub_uids: Iterable[str]
    ) -> list[Send]:
        """One `Deliver` per local client, naming the client's matching subscription ids."""
        per_client: dict[str, list[str]] = {}
        for uid in sub_uids:
            owner = self.sub_owner.get(uid)
            if owner is not None:
                per_client.setdefault(owner[0], []).append(owner[1])
        return [
            Send(Ref(client), Deliver(client, pid, publisher, attrs, sorted(ids)))
            for client, ids in sorted(per_client.items())
        ]

    def status(self) -> dict[str, Any]:
        """Counts and tables for `pubsub broker status` (JSON-friendly)."""
        return {
            "protocol": self.protocol,
            "id": self.me,
            "cluster": self.i,
            "region": self.x,
            "inner": self.topo.is_inner(self.me),
            "primary_neighbours": list(self.topo.primary_neighbours(self.me)),
            "secondary_neighbours": list(self.topo.secondary_neighbours(self.me)),
            "local_advertisements": len(self.local_advs),
            "local_subscriptions": len(self.local_subs),
            "lst": self.lst.snapshot(),
            "counters": dict(sorted(self.counters.items())),
        }
