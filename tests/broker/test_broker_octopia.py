"""The OctopiA core (`broker.cores.octopia`) against the paper's worked examples (§6-§9).

The cores are driven by `broker.sim.BrokerSim` with instantaneous links (so only the order
of messages matters) and, for Fig. 7, with pinned Link Status Table rows.

Readings of figures whose drawing is not in the extracted text:

- Fig. 2/3/4/5/8: the factor is the path a-b-c-d-e-f (see `broker.topologyfile.figure3`).  The
  subscribers' brokers are not given; Fig. 5 fixes only their clusters (S, S0 in C0, S1 in
  C1, S2 in C2) and §9.1 says B(e, 1) reaches S1 through B(d, 1).  We place S at B(c, 0), S0
  at B(f, 0), S1 at B(b, 1), S2 at B(d, 2).
- Fig. 8 prints the CIVs of P0, P1, P2 as 110, 111, 100.  Alg. 1 l.3 always sets the host
  cluster's bit of CIV_a^i, which would make P0's 111; the figure's vectors are read as the
  *target clusters* (the TSC bits, plus the host bit when the host cluster itself holds an
  interested subscriber -- the target primary cluster of §4.2), `OctopiaBroker.target_clusters`.
  The interest sets of Fig. 8 ({S1, S2}, {S, S0, S1, S2}, {S2}) are realised by filters on the
  publisher's name.
- Fig. 7: the subscribers' positions are not recoverable, and the three cases' prose cannot
  all hold for one placement (Case II says C1 is no TSC while Cases I and III route to S2 in
  C1; Case I needs S1 at B(c, 0) for IDR to save a message, Case III says l<(b,0),(a,0)> is on
  S1's subscription tree).  Each case therefore gets the placement that satisfies its prose --
  every routing decision it describes -- and its inter-broker message counts (publication
  copies between brokers, deliveries to clients not counted):
    Case I:   S1 (c,0), S2 (c,1), S3 (c,3), S4 (a,2), S5 (c,2)             SPR 8, IDR 7
    Case II:  S1 (c,0), S3 (c,3), S4 (a,2), S5 (c,2), S6 (a,3)             SPR 7, IDR 6
    Case III: S1 (a,0), S2 (c,1), S3 (c,3), S4 (a,2)                       SPR 7, IDR 8
  "Presumably least loaded" links are made so by their queue lengths.
"""

from __future__ import annotations

from collections import Counter

import pytest

from broker import topologyfile as TF
from broker.cores import topology as T
from broker.cores.corebase import civ_bits
from broker.cores.language.text import parse_filter as F
from broker.cores.messages import CivSet, CivUnset, ScotAdvertise, ScotPublish, ScotSubscribe
from broker.cores.octopia import OctopiaBroker
from broker.sim import BrokerSim

CONGESTED = (100, 10, 1)  # Q_l = 100, CE = 11/2: Q_l * CE = 550 > tau = 10


def octopia(topo: T.Scot, *, dynamic: bool = False) -> BrokerSim:
    return BrokerSim(topo, protocol="octopia", dynamic=dynamic, trace=True)


def core(sim: BrokerSim, bid: str) -> OctopiaBroker:
    c = sim.cores[bid]
    assert isinstance(c, OctopiaBroker)
    return c


def adv_uid(sim: BrokerSim, bid: str, client: str, adv_id: str = "a") -> str:
    return core(sim, bid).local_advs[(client, adv_id)]


def sent(sim: BrokerSim, kind: type) -> list[tuple[str, str]]:
    assert sim.trace is not None
    return [(src, dst) for _, src, dst, msg in sim.trace if isinstance(msg, kind)]


def pub_copies(sim: BrokerSim, pid: str) -> set[tuple[str, str, str]]:
    """(src, dst, CIV_p bits) of every copy of publication `pid`."""
    assert sim.trace is not None
    m = sim.topo.m
    return {
        (src, dst, civ_bits(msg.civp, m))
        for _, src, dst, msg in sim.trace
        if isinstance(msg, ScotPublish) and msg.pid == pid
    }


# --- Fig. 4: advertisement broadcast to the host region (scotAFP) -----------------------------
def test_fig4_advertisements_reach_exactly_the_host_region() -> None:
    """Fig. 4: P0, P2 (host region R_a) and P1 (R_e) advertise; each advertisement reaches the
    secondary brokers of its host region only (m - 1 = 2 messages), one broker per cluster,
    with the host broker as last hop (advertisement trees of length 1)."""
    topo = TF.figure3()
    sim = octopia(topo)
    for client, bid in (("P0", "a,0"), ("P1", "e,1"), ("P2", "a,2")):
        sim.attach(client, bid)
        sim.advertise(client, "a", F("k exists"))
    assert sim.run()
    assert [op.messages for op in sim.op_stats("advertise")] == [2, 2, 2]
    assert sim.traffic == Counter({"scot_adv": 6})
    for client, host in (("P0", "a,0"), ("P1", "e,1"), ("P2", "a,2")):
        uid = adv_uid(sim, host, client)
        holders = {b for b in topo.brokers if uid in core(sim, b).clt}
        assert holders == set(topo.region(topo.region_of(host)))
        assert len({topo.cluster_of(b) for b in holders}) == len(holders)  # one per cluster
        for b in holders - {host}:
            assert core(sim, b).clt[uid].last_hop == host
    assert sorted(sent(sim, ScotAdvertise)) == sorted(
        [("a,0", "a,1"), ("a,0", "a,2"), ("e,1", "e,0")]
        + [("e,1", "e,2"), ("a,2", "a,0"), ("a,2", "a,1")]
    )


def test_fig4_unadvertise_touches_only_the_host_region() -> None:
    """§6: unadvertise removes the advertisement from the CLTs of the host region only."""
    topo = TF.figure3()
    sim = octopia(topo)
    sim.attach("P1", "e,1")
    sim.advertise("P1", "a", F("k exists"))
    sim.run()
    uid = adv_uid(sim, "e,1", "P1")
    sim.unadvertise("P1", "a")
    sim.run()
    assert sim.op_stats("unadvertise")[0].messages == 2
    assert all(uid not in core(sim, b).clt for b in topo.brokers)


# --- Fig. 5: cluster-level subscription broadcast (scotSBP) -----------------------------------
FIG5 = {"S": "c,0", "S0": "f,0", "S1": "b,1", "S2": "d,2"}


def test_fig5_subscriptions_are_confined_to_the_host_cluster() -> None:
    """Fig. 5: each subscription is broadcast over the aLinks of its host cluster only
    (|V_af| - 1 = 5 messages), stored in the PRT of every broker of that cluster, with last
    hops that point back along the cluster's tree towards the subscriber."""
    topo = TF.figure3()
    sim = octopia(topo)
    for client, bid in FIG5.items():
        sim.attach(client, bid)
        sim.subscribe(client, "s", F("k exists"))
    assert sim.run()
    assert [op.messages for op in sim.op_stats("subscribe")] == [5, 5, 5, 5]
    assert sim.traffic == Counter({"scot_sub": 20})
    for (src, dst) in sent(sim, ScotSubscribe):
        assert topo.link_kind(src, dst) == T.ALINK
    for client, host in FIG5.items():
        uid = core(sim, host).local_subs[(client, "s")]
        holders = {b for b in topo.brokers if uid in core(sim, b).prt}
        assert holders == set(topo.cluster(topo.cluster_of(host)))
        for b in holders - {host}:
            path = topo.path_in_cluster(b, host)
            assert core(sim, b).prt_hop[uid] == path[1]
        assert core(sim, host).prt_hop[uid] == client
    # S and S0 share C0: those 6 brokers hold 2 subscriptions, the others 1.
    assert {b: core(sim, b).prt_size for b in topo.cluster(0)} == dict.fromkeys(topo.cluster(0), 2)
    assert all(core(sim, b).prt_size == 1 for b in topo.cluster(1) + topo.cluster(2))


def test_fig5_unsubscribe_touches_only_the_host_cluster() -> None:
    topo = TF.figure3()
    sim = octopia(topo)
    for client, bid in FIG5.items():
        sim.attach(client, bid)
        sim.subscribe(client, "s", F("k exists"))
    sim.run()
    sim.unsubscribe("S1", "s")
    sim.run()
    assert sim.op_stats("unsubscribe")[0].messages == 5
    assert all(core(sim, b).prt_size == 0 for b in topo.cluster(1))
    assert all(core(sim, b).prt_size == 2 for b in topo.cluster(0))


# --- §8 / Fig. 6: CIV bits, CIV_SET and CIV_UNSET ------------------------------------------------
def test_civ_bits_are_indexed_from_the_right() -> None:
    """Fig. 6(a): CIV_a^1 with C0 and C2 as TSCs prints as 0111 over four clusters."""
    assert civ_bits(0b0111, 4) == "0111"
    assert civ_bits(1 << 2, 3) == "100"


def test_fig8_text_p1_without_matching_subscriptions_has_civ_010() -> None:
    """§8: B(e, 1) advertises P1 with CIV_a^1 = 010 to B(e, 0) and B(e, 2); with no matching
    subscription in C0 and C2 their CIV_s^0 and CIV_s^2 stay 010 and no CIV_SET is sent."""
    topo = TF.figure3()
    sim = octopia(topo)
    sim.attach("P1", "e,1")
    sim.advertise("P1", "a", F("k exists"))
    sim.run()
    uid = adv_uid(sim, "e,1", "P1")
    assert [core(sim, b).civ(uid) for b in ("e,1", "e,0", "e,2")] == ["010", "010", "010"]
    assert sent(sim, CivSet) == []


def test_fig8_text_p2_with_interested_c0_gets_civ_101() -> None:
    """§8: C0 hosts a subscriber interested in P2; B(a, 0) sets CIV_s^0[0] and sends one
    CIV_SET to B(a, 2), whose CIV_a^2 becomes 101."""
    topo = TF.figure3()
    sim = octopia(topo)
    sim.attach("S", "c,0")
    sim.attach("S0", "f,0")
    sim.subscribe("S", "s", F("k > 1"))
    sim.subscribe("S0", "s", F("k < 9"))  # two matching subscriptions, still one CIV_SET
    sim.run()
    sim.attach("P2", "a,2")
    sim.advertise("P2", "a", F("k exists"))
    sim.run()
    uid = adv_uid(sim, "a,2", "P2")
    assert core(sim, "a,0").civ(uid) == "101"
    assert core(sim, "a,1").civ(uid) == "100"
    assert core(sim, "a,2").civ(uid) == "101"
    assert sent(sim, CivSet) == [("a,0", "a,2")]


def test_section8_subscription_sets_civ_then_last_unsubscribe_unsets_it() -> None:
    """§8: S2's first subscription matching P0's advertisement makes B(a, 2) set CIV_s^2[2]
    and send CIV_SET to B(a, 0), which sets CIV_a^0[2]; a second one sends nothing; when the
    last interested subscriber of C2 unsubscribes, CIV_UNSET clears the bit again."""
    topo = TF.figure3()
    sim = octopia(topo)
    sim.attach("P0", "a,0")
    sim.advertise("P0", "a", F("k >= 0 and k <= 10"))
    sim.run()
    uid = adv_uid(sim, "a,0", "P0")
    sim.attach("S2", "d,2")
    sim.attach("S2b", "f,2")
    sim.subscribe("S2", "s", F("k = 3"))
    sim.run()
    assert sent(sim, CivSet) == [("a,2", "a,0")]
    assert core(sim, "a,0").civ(uid) == "101"
    assert core(sim, "a,2").civ(uid) == "101"
    sim.subscribe("S2b", "s", F("k = 4"))
    sim.subscribe("S2b", "t", F("k = 40"))  # overlaps nothing
    sim.run()
    assert len(sent(sim, CivSet)) == 1
    sim.unsubscribe("S2", "s")
    sim.run()
    assert sent(sim, CivUnset) == []  # S2b is still interested
    sim.unsubscribe("S2b", "s")
    sim.run()
    assert sent(sim, CivUnset) == [("a,2", "a,0")]
    assert core(sim, "a,0").civ(uid) == "001"
    assert core(sim, "a,2").civ(uid) == "001"


def test_civ_set_names_every_overlapping_advertisement_once_per_ilink() -> None:
    """Alg. 2 l.6-10 (getDistinctMatchingAdvs): a new subscription overlapping two
    advertisements of the same host broker causes one CIV_SET on that iLink."""
    topo = TF.figure3()
    sim = octopia(topo)
    sim.attach("P", "c,1")
    sim.attach("Q", "c,1")
    sim.advertise("P", "a", F("k exists"))
    sim.advertise("Q", "a", F("k > 5"))
    sim.run()
    sim.attach("S", "a,0")
    sim.subscribe("S", "s", F("k = 7"))
    sim.run()
    assert sent(sim, CivSet) == [("c,0", "c,1")]
    for client in ("P", "Q"):
        assert core(sim, "c,1").civ(adv_uid(sim, "c,1", client)) == "011"


# --- Fig. 8: static publication routing (scotSPR) ------------------------------------------------
def fig8(dynamic: bool = False) -> BrokerSim:
    topo = TF.figure3()
    sim = octopia(topo, dynamic=dynamic)
    for client, bid in FIG5.items():
        sim.attach(client, bid)
    sim.subscribe("S", "s", F('src = "P1"'))
    sim.subscribe("S0", "s", F('src = "P1"'))
    sim.subscribe("S1", "s", F('src != "P2"'))
    sim.subscribe("S2", "s", F("src exists"))
    for client, bid in (("P0", "a,0"), ("P1", "e,1"), ("P2", "a,2")):
        sim.attach(client, bid)
        sim.advertise(client, "a", F(f'src = "{client}" and k exists'))
    assert sim.run()
    return sim


def test_fig8_civs_of_p0_p1_p2_are_110_111_100() -> None:
    """Fig. 8 / §9.1: the CIVs of the advertisements of P0, P1, P2 are 110, 111 and 100
    (target clusters; Alg. 1's raw CIV_a^i additionally always has the host bit)."""
    sim = fig8()
    hosts = (("P0", "a,0"), ("P1", "e,1"), ("P2", "a,2"))
    got = {c: core(sim, b).target_clusters(adv_uid(sim, b, c)) for c, b in hosts}
    assert got == {"P0": "110", "P1": "111", "P2": "100"}
    raw = {c: core(sim, b).civ(adv_uid(sim, b, c)) for c, b in hosts}
    assert raw == {"P0": "111", "P1": "111", "P2": "100"}


def test_fig8_static_routing_paths() -> None:
    """Fig. 8: P0's publications go inter-cluster only (to C1 and C2), P2's intra-cluster
    only, P1's both: B(e, 1) -> B(d, 1) on an aLink and -> B(e, 0), B(e, 2) on iLinks.  Each
    reaches exactly its interested subscribers, once."""
    sim = fig8()
    topo = sim.topo
    pids = {c: sim.publish(c, {"src": c, "k": 1}) for c in ("P0", "P1", "P2")}
    assert sim.run()
    want = {"P0": {"S1", "S2"}, "P1": {"S", "S0", "S1", "S2"}, "P2": {"S2"}}
    for client, pid in pids.items():
        assert sim.recipients(pid) == Counter(dict.fromkeys(want[client], 1))
        assert max(sim.pub_visits[pid].values()) == 1
    first_hops = {
        c: {(d, topo.link_kind(s, d)) for s, d, _ in pub_copies(sim, pid) if s == sim.clients[c]}
        for c, pid in pids.items()
    }
    assert first_hops["P0"] == {("a,1", T.ILINK), ("a,2", T.ILINK)}
    assert first_hops["P2"] == {("b,2", T.ALINK)}
    assert first_hops["P1"] == {("d,1", T.ALINK), ("e,0", T.ILINK), ("e,2", T.ILINK)}
    # P2's publications never leave C2; no publication ever carries CIV_p under SPR.
    assert {topo.cluster_of(d) for _, d, _ in pub_copies(sim, pids["P2"])} == {2}
    assert sim.copies_with_civp == 0
    # §9.1: static routing paths are at most diam(G_af) + 1 hops long.
    assert max(sim.pub_max_hops.values()) <= topo.diameter + 1


def test_publication_without_conforming_advertisement_is_refused() -> None:
    sim = fig8()
    pid = sim.publish("P0", {"src": "P1", "k": 1})  # P0 advertised src = "P0" only
    sim.publish("P0", {"src": "P0", "k": 1, "extra": 2})  # an attribute it did not advertise
    sim.run()
    assert sim.recipients(pid) == Counter()
    assert [code for _, _, code, _ in sim.refusals] == ["not_advertised", "not_advertised"]


# --- Fig. 7: inter-cluster dynamic routing (scotIDR), Cases I-III --------------------------------
def fig7(placement: dict[str, str], dynamic: bool) -> BrokerSim:
    topo = TF.figure7()
    sim = octopia(topo, dynamic=dynamic)
    sim.attach("P", "b,3")
    sim.advertise("P", "a", F("k exists"))
    for client, bid in placement.items():
        sim.attach(client, bid)
        sim.subscribe(client, "s", F("k >= 0"))
    assert sim.run()
    return sim


Links = list[tuple[str, str]]


def pin(sim: BrokerSim, congested: Links, loads: dict[tuple[str, str], int]) -> None:
    for src, dst in congested:
        sim.pin_link(src, dst, *CONGESTED)
    for (src, dst), q in loads.items():
        sim.pin_link(src, dst, q, 0, 0)  # Q_l * CE = q <= tau: uncongested, but ordered


def run_case(placement: dict[str, str], congested: Links, loads: dict[tuple[str, str], int]) -> dict:
    results = {}
    for dynamic in (False, True):
        sim = fig7(placement, dynamic)
        pin(sim, congested, loads)
        pid = sim.publish("P", {"k": 1})
        assert sim.run()
        assert sim.recipients(pid) == Counter(dict.fromkeys(placement, 1))
        assert max(sim.pub_visits[pid].values()) == 1
        results[dynamic] = (sim, pub_copies(sim, pid))
    return results


def test_fig7b_case1_overloaded_ilinks_spr_8_idr_7() -> None:
    """Fig. 7(b), Case I: l<(b,3),(b,0)> and l<(b,1),(b,0)> are congested.  B(b, 3) puts
    CIV_p^3 = 0001 on the least loaded uncongested target iLink, to B(b, 1); l<(b,1),(b,0)> is
    congested too, so B(b, 1) passes it along S2's subscription tree to B(c, 1), which sends
    it into C0 on the uncongested l<(c,1),(c,0)> and routing turns static.  S1's path has one
    broker more (b3 b1 c1 c0 instead of b3 b0 c0) and no congested iLink.  SPR: 8 inter-broker
    messages, IDR: 7."""
    placement = {"S1": "c,0", "S2": "c,1", "S3": "c,3", "S4": "a,2", "S5": "c,2"}
    loads = {("b,3", "b,1"): 1, ("b,3", "b,2"): 2}  # l<(b,3),(b,1)> the least loaded
    res = run_case(placement, [("b,3", "b,0"), ("b,1", "b,0")], loads)
    spr, idr = res[False][1], res[True][1]
    assert len(spr) == 8 and len(idr) == 7
    assert idr == {
        ("b,3", "b,1", "0001"),
        ("b,3", "b,2", "0000"),
        ("b,3", "c,3", "0000"),
        ("b,2", "a,2", "0000"),
        ("b,2", "c,2", "0000"),
        ("b,1", "c,1", "0001"),
        ("c,1", "c,0", "0000"),
    }
    assert not any(s == "b,3" and d == "b,0" for s, d, _ in idr)  # the congested iLink is avoided
    sim = res[True][0]
    assert sim.counters()["idr_case_1"] == 1 and sim.counters()["idr_case_2"] == 1


def test_fig7c_case2_all_ilinks_overloaded_spr_7_idr_6() -> None:
    """Fig. 7(c), Case II: l<(b,3),(b,0)> and l<(b,3),(b,2)> are congested and C1 is no TSC.
    B(b, 3) puts CIV_p^3 = 0101 on its least loaded uncongested target aLink, to B(c, 3),
    which sends the publication into C0 and C2 on uncongested iLinks and drops CIV_p^3.
    SPR: 7 inter-broker messages, IDR: 6."""
    placement = {"S1": "c,0", "S3": "c,3", "S4": "a,2", "S5": "c,2", "S6": "a,3"}
    loads = {("b,3", "c,3"): 1, ("b,3", "a,3"): 2}  # l<(b,3),(c,3)> the least loaded
    res = run_case(placement, [("b,3", "b,0"), ("b,3", "b,2")], loads)
    spr, idr = res[False][1], res[True][1]
    assert len(spr) == 7 and len(idr) == 6
    assert idr == {
        ("b,3", "a,3", "0000"),
        ("b,3", "c,3", "0101"),
        ("c,3", "c,0", "0000"),
        ("c,3", "c,2", "0000"),
        ("c,2", "b,2", "0000"),
        ("b,2", "a,2", "0000"),
    }
    assert not any(d == "b,1" for _, d, _ in idr)  # l<(b,3),(b,1)> leads to no TSC
    assert res[True][0].counters()["idr_case_2"] == 1


def test_fig7d_case3_all_links_overloaded_spr_7_idr_8() -> None:
    """Fig. 7(d), Case III: every target link at B(b, 3) is congested (three iLinks and the
    aLink to B(c, 3)).  CIV_p^3 = 0011 goes into the least loaded congested target iLink, to
    B(b, 2); B(b, 2) serves C0 on the uncongested l<(b,2),(b,0)> and hands 0010 to B(b, 0);
    l<(b,0),(b,1)> is congested, so B(b, 0) passes it along S1's subscription tree to B(a, 0);
    there l<(a,0),(a,1)> is congested and no aLink is left, so B(a, 0) sends the publication
    into C1 anyway, without CIV_p^3.  The untargeted uncongested aLink l<(b,3),(a,3)> is never
    used.  SPR: 7 inter-broker messages, IDR: 8."""
    placement = {"S1": "a,0", "S2": "c,1", "S3": "c,3", "S4": "a,2"}
    congested = [
        ("b,3", "b,0"), ("b,3", "b,1"), ("b,3", "b,2"), ("b,3", "c,3"),  # every target link
        ("b,2", "b,1"), ("b,0", "b,1"), ("a,0", "a,1"),
    ]
    # all four target links at B(b, 3) are congested; l<(b,3),(b,2)> the least loaded of them
    res = run_case_with_least(placement, congested, least=("b,3", "b,2"))
    spr, idr = res[False][1], res[True][1]
    assert len(spr) == 7 and len(idr) == 8
    assert idr == {
        ("b,3", "c,3", "0000"),
        ("b,3", "b,2", "0011"),
        ("b,2", "a,2", "0000"),
        ("b,2", "b,0", "0010"),
        ("b,0", "a,0", "0010"),
        ("a,0", "a,1", "0000"),
        ("a,1", "b,1", "0000"),
        ("b,1", "c,1", "0000"),
    }
    assert not any(s == "b,3" and d == "a,3" for s, d, _ in idr)
    counters = res[True][0].counters()
    cases = [counters[f"idr_case_{k}"] for k in (1, 2, 3)]
    assert cases == [1, 1, 2]  # I at B(b,2), II at B(b,0), III at B(b,3) and B(a,0)


def run_case_with_least(placement: dict[str, str], congested: Links, least: tuple[str, str]) -> dict:
    """Like `run_case`, every congested link with Q_l 200 except `least` (Q_l 100)."""
    results = {}
    for dynamic in (False, True):
        sim = fig7(placement, dynamic)
        for src, dst in congested:
            sim.pin_link(src, dst, 100 if (src, dst) == least else 200, 10, 1)
        pid = sim.publish("P", {"k": 1})
        assert sim.run()
        assert sim.recipients(pid) == Counter(dict.fromkeys(placement, 1))
        assert max(sim.pub_visits[pid].values()) == 1
        results[dynamic] = (sim, pub_copies(sim, pid))
    return results


def intra_cluster(sim: BrokerSim) -> BrokerSim:
    for c in sim.cores.values():
        assert isinstance(c, OctopiaBroker)
        c.intra_cluster = True
    return sim


def test_fig7d_with_intra_cluster_routing_uses_the_untargeted_alink_7_messages() -> None:
    """Fig. 7(d) with the limitation (ii) of §9.2 lifted (issue 46 item 3): every target link
    at B(b, 3) is congested, so instead of an extra copy into a congested iLink (Case III),
    CIV_p^3 = 0111 rides on the uncongested untargeted aLink l<(b,3),(a,3)>; B(a, 3) sends the
    publication into C0, C1 and C2 over its own uncongested iLinks.  7 messages, against 8
    for the paper's IDR and 7 for SPR; no congested iLink is used."""
    placement = {"S1": "a,0", "S2": "c,1", "S3": "c,3", "S4": "a,2"}
    congested = [
        ("b,3", "b,0"), ("b,3", "b,1"), ("b,3", "b,2"), ("b,3", "c,3"),
        ("b,2", "b,1"), ("b,0", "b,1"), ("a,0", "a,1"),
    ]
    sim = intra_cluster(fig7(placement, True))
    for src, dst in congested:
        sim.pin_link(src, dst, 100 if (src, dst) == ("b,3", "b,2") else 200, 10, 1)
    pid = sim.publish("P", {"k": 1})
    assert sim.run()
    assert sim.recipients(pid) == Counter(dict.fromkeys(placement, 1))
    assert max(sim.pub_visits[pid].values()) == 1
    copies = pub_copies(sim, pid)
    assert copies == {
        ("b,3", "c,3", "0000"),  # the congested target aLink: no iLink left to go around it
        ("b,3", "a,3", "0111"),
        ("a,3", "a,0", "0000"),
        ("a,3", "a,1", "0000"),
        ("a,3", "a,2", "0000"),
        ("a,1", "b,1", "0000"),
        ("b,1", "c,1", "0000"),
    }
    assert not set(congested) - {("b,3", "c,3")} & {(s, d) for s, d, _ in copies}
    assert sim.counters()["idr_case_3_alink"] == 1 and sim.counters()["idr_case_3"] == 0


def test_a_congested_target_alink_is_bypassed_through_a_parallel_cluster() -> None:
    """Intra-cluster dynamic routing: l<(b,3),(c,3)> is congested and B(b, 3)'s iLinks are
    not, so S3's copy goes b,3 -> b,0 -> c,0 -> c,3 (a detour whose exit is c,3) and arrives
    once; the paper's IDR would queue it on the congested aLink."""
    placement = {"S3": "c,3"}
    sim = intra_cluster(fig7(placement, True))
    sim.pin_link("b,3", "c,3", *CONGESTED)
    assert sim.trace is not None
    sim.trace.clear()
    pid = sim.publish("P", {"k": 1})
    assert sim.run()
    assert sim.recipients(pid) == Counter({"S3": 1})
    walk = [(src, dst, type(m).__name__) for _, src, dst, m in sim.trace]
    assert walk == [("b,3", "b,0", "ScotDetour"), ("b,0", "c,0", "ScotDetour"), ("c,0", "c,3", "ScotDetour")]
    assert sim.counters()["idr_alink_bypass"] == 1


def test_the_daemon_runs_intra_cluster_routing_with_routing_idr_plus() -> None:
    from pathlib import Path

    from broker.app import BrokerApp
    from broker.settings import BrokerSettings
    from pubsub.kernel.message import Ref
    from pubsub.runtime.stats import Stats

    topo = TF.figure7().with_addresses({b: f"127.0.0.1:{20000 + k}" for k, b in enumerate(TF.figure7().brokers)})
    conf = BrokerSettings(broker_topology=Path("in-memory.json"), broker_id="b,3", broker_routing="idr+")
    app = BrokerApp(topo, conf, Stats(), Ref(topo.address("b,3")))
    assert isinstance(app.core, OctopiaBroker) and app.core.dynamic and app.core.intra_cluster
    assert app.core.status()["mode"] == "idr+"


def test_idr_without_congestion_is_spr() -> None:
    """With no congested link IDR sends exactly the copies SPR sends (§10: SPR vs IDR)."""
    placement = {"S1": "a,0", "S2": "c,1", "S3": "c,3", "S4": "a,2"}
    res = run_case(placement, [], {})
    assert res[False][1] == res[True][1]


@pytest.mark.parametrize("dynamic", [False, True])
def test_messages_from_strangers_and_stale_ids_are_counted_not_applied(dynamic: bool) -> None:
    topo = TF.figure7()
    broker = OctopiaBroker(topo, "b,3", dynamic=dynamic)
    assert broker.handle(ScotSubscribe("x/s1", F("k > 1"), "c,0"), 0.0) == []  # not a neighbour
    assert broker.handle(ScotSubscribe("x/s1", F("k > 1"), "b,2"), 0.0) == []  # iLink, not aLink
    assert broker.handle(CivSet(["nope"], "b,2"), 0.0) == []
    assert broker.handle(ScotAdvertise("x/a1", F("k > 1"), 1, "c,3"), 0.0) == []  # aLink
    assert broker.prt_size == 0 and broker.clt_size == 0
    assert broker.counters == Counter(
        {"not_a_neighbour": 1, "sub_not_from_cluster": 1, "stale_civ": 1, "adv_not_from_region": 1}
    )
    refused = broker.unsubscribe("C", "never")
    assert refused[0].msg.code == "unknown_id"
