"""The OctopiA broker core (§6-§9): scotAFP, scotSBP, CIV, scotSPR and scotIDR -- no I/O.

One `OctopiaBroker` is broker B(x, i) of a SCOT (`broker.cores.topology`).  Its tables:

- CLT, the Cluster Link Table (§6, §8): advertisement id -> `CltEntry` (the advertisement, its
  CIV, its last hop).  At the publisher's host broker the CIV is CIV_a^i (bit i: the host
  cluster; bit j: C_j is a target secondary cluster, TSC); at a secondary broker B(x, j) it
  is CIV_s^j (bit i: the advertising cluster; bit j: C_j holds an overlapping subscription).
- PRT, the Publication Routing Table (§7): every subscription of this broker's cluster, with
  its last hop (a primary neighbour, or the local client), in a `SubscriptionIndex`.
- LST, the Link Status Table (§9.2, `broker.cores.corebase.LinkStatusTable`).

Advertisements (scotAFP, Alg. 1): the host broker stores the advertisement with CIV_a^i =
only bit i and sends it to its secondary neighbours -- the host region, m - 1 messages; a
secondary broker B(x, j) stores it and, when its PRT holds an overlapping subscription, sets
bit j and answers with one CIV_SET.  Unadvertise removes it from the region's CLTs (§6).

Subscriptions (scotSBP, Alg. 2): broadcast over the aLinks of the host cluster, |V_af| - 1
messages.  Every broker of the cluster stores it, and for the advertisements in its CLT that
it overlaps and whose bit j is still 0 it sets the bit and sends CIV_SET, one per iLink
(getDistinctMatchingAdvs).  Unsubscribe runs the same broadcast; a broker whose CLT holds an
advertisement with bit j set that no remaining subscription overlaps clears the bit and sends
CIV_UNSET to the host broker (§8).

Publications: the host broker routes a publication only if it conforms to one of the
publisher's advertisements (`broker.cores.corebase.conforms`); that advertisement's CIV_a^i gives the
TSCs.  Every broker forwards a publication to the last hops of the matching subscriptions in
its PRT other than the sender (intra-cluster routing, getDistinctSubs) and delivers it to its
local subscribers; only the host broker adds copies on the iLinks of the TSCs.

- scotSPR (Alg. 3, ``dynamic=False``): one copy per TSC iLink at the host broker, and nothing
  else inter-cluster.
- scotIDR (Alg. 4, ``dynamic=True``): a target iLink that is congested by Eq. 3 gets no copy;
  its cluster's bit goes into CIV_p^i instead.  A broker receiving CIV_p^i sends a copy on the
  iLink of every set bit whose link is uncongested and clears that bit.  What remains is
  attached to exactly one outgoing copy (CIV_p^i-D):

  * Case I  -- some target iLink is uncongested: the copy on the least loaded of them;
  * Case II -- all target iLinks are congested, some target aLink is not: the copy on the
    least loaded uncongested target aLink;
  * Case III -- every target link is congested: an extra copy on the least loaded target
    iLink, whose cluster's bit is cleared (the prose of §9.2 and the example of Fig. 7(d);
    Alg. 4 l.54 names the aLink μ1, but the text, the example and the count of 1 + α copies
    all use the iLink).

  "Target iLinks" are those towards the TSCs (at the host broker) or towards the clusters
  whose bits the received CIV_p^i carries (elsewhere); "target aLinks" are the last hops of
  matching subscriptions other than the sender.  A bit is cleared exactly when a copy enters
  its cluster, and each remaining bit rides on exactly one copy, so every TSC receives the
  publication once and the number of iLink crossings is at most m - 1 (no loops; §9.2).

Beyond the paper (issue 46): with `failure_routing` (on by default) what would cross a
suspected neighbour goes around it (`broker.cores.detours`), copies it did not acknowledge are
sent again around it, duplicates are suppressed, and tables are resynced with the neighbours
(`broker.cores.resync`).  With `intra_cluster` (off by default; the daemon's ``--routing
idr+``) scotIDR also lifts §9.2's limitation (ii): a congested target aLink without CIV_p is
bypassed through a parallel cluster (a detour whose exit is the aLink's far end), and before
Case III an uncongested aLink that leads to no matching subscription may carry CIV_p^i
(Case III').

Deviation (CIV_SET contents): the paper lets CIV_SET carry the new subscription so that the
host broker re-matches it against its advertisements.  Here CIV_SET (and CIV_UNSET) name the
advertisements instead, still one message per iLink.  Re-matching at the host can set the bit
of an advertisement that has not reached the secondary broker yet; if the subscription leaves
before it arrives, no CIV_UNSET would ever clear that bit.  Naming the advertisements keeps
CIV_a^i[j] an exact mirror of CIV_s^j[j], message by message over the FIFO iLink.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.cores import detours
from broker.cores.corebase import DEFAULT_TAU, DEFAULT_TW, BrokerCore, Handler, civ_bits
from broker.cores.failures import Change
from broker.cores.inflight import SeenPublications
from broker.cores.language.filters import Filter
from broker.cores.language.relations import overlaps
from broker.cores.matching.vectorised import SubscriptionIndex
from broker.cores.messages import (
    Attrs,
    CivSet,
    CivUnset,
    CltSync,
    PrtSync,
    ScotAdvertise,
    ScotDetour,
    ScotPublish,
    ScotSubscribe,
    ScotUnadvertise,
    ScotUnsubscribe,
)
from broker.cores.resync import SyncDuty, parts
from broker.cores.topology import ALINK, BrokerId, Scot
from pubsub.kernel import wire
from pubsub.kernel.message import Message, Ref, Send

#: The messages a detour carries (`broker.cores.detours`).
DETOURED = (ScotPublish, ScotSubscribe, ScotUnsubscribe)
#: Most entries a sync may bring in all its parts (a bound for hostile input).
MAX_SYNC_ENTRIES = 1 << 20


@dataclass(slots=True)
class CltEntry:
    """One CLT tuple {advertisement, CIV, last hop} (§8)."""

    adv: Filter
    civ: int
    last_hop: str
    hosted: bool  # True at the publisher's host broker (last hop = the publishing client)


class OctopiaBroker(BrokerCore):
    """Broker B(x, i) running OctopiA; SPR by default, IDR with ``dynamic=True``."""

    protocol = "octopia"

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
        self.dynamic = dynamic
        self.primary = topo.primary_neighbours(me)
        self.secondary = topo.secondary_neighbours(me)
        self._primary_set = frozenset(self.primary)
        self._secondary_set = frozenset(self.secondary)
        self._ilink = {topo.cluster_of(b): b for b in self.secondary}
        self._bit = 1 << self.i
        self._all_bits = (1 << topo.m) - 1
        self.clt: dict[str, CltEntry] = {}
        self.prt: SubscriptionIndex[str] = SubscriptionIndex()
        self.prt_hop: dict[str, str] = {}
        #: Route around suspects (issue 46); off, a suspect is only recorded and the paper's
        #: routing goes on regardless (the baseline of `python -m bench scot-failures`).
        self.failure_routing = True
        #: scotIDR beyond §9.2 (issue 46 item 3): congested target aLinks bypassed through a
        #: parallel cluster, and Case III' (an untargeted uncongested aLink carries CIV_p);
        #: off by default, so that IDR is the paper's
        self.intra_cluster = False
        self.duty = SyncDuty(self.primary, self.secondary)
        self.seen = SeenPublications()
        #: sync parts received so far, per sender: (uids, filters, overlapped)
        self._incoming: dict[tuple[str, str], tuple[list[str], list[Filter], list[str]]] = {}

    def _handlers(self) -> dict[type[Message], Handler]:
        return {
            ScotPublish: self._on_publish,
            ScotAdvertise: self._on_advertise,
            ScotUnadvertise: self._on_unadvertise,
            CivSet: self._on_civ_set,
            CivUnset: self._on_civ_unset,
            ScotSubscribe: self._on_subscribe,
            ScotUnsubscribe: self._on_unsubscribe,
            ScotDetour: self._on_detour,
            PrtSync: self._on_prt_sync,
            CltSync: self._on_clt_sync,
        }

    # --- introspection ---------------------------------------------------------------------
    @property
    def clt_size(self) -> int:
        return len(self.clt)

    @property
    def prt_size(self) -> int:
        return len(self.prt)

    def civ(self, uid: str) -> str | None:
        """The CIV of advertisement `uid` in this CLT as a bit string (index 0 rightmost)."""
        entry = self.clt.get(uid)
        return None if entry is None else civ_bits(entry.civ, self.topo.m)

    def target_clusters(self, uid: str) -> str | None:
        """At the host broker: the target clusters of advertisement `uid` -- the TSC bits of
        CIV_a^i, and bit i when the host cluster holds an overlapping subscription (the target
        primary cluster of §4.2; this is how Fig. 8 prints 110 / 111 / 100)."""
        entry = self.clt.get(uid)
        if entry is None or not entry.hosted:
            return None
        civ = entry.civ & ~self._bit
        if self._overlapped(entry.adv):
            civ |= self._bit
        return civ_bits(civ, self.topo.m)

    def status(self) -> dict[str, Any]:
        out = super().status()
        out.update(
            mode=("idr+" if self.intra_cluster else "idr") if self.dynamic else "spr",
            sync_owed=sorted(self.duty.owed),
            clt_size=self.clt_size,
            prt_size=self.prt_size,
            clt=[
                {
                    "uid": uid,
                    "civ": civ_bits(e.civ, self.topo.m),
                    "last_hop": e.last_hop,
                    "hosted": e.hosted,
                }
                for uid, e in self.clt.items()
            ],
        )
        return out

    # --- scotAFP (Alg. 1) ----------------------------------------------------------------------
    def _adv_filter(self, uid: str) -> Filter:
        return self.clt[uid].adv

    def _advertise(self, client: str, uid: str, adv: Filter, now: float) -> list[Send]:
        civ = self._bit  # Alg. 1 l.3: CIV_a^i[i] <- 1, every other bit 0
        self.clt[uid] = CltEntry(adv, civ, client, hosted=True)
        return [Send(Ref(b), ScotAdvertise(uid, adv, civ, self.me)) for b in self.secondary]

    def _on_advertise(self, msg: ScotAdvertise, now: float) -> list[Send]:
        if msg.sender not in self._secondary_set:
            self.counters["adv_not_from_region"] += 1
            return []
        if msg.uid in self.clt:
            self.counters["duplicate_adv"] += 1
            return []
        civ = (msg.civ & self._all_bits) & ~self._bit
        sends: list[Send] = []
        if self._overlapped(msg.adv):  # Alg. 1 l.14-20: one CIV_SET however many match
            civ |= self._bit
            sends.append(Send(Ref(msg.sender), CivSet([msg.uid], self.me)))
        self.clt[msg.uid] = CltEntry(msg.adv, civ, msg.sender, hosted=False)
        return sends

    def _unadvertise(self, client: str, uid: str, now: float) -> list[Send]:
        self.clt.pop(uid, None)
        return [Send(Ref(b), ScotUnadvertise(uid, self.me)) for b in self.secondary]

    def _on_unadvertise(self, msg: ScotUnadvertise, now: float) -> list[Send]:
        entry = self.clt.get(msg.uid)
        if entry is None or entry.hosted or entry.last_hop != msg.sender:
            self.counters["stale_unadv"] += 1
            return []
        del self.clt[msg.uid]
        return []

    def _on_civ_set(self, msg: CivSet, now: float) -> list[Send]:
        return self._apply_civ(msg.sender, msg.uids, set_bit=True)

    def _on_civ_unset(self, msg: CivUnset, now: float) -> list[Send]:
        return self._apply_civ(msg.sender, msg.uids, set_bit=False)

    def _apply_civ(self, sender: str, uids: list[str], *, set_bit: bool) -> list[Send]:
        if sender not in self._secondary_set:
            self.counters["civ_not_from_region"] += 1
            return []
        bit = 1 << self.topo.cluster_of(sender)
        for uid in uids:
            entry = self.clt.get(uid)
            if entry is None or not entry.hosted:
                self.counters["stale_civ"] += 1  # unadvertised meanwhile
                continue
            entry.civ = entry.civ | bit if set_bit else entry.civ & ~bit
        return []

    def _overlapped(self, adv: Filter) -> bool:
        """Does some subscription of this cluster (the PRT) overlap `adv`?"""
        return any(overlaps(adv, sub) for _, sub in self.prt.items())

    # --- scotSBP (Alg. 2) and unsubscribe --------------------------------------------------------
    def _subscribe(self, client: str, uid: str, sub: Filter, now: float) -> list[Send]:
        return self._store_subscription(uid, sub, client, sender=None)

    def _on_subscribe(self, msg: ScotSubscribe, now: float) -> list[Send]:
        if msg.sender not in self._primary_set:
            self.counters["sub_not_from_cluster"] += 1
            return []
        if msg.uid in self.prt_hop:
            self.counters["duplicate_sub"] += 1
            return []
        return self._store_subscription(msg.uid, msg.sub, msg.sender, sender=msg.sender)

    def _store_subscription(
        self, uid: str, sub: Filter, hop: str, sender: str | None
    ) -> list[Send]:
        self.prt.add(uid, sub)  # Alg. 2 l.5
        self.prt_hop[uid] = hop
        sends = [
            Send(Ref(b), ScotSubscribe(uid, sub, self.me)) for b in self.primary if b != sender
        ]
        # Alg. 2 l.6-10: the CLT's advertisements from other clusters that the subscription
        # overlaps and whose bit for this cluster is 0 -> one CIV_SET per iLink.
        per_link: dict[str, list[str]] = {}
        for adv_uid, entry in self.clt.items():
            if entry.hosted or entry.civ & self._bit or not overlaps(entry.adv, sub):
                continue
            entry.civ |= self._bit
            per_link.setdefault(entry.last_hop, []).append(adv_uid)
        sends.extend(Send(Ref(b), CivSet(uids, self.me)) for b, uids in sorted(per_link.items()))
        return sends

    def _unsubscribe(self, client: str, uid: str, now: float) -> list[Send]:
        return self._drop_subscription(uid, sender=None)

    def _on_unsubscribe(self, msg: ScotUnsubscribe, now: float) -> list[Send]:
        if self.prt_hop.get(msg.uid) != msg.sender:
            self.counters["stale_unsub"] += 1
            return []
        return self._drop_subscription(msg.uid, sender=msg.sender)

    def _drop_subscription(self, uid: str, sender: str | None) -> list[Send]:
        gone = self.prt.get(uid)
        self.prt.remove(uid)
        self.prt_hop.pop(uid, None)
        sends = [Send(Ref(b), ScotUnsubscribe(uid, self.me)) for b in self.primary if b != sender]
        if gone is None:
            return sends
        per_link: dict[str, list[str]] = {}
        for adv_uid, entry in self.clt.items():
            if entry.hosted or not entry.civ & self._bit or not overlaps(entry.adv, gone):
                continue
            if self._overlapped(entry.adv):
                continue
            entry.civ &= ~self._bit  # the last interested subscription of this cluster left
            per_link.setdefault(entry.last_hop, []).append(adv_uid)
        sends.extend(Send(Ref(b), CivUnset(uids, self.me)) for b, uids in sorted(per_link.items()))
        return sends

    # --- publications: scotSPR (Alg. 3) and scotIDR (Alg. 4) --------------------------------------
    def _publish(self, client: str, pid: str, attrs: Attrs, adv_uid: str, now: float) -> list[Send]:
        civa = self.clt[adv_uid].civ
        for b in self.suspects & self._secondary_set if self.failure_routing else ():
            # Only B(x, j) holds this region's advertisements for C_j, so while it is suspected
            # nobody can say whether C_j overlaps: C_j is a target (its brokers match exactly).
            civa |= 1 << self.topo.cluster_of(b)
        if not self.seen.first_time((self.me, client, pid)):
            self.counters["duplicate_publish"] += 1  # a retry of a publication routed already
            return []
        return self._route(pid, client, attrs, sender=None, civa=civa, civp=0, hops=0, origin=self.me)

    def _on_publish(self, msg: ScotPublish, now: float) -> list[Send]:
        if not 0 <= msg.hops < self.max_hops:  # a negative count would defeat the guard
            self.counters["hop_limit"] += 1
            return []
        civp = msg.civp
        if civp & ~self._all_bits or civp & self._bit:
            self.counters["bad_civp"] += 1  # bits beyond m, or our own cluster's (never sent)
            civp &= self._all_bits & ~self._bit
        if not self.seen.first_time((msg.origin, msg.publisher, msg.pid)):
            self.counters["suppressed_duplicates"] += 1  # sent around a suspect that handled it after all
            return []
        return self._route(
            msg.pid, msg.publisher, msg.attrs, sender=msg.sender, civa=0, civp=civp, hops=msg.hops, origin=msg.origin
        )

    def _route(
        self,
        pid: str,
        publisher: str,
        attrs: Attrs,
        *,
        sender: str | None,
        civa: int,
        civp: int,
        hops: int,
        origin: str,
    ) -> list[Send]:
        """getDistinctSubs and the inter-cluster part of Alg. 3 / Alg. 4 at this broker."""
        host = sender is None
        matched = self.prt.match(attrs)
        local: list[str] = []
        alinks: dict[str, int] = {}  # target aLink -> CIV_p carried (0 = none)
        for uid in matched:
            hop = self.prt_hop[uid]
            if hop in self._primary_set:
                if hop != sender:
                    alinks[hop] = 0
            else:
                local.append(uid)
        ilinks: dict[str, int] = {}  # iLink -> CIV_p carried
        if host:
            targets = [j for j in sorted(self._ilink) if civa >> j & 1]
            if not self.dynamic:
                for j in targets:  # Alg. 3 l.7-12
                    ilinks[self._ilink[j]] = 0
            else:
                for j in targets:  # Alg. 4 l.7-16
                    link = self._ilink[j]
                    if self.lst.overloaded(link):
                        civp |= 1 << j
                    else:
                        ilinks[link] = 0
        else:
            targets = [j for j in sorted(self._ilink) if civp >> j & 1]
            for j in targets:  # Alg. 4 l.18-24
                link = self._ilink[j]
                if not self.lst.overloaded(link):
                    ilinks[link] = 0
                    civp &= ~(1 << j)
        if civp:
            self._attach_civp(civp, [self._ilink[j] for j in targets], alinks, ilinks, sender)
        sends = self._deliveries(pid, publisher, attrs, local)
        if self.dynamic and self.intra_cluster:
            sends += self._bypass_congested_alinks(alinks, pid, publisher, attrs, hops + 1, origin)
        for dest, bits in sorted(alinks.items()) + sorted(ilinks.items()):
            copy = ScotPublish(pid, publisher, attrs, bits, hops + 1, self.me, origin)
            sends.append(Send(Ref(dest), copy))
        return sends

    def _bypass_congested_alinks(
        self, alinks: dict[str, int], pid: str, publisher: str, attrs: Attrs, hops: int, origin: str
    ) -> list[Send]:
        """Intra-cluster dynamic routing (issue 46 item 3, beyond §9.2): a target aLink that is
        congested by Eq. 3 and carries no CIV_p gets its copy through a parallel cluster instead
        -- over this broker's least loaded uncongested iLink, that cluster's parallel aLink and
        the iLink back (a detour whose exit is the aLink's far end, which handles it as if it
        had come over the aLink: one copy for one, so IDR's exactly-once holds)."""
        ilinks = [b for b in self.secondary if b not in self.suspects]
        out: list[Send] = []
        encoded = b""
        for dest in sorted(alinks):
            if alinks[dest] or not self.lst.overloaded(dest) or dest in self.suspects:
                continue
            via = self.lst.least_loaded(ilinks)
            if via is None or self.lst.overloaded(via):
                return out  # every iLink is congested too: the aLink it is
            del alinks[dest]
            self.counters["idr_alink_bypass"] += 1
            if not encoded:
                encoded = wire.encode_payload(ScotPublish(pid, publisher, attrs, 0, hops, self.me, origin))
            detour = ScotDetour(self.me, dest, [dest], hops, encoded, self.me)
            out.append(Send(Ref(via), detour))
        return out

    def _attach_civp(
        self, civp: int, target_ilinks: list[str], alinks: dict[str, int], ilinks: dict[str, int],
        sender: str | None,
    ) -> None:
        """Alg. 4 l.27-40: put the remaining CIV_p^i on exactly one outgoing copy.  With
        `intra_cluster`, before Case III an uncongested aLink that leads to no matching
        subscription may carry it (Case III'; its far end relays the bits over its own iLinks,
        moving away from the sender in the cluster's tree, so the walk ends)."""
        mu2 = self.lst.least_loaded(target_ilinks)
        mu1 = self.lst.least_loaded(sorted(alinks))
        assert mu2 is not None  # a set bit always has its iLink
        spare = [b for b in self.primary if b not in alinks and b != sender and b not in self.suspects]
        mu3 = self.lst.least_loaded(spare) if self.intra_cluster else None
        if not self.lst.overloaded(mu2):  # Case I (mu2 already has a copy)
            self.counters["idr_case_1"] += 1
            ilinks[mu2] = civp
        elif mu1 is not None and not self.lst.overloaded(mu1):  # Case II
            self.counters["idr_case_2"] += 1
            alinks[mu1] = civp
        elif mu3 is not None and not self.lst.overloaded(mu3):  # Case III': an untargeted aLink
            self.counters["idr_case_3_alink"] += 1
            alinks[mu3] = civp
        else:  # Case III: an extra copy into the congested iLink, its cluster served
            self.counters["idr_case_3"] += 1
            ilinks[mu2] = civp & ~(1 << self.topo.cluster_of(mu2))

    # --- around suspected neighbours (issue 46 item 2; `broker.cores.detours`) --------------------
    def neighbour_changed(self, change: Change, now: float) -> list[Send]:
        """Record the suspicion and send the copies the neighbour did not acknowledge around
        it (`BrokerCore.neighbour_changed`), and owe a cleared or restarted neighbour this
        broker's tables (`broker.cores.resync`)."""
        rerouted = super().neighbour_changed(change, now)
        if change.neighbour not in self._neighbour_set:
            return rerouted  # counted by the base class
        if change.kind == "cleared":
            self.duty.cleared(change.neighbour)
        elif change.kind == "restarted":
            self.duty.restarted(change.neighbour)
        return rerouted + self._due_syncs()

    def _around_suspects(self, sends: list[Send], now: float) -> list[Send]:
        """Every send to a suspected neighbour replaced: a publication or (un)subscription by
        detours to the exits beyond it, anything else dropped and counted (the sync that
        follows the suspect's return carries its effect)."""
        if not self.failure_routing:
            return sends
        out: list[Send] = []
        todo = list(reversed(sends))
        while todo:
            dest, msg = todo.pop()
            if dest not in self.suspects:
                out.append(Send(dest, msg))
            elif isinstance(msg, ScotPublish):
                self.counters["detoured_publications"] += 1
                out += self._publication_around(dest, msg, todo)
            elif isinstance(msg, (ScotSubscribe, ScotUnsubscribe)):
                self.counters[f"detoured_{msg.kind}"] += 1
                inner_sub = _with_sender(msg, dest)
                out += self._send_around(dest, inner_sub, self.me, detours.exits(self.topo, dest, self.me), [dest])
            else:
                self.counters[f"held_for_sync_{msg.kind}"] += 1
                if isinstance(msg, (PrtSync, CltSync)):
                    self.duty.owed.add(dest)
        return out

    def _publication_around(self, dest: BrokerId, msg: ScotPublish, todo: list[Send]) -> list[Send]:
        """The detours of a publication copy for `dest`; the CIV_p bits it carried go onto
        `todo` as copies on this broker's own iLinks (served from here)."""
        for k in range(self.topo.m):
            if msg.civp >> k & 1 and k != self.i:
                todo.append(Send(Ref(self._ilink[k]),
                                 ScotPublish(msg.pid, msg.publisher, msg.attrs, 0, msg.hops, self.me, msg.origin)))
        inner = ScotPublish(msg.pid, msg.publisher, msg.attrs, 0, msg.hops, dest, msg.origin)
        return self._send_around(dest, inner, self.me, self._publication_exits(dest, msg), [dest])

    def _given_back(self, neighbour: BrokerId, copies: list[Message]) -> list[Send]:
        """The copies a suspected or restarted neighbour did not acknowledge go around it (a
        copy it handled after all is suppressed as a duplicate where it arrives twice)."""
        if not self.failure_routing:
            return super()._given_back(neighbour, copies)
        self.counters["rerouted_unacknowledged"] += len(copies)
        todo = [Send(Ref(neighbour), c) for c in reversed(copies)]
        out: list[Send] = []
        while todo:
            dest, msg = todo.pop()
            if dest == neighbour and isinstance(msg, ScotPublish):
                out += self._publication_around(dest, msg, todo)
            else:
                out.append(Send(dest, msg))
        return self._track(self._around_suspects(out, 0.0))

    def _publication_exits(self, dead: BrokerId, copy: ScotPublish) -> tuple[BrokerId, ...]:
        """The exits of `dead` a publication copy must reach: on an aLink, those towards the
        host brokers of the matching subscriptions behind `dead` (their ids name them); on an
        iLink, every exit (the cluster beyond is not known here)."""
        if self.topo.link_kind(self.me, dead) != ALINK:
            return detours.exits(self.topo, dead, self.me)
        found: set[BrokerId] = set()
        for uid in self.prt.match(copy.attrs):
            if self.prt_hop.get(uid) != dead:
                continue
            origin = uid.partition("/")[0]
            if origin not in self.topo:
                return detours.exits(self.topo, dead, self.me)
            exit_ = detours.exit_towards(self.topo, dead, origin)
            if exit_ is None:
                self.counters["undeliverable_subscriber_at_suspect"] += 1
            else:
                found.add(exit_)
        return tuple(sorted(found))

    def _send_around(
        self, dead: BrokerId, inner: Message, came_from: BrokerId, exits: tuple[BrokerId, ...], avoid: list[BrokerId]
    ) -> list[Send]:
        """One detour per exit of `dead`, each taking its first step from here."""
        encoded = wire.encode_payload(inner)
        hops = getattr(inner, "hops", 0)
        out: list[Send] = []
        for exit_ in exits:
            out += self._walk(ScotDetour(dead, exit_, list(avoid), hops, encoded, self.me), inner)
        return out

    def _walk(self, detour: ScotDetour, inner: Message) -> list[Send]:
        """The detour's next step from this broker (`broker.cores.detours.next_hop`)."""
        if detour.hops + 1 >= self.max_hops:
            self.counters["hop_limit"] += 1
            return []
        nxt, avoid = detours.next_hop(self.topo, self.me, detour.exit, detour.avoid, self.suspects)
        if nxt is None:
            self.counters["detour_undeliverable"] += 1
            return []
        if nxt == detour.exit and nxt in self.suspects:  # the exit is down too: around it in turn
            if len(avoid) >= detours.MAX_AVOID:
                self.counters["detour_undeliverable"] += 1
                return []
            again = _with_sender(inner, nxt)
            return self._send_around(nxt, again, detour.around, detours.exits(self.topo, nxt, detour.around),
                                     [*avoid, nxt])
        step = ScotDetour(detour.around, detour.exit, avoid, detour.hops + 1, detour.inner, self.me)
        return [Send(Ref(nxt), step)]

    def _on_detour(self, msg: ScotDetour, now: float) -> list[Send]:
        inner = self._detour_inner(msg)
        if inner is None:
            return []
        if msg.exit != self.me:
            return self._walk(msg, inner)
        self.counters["detours_arrived"] += 1
        if self._handler_map is None:
            self._handler_map = self._handlers()
        return self._handler_map[type(inner)](inner, now)

    def _detour_inner(self, msg: ScotDetour) -> Message | None:
        """The message a well-formed detour carries, or None (counted) for anything else."""
        topo = self.topo
        problem = ""
        if msg.around not in topo or msg.exit not in topo.primary_neighbours(msg.around):
            problem = "bad_detour_exit"
        elif len(msg.avoid) > detours.MAX_AVOID or any(b not in topo for b in msg.avoid):
            problem = "bad_detour_avoid"
        elif not 0 <= msg.hops < self.max_hops:
            problem = "hop_limit"
        if problem:
            self.counters[problem] += 1
            return None
        try:
            inner = wire.decode(msg.inner)
        except wire.WireError:
            self.counters["bad_detour_inner"] += 1
            return None
        if not isinstance(inner, DETOURED) or inner.sender != msg.around or (
                isinstance(inner, ScotPublish) and inner.civp):
            self.counters["bad_detour_inner"] += 1
            return None
        return inner

    # --- resync with neighbours (issue 46 item 4; `broker.cores.resync`) ----------------------------
    def start(self, now: float) -> list[Send]:
        self.duty.start()
        return self._due_syncs()

    def _due_syncs(self) -> list[Send]:
        sends: list[Send] = []
        for n in self.duty.due(self.suspects):
            if n in self._primary_set:
                entries = [(uid, sub) for uid, sub in self.prt.items() if self.prt_hop[uid] != n]
                for part, start, final in parts(entries):
                    sync = PrtSync([u for u, _ in part], [f for _, f in part], start, final, self.me)
                    sends.append(Send(Ref(n), sync))
            else:
                hosted = [(uid, e.adv) for uid, e in self.clt.items() if e.hosted]
                overlapped = [uid for uid, e in self.clt.items()
                              if not e.hosted and e.last_hop == n and e.civ & self._bit]
                for part, start, final in parts(hosted):
                    sync_clt = CltSync([u for u, _ in part], [a for _, a in part], overlapped if final else [],
                                       start, final, self.me)
                    sends.append(Send(Ref(n), sync_clt))
        return sends

    def _collect(self, kind: str, sender: str, uids: list[str], filters: list[Filter], overlapped: list[str],
                 start: bool, final: bool) -> tuple[list[str], list[Filter], list[str]] | None:
        """Gather a sync's parts; the whole sync once its final part is in, else None."""
        key = (kind, sender)
        if len(uids) != len(filters):
            self.counters["bad_sync"] += 1
            self._incoming.pop(key, None)
            return None
        if start:
            self._incoming[key] = ([], [], [])
        held = self._incoming.get(key)
        if held is None:
            self.counters["sync_part_out_of_place"] += 1
            return None
        held[0].extend(uids)
        held[1].extend(filters)
        held[2].extend(overlapped)
        if len(held[0]) + len(held[2]) > MAX_SYNC_ENTRIES:
            self.counters["bad_sync"] += 1
            del self._incoming[key]
            return None
        if not final:
            return None
        del self._incoming[key]
        return held

    def _on_prt_sync(self, msg: PrtSync, now: float) -> list[Send]:
        """The sender's side of the cluster: my subscriptions with the sender as last hop
        become exactly these (new ones stored and broadcast on, missing ones removed)."""
        if msg.sender not in self._primary_set:
            self.counters["sync_not_from_cluster"] += 1
            return []
        whole = self._collect("prt", msg.sender, msg.uids, msg.subs, [], msg.start, msg.final)
        if whole is None:
            return []
        wanted = dict(zip(whole[0], whole[1], strict=True))
        sends: list[Send] = []
        for uid in [u for u, hop in self.prt_hop.items() if hop == msg.sender and u not in wanted]:
            sends += self._drop_subscription(uid, sender=msg.sender)
        for uid, sub in wanted.items():
            hop = self.prt_hop.get(uid)
            if hop is None:
                sends += self._store_subscription(uid, sub, msg.sender, sender=msg.sender)
            elif hop != msg.sender:
                self.counters["sync_conflict"] += 1  # held from another side: the later word wins
                self.prt_hop[uid] = msg.sender
        self.counters["prt_syncs_applied"] += 1
        self.duty.received(msg.sender)
        return sends + self._due_syncs()

    def _on_clt_sync(self, msg: CltSync, now: float) -> list[Send]:
        """A region neighbour's hosted advertisements (my CLT entries from it become exactly
        these) and my hosted advertisements its cluster overlaps (my CIV bit for it)."""
        if msg.sender not in self._secondary_set:
            self.counters["sync_not_from_region"] += 1
            return []
        whole = self._collect("clt", msg.sender, msg.uids, msg.advs, msg.overlapped, msg.start, msg.final)
        if whole is None:
            return []
        wanted = dict(zip(whole[0], whole[1], strict=True))
        for uid in [u for u, e in self.clt.items() if not e.hosted and e.last_hop == msg.sender and u not in wanted]:
            del self.clt[uid]
        sender_bit = 1 << self.topo.cluster_of(msg.sender)
        overlapping: list[str] = []
        for uid, adv in wanted.items():
            entry = self.clt.get(uid)
            if entry is not None:
                if entry.hosted or entry.last_hop != msg.sender:
                    self.counters["sync_conflict"] += 1
                continue
            civ = sender_bit
            if self._overlapped(adv):
                civ |= self._bit
                overlapping.append(uid)
            self.clt[uid] = CltEntry(adv, civ, msg.sender, hosted=False)
        overlapped = set(whole[2])
        for uid, entry in self.clt.items():
            if entry.hosted:
                entry.civ = entry.civ | sender_bit if uid in overlapped else entry.civ & ~sender_bit
        self.counters["clt_syncs_applied"] += 1
        return [Send(Ref(msg.sender), CivSet(overlapping, self.me))] if overlapping else []


def _with_sender(msg: Message, sender: BrokerId) -> Message:
    """A copy of a detoured message naming another sender."""
    if isinstance(msg, ScotPublish):
        return ScotPublish(msg.pid, msg.publisher, msg.attrs, msg.civp, msg.hops, sender, msg.origin)
    if isinstance(msg, ScotSubscribe):
        return ScotSubscribe(msg.uid, msg.sub, sender)
    if isinstance(msg, ScotUnsubscribe):
        return ScotUnsubscribe(msg.uid, sender)
    raise TypeError(f"{msg.kind} is not detoured")
