"""The PADRES-style baseline broker core (§2, §10: TID-based static routing, TID-S) -- no I/O.

The same SCOT graph, without clusters: every link is just a link.  This is the comparison
system of §10 (PADRES with the advertisement-tree identifiers of Li et al., "TID"):

- Advertisements flood the whole overlay.  The publisher's host broker gives each one a
  unique advertisement-tree id (TID, ``"<broker>/a<n>"``).  A broker stores the first copy
  it receives in its SRT (Subscription Routing Table: TID -> advertisement, last hop) and
  forwards it to every other neighbour; later copies of the same TID are duplicates, dropped
  and counted (``counters["duplicate_adv"]``) -- the extra messages of §2.  The first copies
  form a spanning tree rooted at the host broker: the advertisement tree.
- A subscription is bound to every advertisement it overlaps and travels up each one's tree
  (reverse advertisement path: from broker to broker along the SRT's last hop) to its root.
  A broker records, per subscription, the TIDs it is bound to and for each the neighbour it
  came from (the PRT, Publication Routing Table).  One message per next hop carries the TIDs
  that share it.  A subscription's host broker binds it when a new advertisement arrives
  later.
- A publication is stamped at its host broker with the TID of the publisher's advertisement
  it conforms to, and every broker forwards it to the recorded last hops of the matching
  subscriptions bound to that TID (other than the sender) and delivers it to its matching
  local subscribers.  The bound paths of one TID form a subtree of its advertisement tree,
  so a publication visits each broker at most once.
- Unsubscribe retraces the bound paths; unadvertise floods (duplicates dropped) and removes
  the TID from the SRTs and from every subscription bound to it.  Retired TIDs are
  remembered, so a late duplicate of a withdrawn advertisement is not taken for a new one.

TID-based dynamic routing (TID-D) is not implemented: §10 finds it slower than TID-S, and the
issue asks for the static baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.cores.corebase import DEFAULT_TAU, DEFAULT_TW, BrokerCore, Handler
from broker.cores.language.filters import Filter
from broker.cores.language.relations import overlaps
from broker.cores.matching.vectorised import SubscriptionIndex
from broker.cores.messages import (
    Attrs,
    PadresAdvertise,
    PadresPublish,
    PadresSubscribe,
    PadresUnadvertise,
    PadresUnsubscribe,
)
from broker.cores.topology import BrokerId, Scot
from pubsub.kernel.message import Message, Ref, Send


@dataclass(slots=True)
class SrtEntry:
    """One SRT tuple {advertisement, TID, last hop}."""

    adv: Filter
    last_hop: str
    hosted: bool  # True at the publisher's host broker (last hop = the publishing client)


class PadresBroker(BrokerCore):
    """A broker of the TID-based baseline on the (unclustered) SCOT graph."""

    protocol = "padres"

    def __init__(
        self, topo: Scot, me: BrokerId, *, tau: float = DEFAULT_TAU, t_w: float = DEFAULT_TW, epoch: str = ""
    ) -> None:
        super().__init__(topo, me, tau=tau, t_w=t_w, epoch=epoch)
        self.srt: dict[str, SrtEntry] = {}
        self.retired: set[str] = set()
        #: Every subscription this broker routes or hosts, for matching.
        self.prt: SubscriptionIndex[str] = SubscriptionIndex()
        #: Remote subscriptions: uid -> {TID: neighbour towards the subscriber}.
        self.routes: dict[str, dict[str, str]] = {}
        #: Local subscriptions: uid -> the remote TIDs they are bound to.
        self.bound: dict[str, set[str]] = {}

    def _handlers(self) -> dict[type[Message], Handler]:
        return {
            PadresPublish: self._on_publish,
            PadresAdvertise: self._on_advertise,
            PadresUnadvertise: self._on_unadvertise,
            PadresSubscribe: self._on_subscribe,
            PadresUnsubscribe: self._on_unsubscribe,
        }

    # --- introspection ---------------------------------------------------------------------
    @property
    def srt_size(self) -> int:
        return len(self.srt)

    @property
    def prt_size(self) -> int:
        return len(self.prt)

    def status(self) -> dict[str, Any]:
        out = super().status()
        out.update(
            mode="tid-s",
            srt_size=self.srt_size,
            prt_size=self.prt_size,
            srt=[
                {"tid": tid, "last_hop": e.last_hop, "hosted": e.hosted}
                for tid, e in self.srt.items()
            ],
        )
        return out

    # --- advertisements ------------------------------------------------------------------------
    def _adv_filter(self, uid: str) -> Filter:
        return self.srt[uid].adv

    def _advertise(self, client: str, uid: str, adv: Filter, now: float) -> list[Send]:
        self.srt[uid] = SrtEntry(adv, client, hosted=True)
        return [Send(Ref(b), PadresAdvertise(uid, adv, self.me)) for b in self.neighbours]

    def _on_advertise(self, msg: PadresAdvertise, now: float) -> list[Send]:
        tid = msg.tid
        if tid in self.srt or tid in self.retired:
            self.counters["duplicate_adv"] += 1
            return []
        self.srt[tid] = SrtEntry(msg.adv, msg.sender, hosted=False)
        copy = PadresAdvertise(tid, msg.adv, self.me)
        sends = [Send(Ref(b), copy) for b in self.neighbours if b != msg.sender]
        for uid, tids in self.bound.items():  # bind the local subscriptions it overlaps
            sub = self.prt.get(uid)
            if sub is not None and overlaps(msg.adv, sub):
                tids.add(tid)
                sends.append(Send(Ref(msg.sender), PadresSubscribe(uid, sub, [tid], self.me)))
        return sends

    def _unadvertise(self, client: str, uid: str, now: float) -> list[Send]:
        self._retire(uid)
        return [Send(Ref(b), PadresUnadvertise(uid, self.me)) for b in self.neighbours]

    def _on_unadvertise(self, msg: PadresUnadvertise, now: float) -> list[Send]:
        entry = self.srt.get(msg.tid)
        if entry is not None and entry.hosted:  # only its own client withdraws it (as OctopiA)
            self.counters["hosted_unadv"] += 1
            return []
        if msg.tid not in self.srt:
            self.counters["duplicate_unadv"] += 1
            self.retired.add(msg.tid)
            return []
        self._retire(msg.tid)
        copy = PadresUnadvertise(msg.tid, self.me)
        return [Send(Ref(b), copy) for b in self.neighbours if b != msg.sender]

    def _retire(self, tid: str) -> None:
        self.srt.pop(tid, None)
        self.retired.add(tid)
        for uid in [u for u, r in self.routes.items() if tid in r]:
            route = self.routes[uid]
            del route[tid]
            if not route:
                del self.routes[uid]
                self.prt.remove(uid)
        for tids in self.bound.values():
            tids.discard(tid)

    # --- subscriptions -------------------------------------------------------------------------
    def _subscribe(self, client: str, uid: str, sub: Filter, now: float) -> list[Send]:
        self.prt.add(uid, sub)
        per_hop: dict[str, list[str]] = {}
        for tid, entry in self.srt.items():
            if not entry.hosted and overlaps(entry.adv, sub):
                per_hop.setdefault(entry.last_hop, []).append(tid)
        self.bound[uid] = {t for tids in per_hop.values() for t in tids}
        return [
            Send(Ref(b), PadresSubscribe(uid, sub, tids, self.me))
            for b, tids in sorted(per_hop.items())
        ]

    def _on_subscribe(self, msg: PadresSubscribe, now: float) -> list[Send]:
        route = self.routes.get(msg.uid)
        per_hop: dict[str, list[str]] = {}
        for tid in msg.tids:
            entry = self.srt.get(tid)
            if entry is None:
                self.counters["stale_sub"] += 1  # the advertisement was withdrawn meanwhile
                continue
            if route is None:
                route = self.routes[msg.uid] = {}
                self.prt.add(msg.uid, msg.sub)
            if tid in route:
                self.counters["duplicate_sub"] += 1
            route[tid] = msg.sender
            if not entry.hosted:
                per_hop.setdefault(entry.last_hop, []).append(tid)
        return [
            Send(Ref(b), PadresSubscribe(msg.uid, msg.sub, tids, self.me))
            for b, tids in sorted(per_hop.items())
        ]

    def _unsubscribe(self, client: str, uid: str, now: float) -> list[Send]:
        self.prt.remove(uid)
        per_hop: dict[str, list[str]] = {}
        for tid in sorted(self.bound.pop(uid, set())):
            entry = self.srt.get(tid)
            if entry is not None and not entry.hosted:
                per_hop.setdefault(entry.last_hop, []).append(tid)
        return [
            Send(Ref(b), PadresUnsubscribe(uid, tids, self.me))
            for b, tids in sorted(per_hop.items())
        ]

    def _on_unsubscribe(self, msg: PadresUnsubscribe, now: float) -> list[Send]:
        route = self.routes.get(msg.uid)
        per_hop: dict[str, list[str]] = {}
        for tid in msg.tids:
            if route is None or route.get(tid) != msg.sender:
                self.counters["stale_unsub"] += 1
                continue
            del route[tid]
            entry = self.srt.get(tid)
            if entry is not None and not entry.hosted:
                per_hop.setdefault(entry.last_hop, []).append(tid)
        if route is not None and not route:
            del self.routes[msg.uid]
            self.prt.remove(msg.uid)
        return [
            Send(Ref(b), PadresUnsubscribe(msg.uid, tids, self.me))
            for b, tids in sorted(per_hop.items())
        ]

    # --- publications (TID-S) --------------------------------------------------------------------
    def _publish(self, client: str, pid: str, attrs: Attrs, adv_uid: str, now: float) -> list[Send]:
        return self._route(pid, client, attrs, adv_uid, sender=None, hops=0)

    def _on_publish(self, msg: PadresPublish, now: float) -> list[Send]:
        if not 0 <= msg.hops < self.max_hops:  # a negative count would defeat the guard
            self.counters["hop_limit"] += 1
            return []
        return self._route(
            msg.pid, msg.publisher, msg.attrs, msg.tid, sender=msg.sender, hops=msg.hops
        )

    def _route(
        self, pid: str, publisher: str, attrs: Attrs, tid: str, *, sender: str | None, hops: int
    ) -> list[Send]:
        local: list[str] = []
        hops_out: set[str] = set()
        for uid in self.prt.match(attrs):
            if uid in self.sub_owner:
                local.append(uid)
                continue
            hop = self.routes.get(uid, {}).get(tid)
            if hop is not None and hop != sender:
                hops_out.add(hop)
        sends = self._deliveries(pid, publisher, attrs, local)
        copy = PadresPublish(pid, publisher, attrs, tid, hops + 1, self.me)
        sends.extend(Send(Ref(b), copy) for b in sorted(hops_out))
        return sends
