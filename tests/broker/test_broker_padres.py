"""The PADRES-style TID baseline (`broker.cores.padres`) against §2's description (Fig. 1).

Fig. 1 is a cyclic overlay of six brokers in three regions R1 = {1, 4}, R2 = {2, 5},
R3 = {3, 6}; its links (1-2, 2-3, 4-5, 5-6 and 1-4, 2-5, 3-6) make it the SCOT
path(a, b, c) □ K_2, with brokers 1, 2, 3 = (a,0), (b,0), (c,0) and 4, 5, 6 = (a,1), (b,1),
(c,1).  P is hosted by broker 1 and S by broker 4 (both in R1).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from broker.cores.language.text import parse_filter as F
from broker.cores.messages import Attrs, PadresAdvertise, PadresPublish, PadresSubscribe
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


# --- TID-D: dynamic routing over the other advertisement trees (Fig. 1(c), §10) ---------------
P1_TREE_SLOW = (("b,0", "b,1"), ("c,1", "b,1"))  # P1's tree reaches b,1 over a,1
P2_TREE_SLOW = (("a,1", "b,1"), ("c,0", "c,1"))  # P2's tree reaches c,1 over b,1


def fig1c(
    *, dynamic: bool = True, subscribers: tuple[str, ...] = ("S", "V", "T"), p2_adv: str = "k exists"
) -> BrokerSim:
    """Fig. 1(c) on FIG1: P1 at a,0 and P2 at a,1 advertise while some links are slow, so
    that their trees overlap at b,0 = broker 2: S (at c,1) is bound to P1's tree through
    c,0 (l<2,3>) and to P2's through b,1 (l<2,5>).  V at b,1 gets P1's publications over
    a,1 and is bound to P2's tree through b,0; T at c,0 is bound to both trees through c,0."""
    sim = BrokerSim(FIG1, protocol="padres", dynamic=dynamic, trace=True, propagation=0.001)
    for client, bid in (("P1", "a,0"), ("P2", "a,1"), ("S", "c,1"), ("V", "b,1"), ("T", "c,0")):
        sim.attach(client, bid)
    for publisher, slow in (("P1", P1_TREE_SLOW), ("P2", P2_TREE_SLOW)):
        for src, dst in slow:
            sim.set_link(src, dst, propagation=1.0)
        sim.advertise(publisher, "a", F(p2_adv if publisher == "P2" else "k exists"))
        sim.run()
        for src, dst in slow:
            sim.set_link(src, dst, propagation=0.001)
    for client in subscribers:
        sim.subscribe(client, "s", F("k > 0"))
    sim.run()
    return sim


def uid_of(sim: BrokerSim, client: str) -> str:
    return core(sim, sim.clients[client]).local_subs[(client, "s")]


def copies(sim: BrokerSim, pid: str) -> list[tuple[str, str, str, list[str]]]:
    assert sim.trace is not None
    return [
        (src, dst, m.tid, list(m.targets))
        for _, src, dst, m in sim.trace
        if isinstance(m, PadresPublish) and m.pid == pid
    ]


def test_fig1c_trees_overlap_at_broker_2() -> None:
    sim = fig1c()
    tid1, tid2 = (core(sim, b).local_advs[(p, "a")] for p, b in (("P1", "a,0"), ("P2", "a,1")))
    assert core(sim, "b,0").routes[uid_of(sim, "S")] == {tid1: "c,0", tid2: "b,1"}
    assert core(sim, "b,0").routes[uid_of(sim, "V")] == {tid2: "b,1"}
    assert core(sim, "b,0").routes[uid_of(sim, "T")] == {tid1: "c,0", tid2: "c,0"}
    assert core(sim, "b,0").status()["mode"] == "tid-d"
    assert core(fig1c(dynamic=False), "b,0").status()["mode"] == "tid-s"


def test_tidd_restamps_a_congested_next_hop_onto_another_tree() -> None:
    """l<2,3> (b,0 -> c,0) congested by Eq. 3: at b,0 S's copy of P1's publication is
    re-stamped with P2's TID and goes over l<2,5> to b,1, then down P2's tree to c,1 -- once,
    in 3 hops, no broker twice; TID-S on the same congestion keeps to the congested link."""
    sim = fig1c(subscribers=("S",))
    tid1, tid2 = core(sim, "a,0").local_advs[("P1", "a")], core(sim, "a,1").local_advs[("P2", "a")]
    sim.pin_link("b,0", "c,0", 100, 10, 1)  # Q_l * CE = 100 * 11 / 2 > tau = 10
    assert core(sim, "b,0").lst.overloaded("c,0")
    pid = sim.publish("P1", {"k": 1})
    sim.run()
    assert sim.recipients(pid) == Counter({"S": 1})
    s = uid_of(sim, "S")
    assert copies(sim, pid) == [
        ("a,0", "b,0", tid1, []),
        ("b,0", "b,1", tid2, [s]),
        ("b,1", "c,1", tid2, [s]),
    ]
    assert sim.pub_visits[pid] == Counter({"b,0": 1, "b,1": 1, "c,1": 1})
    assert sim.pub_max_hops[pid] == 3
    assert sim.counters()["tidd_restamped"] == 1 and sim.counters()["hop_limit"] == 0

    static = fig1c(dynamic=False, subscribers=("S",))
    static.pin_link("b,0", "c,0", 100, 10, 1)
    pid = static.publish("P1", {"k": 1})
    static.run()
    assert static.recipients(pid) == Counter({"S": 1})
    assert [(src, dst) for src, dst, _, _ in copies(static, pid)] == [("a,0", "b,0"), ("b,0", "c,0"), ("c,0", "c,1")]
    assert static.counters()["tidd_restamped"] == 0


def test_tidd_targets_keep_every_delivery_single() -> None:
    """The trap: S is re-stamped away from c,0, but T (at c,0) has no other way, so P1's copy
    still crosses l<2,3> -- naming only T: c,0 must not forward it to S on P1's tree.  And the
    re-stamped copy for S passes b,1, where V (bound to P2's tree) gets P1's publication over
    a,1 already: it serves S only.  Everyone gets the publication exactly once."""
    sim = fig1c()
    tid1, tid2 = core(sim, "a,0").local_advs[("P1", "a")], core(sim, "a,1").local_advs[("P2", "a")]
    sim.pin_link("b,0", "c,0", 100, 10, 1)
    pid = sim.publish("P1", {"k": 1})
    sim.run()
    assert sim.recipients(pid) == Counter({"S": 1, "T": 1, "V": 1})
    s, t = uid_of(sim, "S"), uid_of(sim, "T")
    assert sorted(copies(sim, pid)) == sorted(
        [
            ("a,0", "a,1", tid1, []),  # to V, untouched
            ("a,0", "b,0", tid1, []),
            ("a,1", "b,1", tid1, []),
            ("b,0", "c,0", tid1, [t]),  # T stays on the congested link, alone
            ("b,0", "b,1", tid2, [s]),
            ("b,1", "c,1", tid2, [s]),
        ]
    )
    # b,1 is crossed by two copies, each serving other subscriptions: V's and S's.
    assert sim.pub_visits[pid]["b,1"] == 2
    counters = sim.counters()
    assert counters["tidd_restamped"] == 1 and counters["tidd_no_alternative"] == 1
    # Without congestion TID-D is TID-S: one untargeted copy per tree edge, every broker once.
    sim.unpin_link("b,0", "c,0")
    pid = sim.publish("P1", {"k": 2})
    sim.run()
    assert sim.recipients(pid) == Counter({"S": 1, "T": 1, "V": 1})
    assert all(targets == [] and tid == tid1 for _, _, tid, targets in copies(sim, pid))
    assert set(sim.pub_visits[pid].values()) == {1}


def test_tidd_moves_a_subscribers_subscriptions_together() -> None:
    """S's two subscriptions both match P1's publication; only one is bound to P2's tree
    too.  TID-D moves the subscriptions of one subscriber broker as a unit (to a TID they all
    have, with the same next hop), so S still gets one delivery naming both -- not two."""
    sim = fig1c(subscribers=("S",), p2_adv="k < 5 and k exists")
    sim.subscribe("S", "s2", F("k > 10"))
    sim.run()
    s2 = core(sim, "c,1").local_subs[("S", "s2")]
    assert len(core(sim, "b,0").routes[s2]) == 1 and len(core(sim, "b,0").routes[uid_of(sim, "S")]) == 2
    sim.pin_link("b,0", "c,0", 100, 10, 1)
    pid = sim.publish("P1", {"k": 20})
    sim.run()
    assert [(d.client, d.sub_ids) for d in sim.deliveries[pid]] == [("S", ("s", "s2"))]
    assert sim.counters()["tidd_no_alternative"] == 2 and sim.counters()["tidd_restamped"] == 0
    low = sim.publish("P1", {"k": 3})  # only s matches: it is re-stamped alone
    sim.run()
    assert [(d.client, d.sub_ids) for d in sim.deliveries[low]] == [("S", ("s",))]
    assert sim.counters()["tidd_restamped"] == 1


def test_tidd_without_an_uncongested_alternative_stays_on_its_tree() -> None:
    """Both of S's next hops at b,0 congested: nothing to re-stamp onto (counted), the copy
    goes on P1's tree over the congested link, as TID-S would."""
    sim = fig1c(subscribers=("S",))
    sim.pin_link("b,0", "c,0", 100, 10, 1)
    sim.pin_link("b,0", "b,1", 100, 10, 1)
    pid = sim.publish("P1", {"k": 1})
    sim.run()
    assert sim.recipients(pid) == Counter({"S": 1})
    assert [(src, dst, targets) for src, dst, _, targets in copies(sim, pid)] == [
        ("a,0", "b,0", []), ("b,0", "c,0", []), ("c,0", "c,1", []),
    ]
    assert sim.counters()["tidd_no_alternative"] == 1 and sim.counters()["tidd_restamped"] == 0


def test_tidd_never_restamps_back_to_the_sender_and_keeps_the_hop_budget() -> None:
    """A broker's own unit: a targeted copy serves only its targets; the sender is never an
    alternative; a copy whose hop count leaves no room for one more tree path is not
    re-stamped (so no copy ever reaches the max_hops guard)."""
    broker = PadresBroker(FIG1, "b,0", dynamic=True)
    sub = F("k > 0")
    for tid, last_hop in (("a,0/a1", "a,0"), ("a,1/a1", "a,0"), ("c,0/a1", "c,0")):
        broker.handle(PadresAdvertise(tid, F("k exists"), last_hop), 0.0)
    broker.handle(PadresSubscribe("c,1/s1", sub, ["a,0/a1"], "c,0"), 0.0)
    broker.handle(PadresSubscribe("c,1/s1", sub, ["a,1/a1", "c,0/a1"], "b,1"), 0.0)
    broker.handle(PadresSubscribe("x,9/s2", sub, ["a,0/a1"], "c,0"), 0.0)  # not targeted below
    broker.link_status("c,0", 100, 10, 1, 0.0)
    attrs = Attrs({"k": 1})

    def route(msg: PadresPublish) -> list[tuple[str, str, list[str]]]:
        return [(d, m.tid, m.targets) for d, m in broker.handle(msg, 0.0) if isinstance(m, PadresPublish)]

    # targeted at c,1/s1 only: x,9/s2 is not served; re-stamped to a TID whose hop is b,1
    assert route(PadresPublish("p1", "P", attrs, "a,0/a1", 1, "a,0", ["c,1/s1"])) == [
        ("b,1", "a,1/a1", ["c,1/s1"])
    ]
    # from b,1 itself, b,1 is no alternative: the copy stays on the congested link
    assert route(PadresPublish("p2", "P", attrs, "a,0/a1", 1, "b,1", ["c,1/s1"])) == [
        ("c,0", "a,0/a1", ["c,1/s1"])
    ]
    # re-stamped only while one more tree path (N - 1 hops) fits under the guard
    last = broker.max_hops - len(FIG1)  # + N - 1 = max_hops - 1: the last count still handled
    assert route(PadresPublish("p3", "P", attrs, "a,0/a1", last, "a,0", ["c,1/s1"])) == [
        ("b,1", "a,1/a1", ["c,1/s1"])
    ]
    assert route(PadresPublish("p3", "P", attrs, "a,0/a1", last + 1, "a,0", ["c,1/s1"])) == [
        ("c,0", "a,0/a1", ["c,1/s1"])
    ]
    assert broker.counters["tidd_over_budget"] == 1
    # a target this broker does not hold is dropped, counted
    assert route(PadresPublish("p4", "P", attrs, "a,0/a1", 1, "a,0", ["zz/s9"])) == []
    assert broker.counters["tidd_stale_target"] == 1


def test_tidd_copy_with_targets_round_trips_and_the_factory_builds_it() -> None:
    from broker.cores.factory import make_core
    from pubsub.kernel.wire import decode, encode_payload

    msg = PadresPublish("p", "P", Attrs({"k": 1}), "a,0/a1", 2, "b,0", ["c,1/s1", "b,1/s2"])
    assert decode(encode_payload(msg)) == msg
    plain = PadresPublish("p", "P", Attrs({"k": 1}), "a,0/a1", 2, "b,0")
    back = decode(encode_payload(plain))
    assert isinstance(back, PadresPublish) and back.targets == []
    c = make_core("padres", FIG1, "a,0", dynamic=True)
    assert isinstance(c, PadresBroker) and c.dynamic and c.protocol == "padres"
    assert not core(padres(), "a,0").dynamic


def test_daemon_selects_tidd_with_routing_and_refuses_a_mismatched_pair(tmp_path: Path) -> None:
    """`--routing tid-s|tid-d` goes with `--protocol padres` (default tid-s), idr|spr with
    octopia (default idr); a routing of the other protocol is a one-line configuration error."""
    from click.testing import CliRunner

    from broker.app import BrokerApp
    from broker.settings import BrokerSettings
    from pubsub.cli.main import main
    from pubsub.kernel.message import Ref
    from pubsub.runtime.stats import Stats

    def settings(**kw: Any) -> BrokerSettings:
        return BrokerSettings(broker_topology=tmp_path / "t.json", broker_id="a,0", **kw)

    assert settings().broker_routing == "idr"
    assert settings(broker_protocol="padres").broker_routing == "tid-s"
    topo = scot([["a", "b"], ["b", "c"]], 2, addresses={b: f"127.0.0.1:{7100 + n}" for n, b in enumerate(FIG1.brokers)})
    for routing, dynamic in (("tid-d", True), ("tid-s", False)):
        app = BrokerApp(topo, settings(broker_protocol="padres", broker_routing=routing), Stats(), Ref("127.0.0.1:7100"))
        assert isinstance(app.core, PadresBroker) and app.core.dynamic is dynamic
        assert app.status()["settings"]["routing"] == routing and app.status()["mode"] == routing
    path = tmp_path / "topo.json"
    path.write_text(json.dumps({"factor": [["a", "b"]], "m": 2, "addresses": {
        f"{x},{i}": f"127.0.0.1:{7200 + 2 * n + i}" for n, x in enumerate("ab") for i in range(2)}}))
    for protocol, routing, allowed in (("padres", "idr", "tid-s or tid-d"), ("octopia", "tid-d", "idr or spr")):
        result = CliRunner().invoke(
            main, ["broker", "--topology", str(path), "--id", "a,0", "--protocol", protocol, "--routing", routing]
        )
        assert result.exit_code == 2, result.output
        assert f"{routing} is not a routing of protocol {protocol}, which takes {allowed}" in result.output
        assert "--routing" in result.output and "Traceback" not in result.output
