"""The PADRES-style baseline broker core (§2, §10: TID-based static and dynamic routing,
TID-S and TID-D) -- no I/O.

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

TID-based dynamic routing (TID-D, ``PadresBroker(..., dynamic=True)``; the protocol is still
"padres").  §2 (Fig. 1(c)) and §10 describe it in outline: a subscription bound to several
advertisements has several trees towards its subscriber; where the link a publication would
take is congested -- Eq. 3 with the same tau and t_w as scotIDR (`LinkStatusTable.overloaded`)
-- the broker searches the matched subscriptions' other TIDs for an uncongested next hop and
sends the publication on with that TID.  How it is done here:

- Every matched subscription whose next hop on the copy's TID is congested (or, for a
  targeted copy, has no route on that TID any more) is re-stamped with the TID, among the
  others it is bound to at this broker, whose next hop is uncongested and not the sender --
  the least loaded one (least Q_l, then the first TID in sorted order).  With none, it stays
  on its TID over the congested link (``counters["tidd_no_alternative"]``; re-stamped ones:
  ``counters["tidd_restamped"]``).  The matched subscriptions of one subscriber broker (the
  host named in their ids) move as a unit, onto a TID they are all bound to with the same
  next hop, or not at all: so they keep arriving in one copy, and a client with several
  matching subscriptions still gets one delivery naming them all.
- The re-stamped subscriptions are grouped by (next hop, new TID), and each group goes in one
  copy naming exactly those subscriptions (`PadresPublish.targets`).  A copy on the old TID
  to a next hop some of whose subscriptions were re-stamped away names the ones left; a hop
  none of whose subscriptions moved gets the ordinary untargeted copy.  A broker receiving a
  targeted copy serves only its targets (delivers to its own, forwards each other one along
  its route on the copy's TID, re-stamping again where that hop is congested), never the
  other subscriptions bound to the tree, so the copies' target sets stay disjoint and every
  subscriber gets the publication once.
- Loops.  Along one TID a copy only goes down that tree (a route on a TID points to the
  broker the subscription came from, a child in the tree), so from any broker it reaches the
  subscriber within N - 1 hops.  A broker re-stamps only while the copy's hop count plus
  N - 1 stays under `max_hops` (else ``counters["tidd_over_budget"]`` and the copy stays on its
  TID), so no copy ever reaches the hop guard: every copy ends within max_hops - 1 hops and
  none is dropped for its length.  Unlike TID-S, a re-stamped path is a piece of one tree
  followed by a piece of another, and may therefore cross a broker that another copy of the
  publication (serving other subscriptions), or the same copy earlier, has crossed; still
  every subscription is carried by one copy at a time and delivered only at its host broker,
  where that copy's part for it ends, so no subscriber gets the publication twice.

Inferred beyond the paper (which gives no pseudo-code for TID-D): the target lists and the
grouping, moving a subscriber broker's subscriptions as a unit, the choice among several
uncongested TIDs, excluding the sender, the hop budget, re-stamping a targeted copy whose
route on its TID is gone, and staying on the congested link when nothing else is free.  The
cost the paper blames for TID-D being slower than TID-S (a sequential search of the matched
subscriptions' TIDs, Fig. 16) is real CPU here, not simulated time.
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
from pubsub.kernel.wire import MAX_STRINGS


@dataclass(slots=True)
class SrtEntry:
    """One SRT tuple {advertisement, TID, last hop}."""

    adv: Filter
    last_hop: str
    hosted: bool  # True at the publisher's host broker (last hop = the publishing client)


class PadresBroker(BrokerCore):
    """A broker of the TID-based baseline on the (unclustered) SCOT graph: static routing
    (TID-S), or with `dynamic` TID-D (see the module docstring)."""

    protocol = "padres"

    def __init__(
        self,
        topo: Scot,
        me: BrokerId,
        *,
        dynamic: bool = False,
        tau: float = DEFAULT_TAU,
        t_w: float = DEFAULT_TW,
        epoch: str = "",
    ) -> None:
        super().__init__(topo, me, tau=tau, t_w=t_w, epoch=epoch)
        #: TID-D (re-stamp around congested links) instead of TID-S; read per publication.
        self.dynamic = dynamic
        #: The longest path down one advertisement tree.
        self._tree_path = len(topo) - 1
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
            mode="tid-d" if self.dynamic else "tid-s",
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

    # --- publications (TID-S, TID-D) ---------------------------------------------------------
    def _publish(self, client: str, pid: str, attrs: Attrs, adv_uid: str, now: float) -> list[Send]:
        return self._route(pid, client, attrs, adv_uid, sender=None, hops=0, targets=())

    def _on_publish(self, msg: PadresPublish, now: float) -> list[Send]:
        if not 0 <= msg.hops < self.max_hops:  # a negative count would defeat the guard
            self.counters["hop_limit"] += 1
            return []
        return self._route(
            msg.pid, msg.publisher, msg.attrs, msg.tid, sender=msg.sender, hops=msg.hops,
            targets=msg.targets,
        )

    def _route(
        self,
        pid: str,
        publisher: str,
        attrs: Attrs,
        tid: str,
        *,
        sender: str | None,
        hops: int,
        targets: list[str] | tuple[()],
    ) -> list[Send]:
        """Serve one copy on tree `tid`: every matching subscription bound to it below this
        broker, or (a targeted copy) exactly `targets`."""
        if not self.dynamic and not targets:
            return self._route_static(pid, publisher, attrs, tid, sender=sender, hops=hops)
        local: list[str] = []
        # (subscriber's host broker, next hop on `tid`) -> its subscriptions in scope: a unit
        # TID-D moves as a whole, so that a client gets one delivery naming all its matches
        units: dict[tuple[str, str | None], list[str]] = {}
        scope = self._targets(targets, attrs) if targets else sorted(self.prt.match(attrs))
        for uid in scope:
            if uid in self.sub_owner:
                local.append(uid)
                continue
            hop = self.routes.get(uid, {}).get(tid)
            if hop == sender:
                hop = None
            if hop is None and not targets:
                continue  # not bound to this tree below here (TID-S)
            units.setdefault((uid.partition("/")[0], hop), []).append(uid)
        # (next hop, TID) -> the remote subscriptions that copy serves
        groups: dict[tuple[str, str], list[str]] = {}
        moved: set[str] = set()  # next hops on `tid` some subscriptions were re-stamped away from
        for (_, hop), uids in units.items():
            if self.dynamic and (hop is None or self.lst.overloaded(hop)):
                alt = self._restamp(uids, tid, sender, hops)
                if alt is not None:
                    self.counters["tidd_restamped"] += len(uids)
                    groups.setdefault(alt, []).extend(uids)
                    if hop is not None:
                        moved.add(hop)
                    continue
            if hop is None:
                self.counters["tidd_no_route"] += len(uids)  # targets whose route went meanwhile
                continue
            groups.setdefault((hop, tid), []).extend(uids)
        sends = self._deliveries(pid, publisher, attrs, local)
        plain = PadresPublish(pid, publisher, attrs, tid, hops + 1, self.me)
        for (hop, t), uids in sorted(groups.items()):
            if not targets and t == tid and hop not in moved:
                sends.append(Send(Ref(hop), plain))  # the whole subtree, as in TID-S
                continue
            uids.sort()
            for k in range(0, len(uids), MAX_STRINGS):
                copy = PadresPublish(
                    pid, publisher, attrs, t, hops + 1, self.me, uids[k : k + MAX_STRINGS]
                )
                sends.append(Send(Ref(hop), copy))
        return sends

    def _route_static(
        self, pid: str, publisher: str, attrs: Attrs, tid: str, *, sender: str | None, hops: int
    ) -> list[Send]:
        """TID-S: one untargeted copy to every next hop on `tid` of a matching subscription."""
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

    def _targets(self, targets: list[str] | tuple[()], attrs: Attrs) -> list[str]:
        """The targets of a targeted copy that this broker holds and that match (a
        subscription withdrawn meanwhile, or a target it never heard of, is counted)."""
        out = []
        for uid in sorted(set(targets)):
            sub = self.prt.get(uid)
            if sub is None or not sub.matches(attrs):
                self.counters["tidd_stale_target"] += 1
                continue
            out.append(uid)
        return out

    def _restamp(
        self, uids: list[str], tid: str, sender: str | None, hops: int
    ) -> tuple[str, str] | None:
        """TID-D: the (next hop, TID) to re-stamp the subscriptions `uids` (of one subscriber
        broker) with instead of `tid` -- another TID they are all bound to here, with the same
        next hop, uncongested and not the sender; the least loaded one -- or None (counted:
        no such TID, or no hop budget left for one more tree path)."""
        best: tuple[int, str, str] | None = None
        first, rest = self.routes.get(uids[0], {}), [self.routes.get(u, {}) for u in uids[1:]]
        for t, hop in first.items():
            if t == tid or hop == sender or self.lst.overloaded(hop):
                continue
            if any(r.get(t) != hop for r in rest):
                continue
            key = (self.lst.queue_len(hop), t, hop)
            if best is None or key < best:
                best = key
        if best is None:
            self.counters["tidd_no_alternative"] += len(uids)
            return None
        if hops + self._tree_path >= self.max_hops:
            self.counters["tidd_over_budget"] += len(uids)
            return None
        return best[2], best[1]
