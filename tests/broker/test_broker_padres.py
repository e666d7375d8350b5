"""The PADRES-style TID baseline (`broker.cores.padres`) against §2's description (Fig. 1).

Fig. 1 is a cyclic overlay of six brokers in three regions R1 = {1, 4}, R2 = {2, 5},
R3 = {3, 6}; its links (1-2, 2-3, 4-5, 5-6 and 1-4, 2-5, 3-6) make it the SCOT
path(a, b, c) □ K_2, with brokers 1, 2, 3 = (a,0), (b,0), (c,0) and 4, 5, 6 = (a,1), (b,1),
(c,1).  P is hosted by broker 1 and S by broker 4 (both in R1).
"""

from __future__ import annotations

from collections import Counter

from broker.cores.language.text import parse_filter as F
from broker.cores.messages import PadresAdvertise, PadresPublish, PadresSubscribe
from broker.cores.padres import PadresBroker
from broker.cores.topology import scot
from broker.sim import BrokerSim

FIG1 = scot([["a", "b"], ["b", "c"]], 2)


def padres(**kw: object) -> BrokerSim:
    return BrokerSim(FIG1, protocol="padres", trace=True, **kw)  # type: ignore[arg-type]


def core(sim: BrokerSim, bid: str) -> PadresBroker:
    c = sim.cores[bid]
    assert isinstance(c, PadresBroker)
    return c


def test_fig1a_advertisement_flooding_with_tids_and_duplicates() -> None:
    """Fig. 1(a): P's advertisement floods the cyclic overlay; every broker keeps the first
    copy (one SRT entry per TID) and drops later ones: 2|E| - (N - 1) = 9 messages for 7 links
    and 6 brokers, of which 4 are duplicates (the extra messages of §2)."""
    sim = padres()
    sim.attach("P", "a,0")
    sim.advertise("P", "a", F("k exists"))
    sim.run()
    assert sim.traffic == Counter({"padres_adv": 9})
    assert sim.counters()["duplicate_adv"] == 4
    tid = core(sim, "a,0").local_advs[("P", "a")]
    assert all(core(sim, b).srt_size == 1 and tid in core(sim, b).srt for b in FIG1.brokers)
    # The first copies form a spanning tree rooted at the host broker.
    parent = {b: core(sim, b).srt[tid].last_hop for b in FIG1.brokers if b != "a,0"}
    for b in parent:
        seen, node = set(), b
        while node != "a,0":
            assert node not in seen
            seen.add(node)
            node = parent[node]


def test_subscription_follows_the_reverse_advertisement_path_and_publication_comes_back() -> None:
    """§1: a subscription travels towards the brokers that forwarded the matching
    advertisement; the publication follows that path in reverse, once per broker."""
    sim = padres()
    sim.attach("P", "a,0")
    sim.attach("S", "c,1")
    sim.advertise("P", "a", F("k exists"))
    sim.run()
    sim.subscribe("S", "s", F("k > 3"))
    sim.run()
    tid = core(sim, "a,0").local_advs[("P", "a")]
    path = ["c,1"]
    while path[-1] != "a,0":
        path.append(core(sim, path[-1]).srt[tid].last_hop)
    assert sim.op_stats("subscribe")[0].messages == len(path) - 1
    holders = {b for b in FIG1.brokers if core(sim, b).prt_size}
    assert holders == set(path)
    pid = sim.publish("P", {"k": 5})
    miss = sim.publish("P", {"k": 1})
    sim.run()
    assert sim.recipients(pid) == Counter({"S": 1})
    assert sim.recipients(miss) == Counter()
    assert set(sim.pub_visits[pid]) == set(path[:-1])
    assert sim.trace is not None
    assert all(m.tid == tid for _, _, _, m in sim.trace if isinstance(m, PadresPublish))


def test_fig1b_advertisement_tree_length_depends_on_link_load() -> None:
    """Fig. 1(b): with l<1,4> and l<2,5> loaded while P advertises, S's advertisement tree
    (and so the publication path) runs through the other two regions: 5 hops instead of 1.
    OctopiA on the same load still routes P -> S over the single iLink (trees of length 1)."""
    hops = {}
    for protocol in ("padres", "octopia"):
        sim = BrokerSim(FIG1, protocol=protocol, propagation=0.001)
        for src, dst in (("a,0", "a,1"), ("b,0", "b,1")):
            sim.set_link(src, dst, propagation=1.0)
        sim.attach("P", "a,0")
        sim.attach("S", "a,1")
        sim.advertise("P", "a", F("k exists"))
        sim.run()
        sim.set_link("a,0", "a,1", propagation=0.001)  # the load is gone again
        sim.set_link("b,0", "b,1", propagation=0.001)
        sim.subscribe("S", "s", F("k exists"))
        sim.run()
        pid = sim.publish("P", {"k": 1})
        sim.run()
        assert sim.recipients(pid) == Counter({"S": 1})
        hops[protocol] = sim.pub_max_hops[pid]
    assert hops == {"padres": 5, "octopia": 1}


def test_subscription_before_advertisement_is_bound_when_it_arrives() -> None:
    sim = padres()
    sim.attach("P", "c,0")
    sim.attach("S", "a,1")
    sim.subscribe("S", "s", F("k exists"))
    sim.run()
    assert sim.traffic["padres_sub"] == 0
    sim.advertise("P", "a", F("k exists"))
    sim.run()
    assert sim.traffic["padres_sub"] >= 1
    pid = sim.publish("P", {"k": 1})
    sim.run()
    assert sim.recipients(pid) == Counter({"S": 1})


def test_unsubscribe_retraces_and_unadvertise_prunes_every_path() -> None:
    sim = padres()
    sim.attach("P", "a,0")
    sim.attach("Q", "c,1")
    sim.attach("S", "b,1")
    sim.attach("T", "c,0")
    sim.advertise("P", "a", F("k exists"))
    sim.advertise("Q", "a", F("k exists"))
    sim.subscribe("S", "s", F("k exists"))
    sim.subscribe("T", "s", F("k exists"))
    sim.run()
    tid_p = core(sim, "a,0").local_advs[("P", "a")]
    uid_s = core(sim, "b,1").local_subs[("S", "s")]
    assert sum(uid_s in core(sim, b).routes for b in FIG1.brokers) >= 2  # bound to both trees
    sim.unsubscribe("S", "s")
    sim.run()
    assert sim.op_stats("unsubscribe")[0].messages >= 2
    for b in FIG1.brokers:
        assert uid_s not in core(sim, b).prt and uid_s not in core(sim, b).routes
    sim.unadvertise("P", "a")
    sim.run()
    for b in FIG1.brokers:
        c = core(sim, b)
        assert tid_p not in c.srt and tid_p in c.retired
        assert all(tid_p not in r for r in c.routes.values())
    # T is still reachable from Q; nothing is left of P's tree.
    pid = sim.publish("Q", {"k": 1})
    refused = sim.publish("P", {"k": 1})
    sim.run()
    assert sim.recipients(pid) == Counter({"T": 1})
    assert sim.recipients(refused) == Counter()
    assert sim.counters()["duplicate_unadv"] == 4


def test_late_duplicate_of_a_withdrawn_advertisement_is_not_readmitted() -> None:
    broker = PadresBroker(FIG1, "b,0")
    adv = PadresAdvertise("a,0/a1", F("k exists"), "a,0")
    assert len(broker.handle(adv, 0.0)) == 2  # to c,0 and b,1
    broker.handle(PadresAdvertise("a,0/a1", F("k exists"), "b,1"), 0.0)
    from broker.cores.messages import PadresUnadvertise

    broker.handle(PadresUnadvertise("a,0/a1", "a,0"), 0.0)
    assert broker.handle(PadresAdvertise("a,0/a1", F("k exists"), "c,0"), 0.0) == []
    assert "a,0/a1" not in broker.srt
    assert broker.counters["duplicate_adv"] == 2
    # A subscription bound to the withdrawn tree is counted and not stored.
    assert broker.handle(PadresSubscribe("x/s1", F("k > 1"), ["a,0/a1"], "c,0"), 0.0) == []
    assert broker.prt_size == 0 and broker.counters["stale_sub"] == 1
