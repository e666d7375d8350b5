"""Routing around failed brokers and rebuilding a restarted one, in the simulator (issue 46
items 2 and 4): `broker.cores.detours`, `broker.cores.resync`.

On random SCOTs (m >= 2) and the random workloads of `test_broker_properties`, for OctopiA with
SPR and with IDR (congestion included):

- `test_after_detection_every_publication_reaches_the_live_subscribers_once`: a first round
  settles; in the second, while its publications are under way (some copies handled, some on
  the wire), one broker crashes or hangs (two when m >= 3, anywhere) and its neighbours
  suspect it;
  rounds of control operations and publications by the clients of live brokers follow.  Every
  publication of a live publisher, those under way at the crash included, reaches exactly the
  live clients with a matching subscription, once each (the copies the crashed broker had not
  acknowledged go around it), every second arrival of a copy at a broker is suppressed as a
  duplicate (none is handled twice), and no walk exceeds the hop guard.  Then the crashed brokers
  restart with empty tables (the hung ones resume, handle what waited for them, nothing twice,
  and are heard again): once settled, every table is exact for the live clients (as
  `check_tables` of a never-failed run: CIVs, CLTs, PRTs), and a last round passes the full
  checks of `test_broker_properties` (no cluster entered in vain, hop bounds of §9).
- Unit tests on a 3 x 3 SCOT: the detour of a publication around an inner broker (4 messages,
  through the parallel cluster), a hung broker that resumes (nothing twice), bad detours and
  syncs counted and dropped.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.cores.language.filters import Filter
from broker.cores.language.predicates import Predicate
from broker.cores.messages import CltSync, PrtSync, ScotDetour, ScotPublish, ScotSubscribe
from broker.cores.topology import scot
from broker.sim import BrokerSim
from pubsub.kernel.wire import encode_payload
from tests.broker.test_broker_properties import (
    PROPERTY_SETTINGS,
    Model,
    advertisements,
    apply_congestion,
    apply_control,
    check_publication,
    check_tables,
    concrete,
    make_sim,
    publications,
    scenarios,
    subscriptions,
)


def forget_clients_of(sim: BrokerSim, model: Model, victims: set[str]) -> None:
    """What the clients of crashed brokers had dies with them."""
    for client, bid in sim.clients.items():
        if bid in victims:
            if client in model.advs:
                model.advs[client] = {}
            model.subs.pop(client, None)


def check_live_delivery(sim: BrokerSim, model: Model, pid: str, publisher: str, attrs: dict[str, Any],
                        victims: set[str], *, under_way: bool) -> int:
    """Exactly the live matching clients, once each; returns the extra arrivals at live
    brokers (each must have been suppressed as a duplicate).  A publication `under_way` at
    the crash may have reached the victims before."""
    every = [d.client for d in sim.deliveries.get(pid, [])]
    assert len(every) == len(set(every)), f"{pid} delivered twice: {every}"
    got = [c for c in every if sim.clients[c] not in victims]
    visits = sim.pub_visits.get(pid, Counter())
    if not under_way:
        assert not set(visits) & victims, f"{pid} sent to a suspect: {visits}"
    if visits:
        assert sim.pub_max_hops[pid] < 2 * len(sim.topo) + 2
    want = {c for c in model.interested(attrs) if sim.clients[c] not in victims}
    if model.conforming(publisher, attrs) is None:
        want = set()
    assert set(got) == want, f"{pid} {attrs} reached {sorted(got)}, not {sorted(want)}"
    return sum(n - 1 for b, n in visits.items() if b not in victims)


@pytest.mark.parametrize("variant", ["octopia-spr", "octopia-idr"])
@PROPERTY_SETTINGS
@given(
    sc=scenarios(advertisements(), subscriptions(), publications(), min_m=2),
    picks=st.lists(st.integers(0, 10**6), min_size=2, max_size=2),
    hang=st.booleans(),
)
def test_after_detection_every_publication_reaches_the_live_subscribers_once(
    variant: str, sc: dict[str, Any], picks: list[int], hang: bool
) -> None:
    topo, seed = sc["topo"], sc["seed"]
    sim = make_sim(variant, topo, sc["clients"], seed, real=seed % 2 == 1)
    model = Model()
    brokers = list(topo.brokers)
    victims = {brokers[picks[0] % len(brokers)]}
    if topo.m >= 3:
        victims.add(brokers[picks[1] % len(brokers)])

    def round_of(controls: list[tuple], congestion: list[tuple], pubs: list[tuple], failed: set[str],
                 crash_midway: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        for op in controls:
            if sim.clients[op[1]] not in failed:
                apply_control(sim, model, op)
        assert sim.run(), "control operations did not settle"
        for op in congestion:
            apply_congestion(sim, op)
        if seed % 3:
            sim.heartbeat()  # acknowledgements, now and then
        suppressed_before = sim.counters()["suppressed_duplicates"]
        issued = []
        for publisher, pub in pubs:
            if sim.clients[publisher] in failed:
                continue
            attrs = concrete(model, publisher, pub)
            issued.append((sim.publish(publisher, attrs), publisher, attrs))
        if crash_midway:  # some copies handled, some on the wire, some still queued
            sim.run(max_events=1 + seed % 7)
            for v in sorted(crash_midway):
                (sim.hang if hang else sim.crash)(v)
            for v in sorted(crash_midway):
                sim.detect(v)
            if not hang:
                forget_clients_of(sim, model, crash_midway)
            failed = crash_midway
        assert sim.run(), "publications did not settle"
        extra = 0
        for pid, publisher, attrs in issued:
            if sim.clients[publisher] in failed:
                continue  # published at a broker that crashed meanwhile
            if failed:
                extra += check_live_delivery(sim, model, pid, publisher, attrs, failed,
                                             under_way=bool(crash_midway))
            else:
                check_publication(sim, variant, model, pid, publisher, attrs)
        # every second arrival at a broker was suppressed, none handled twice
        assert extra <= sim.counters()["suppressed_duplicates"] - suppressed_before

    first, second, *rest = sc["rounds"]
    round_of(*first, failed=set())
    round_of(*second, failed=set(), crash_midway=victims)
    for controls, congestion, pubs in rest:
        round_of(controls, congestion, pubs, failed=victims)
    for bid in list(sim.pinned):  # congestion over: the last round checks §9's bounds
        sim.unpin_link(*bid)
    for v in sorted(victims):  # a hung broker goes on where it stopped; a crashed one restarts empty
        if hang:
            sim.resume(v)
            sim.clear(v)
        else:
            sim.restart(v)
    assert sim.run(), "the return did not settle"
    twice = {pid: ds for pid, ds in sim.deliveries.items() if len({d.client for d in ds}) != len(ds)}
    assert not twice, f"a resumed broker's backlog delivered publications twice: {sorted(twice)[:5]}"
    check_tables(sim, model)
    again = [("sub", c, f) for c, f in zip(("S0", "S1", "S2"), (Filter(()), Filter(()), Filter(())), strict=True)]
    round_of(again + [("adv", p, Filter((Predicate("a", "exists", None),))) for p in ("P0", "P1", "P2")], [],
             [(p, ("pick", k)) for k, p in enumerate(("P0", "P1", "P2"))], failed=set())
    check_tables(sim, model)


# --- a 3 x 3 SCOT, by hand ----------------------------------------------------------------------
def three_by_three() -> BrokerSim:
    """Factor a - b - c (b inner), m = 3: publisher P at (a,0), subscriber S at (c,0)."""
    sim = BrokerSim(scot([["a", "b"], ["b", "c"]], 3), protocol="octopia", trace=True)
    sim.attach("P", "a,0")
    sim.attach("S", "c,0")
    sim.attach("T", "c,1")
    sim.advertise("P", "ad", Filter((Predicate("x", "exists", None),)))
    sim.subscribe("S", "s", Filter((Predicate("x", ">", 0),)))
    sim.subscribe("T", "t", Filter((Predicate("x", ">", 0),)))
    assert sim.run()
    return sim


def test_a_publication_goes_around_a_crashed_inner_broker_through_a_parallel_cluster() -> None:
    sim = three_by_three()
    sim.crash("b,0")
    sim.detect("b,0")
    assert sim.trace is not None
    sim.trace.clear()
    pid = sim.publish("P", {"x": 1})
    assert sim.run()
    assert sim.recipients(pid) == Counter({"S": 1, "T": 1})
    walk = [(src, dst) for _, src, dst, m in sim.trace if isinstance(m, ScotDetour)]
    # (a,0) -> (a,1) -> (b,1) -> (c,1) -> (c,0): one iLink out, the parallel aLinks, one back
    assert walk == [("a,0", "a,1"), ("a,1", "b,1"), ("b,1", "c,1"), ("c,1", "c,0")]
    assert sim.lost_at_crashed == Counter()
    assert sim.core("a,0").counters["detoured_publications"] == 1


def test_a_hung_broker_that_resumes_delivers_nothing_twice() -> None:
    sim = three_by_three()
    sim.hang("b,0")
    before = sim.publish("P", {"x": 1})  # handed to b,0 before anyone suspects it
    assert sim.run()  # its copy for S waits at b,0: nothing else is left to do
    assert sim.recipients(before) == Counter({"T": 1})
    sim.detect("b,0")  # b,0 never acknowledged it: a,0 sends it around b,0
    after = sim.publish("P", {"x": 2})
    assert sim.run()
    assert sim.recipients(before) == Counter({"S": 1, "T": 1})
    assert sim.recipients(after) == Counter({"S": 1, "T": 1})
    sim.resume("b,0")  # b,0 handles the old copy after all: c,0 has seen it
    sim.clear("b,0")
    assert sim.run()
    assert sim.recipients(before) == Counter({"S": 1, "T": 1})
    assert sim.core("c,0").counters["suppressed_duplicates"] == 1
    last = sim.publish("P", {"x": 3})
    assert sim.run()
    assert sim.recipients(last) == Counter({"S": 1, "T": 1})
    assert sim.core("a,0").counters["detoured_publications"] == 1  # `after`; `before` was rerouted
    assert sim.core("a,0").counters["rerouted_unacknowledged"] == 1


def test_acknowledged_copies_are_not_sent_again() -> None:
    sim = three_by_three()
    first = sim.publish("P", {"x": 1})
    assert sim.run()
    sim.heartbeat()  # every broker acknowledges what it handled
    sim.crash("b,0")
    sim.detect("b,0")
    assert sim.run()
    assert sim.recipients(first) == Counter({"S": 1, "T": 1})
    assert sim.core("a,0").counters["rerouted_unacknowledged"] == 0


def test_copies_in_flight_to_a_broker_that_crashes_are_sent_around_it() -> None:
    sim = BrokerSim(scot([["a", "b"], ["b", "c"]], 3), protocol="octopia", propagation=0.01)
    sim.attach("P", "a,0")
    sim.attach("S", "c,0")
    sim.advertise("P", "ad", Filter((Predicate("x", "exists", None),)))
    sim.subscribe("S", "s", Filter((Predicate("x", ">", 0),)))
    assert sim.run()
    sim.heartbeat()
    pids = [sim.publish("P", {"x": k}, at=sim.now + 0.001 * k) for k in range(1, 6)]
    sim.run(until=sim.now + 0.012)  # some copies reached b,0, some are still on the wire
    sim.crash("b,0")
    sim.detect("b,0")
    assert sim.run()
    assert [sim.recipients(p)["S"] for p in pids] == [1] * 5
    assert sim.lost_at_crashed["scot_pub"] > 0


def test_a_subscription_made_while_a_broker_is_down_reaches_it_after_its_restart() -> None:
    sim = three_by_three()
    sim.attach("U", "a,0")
    sim.crash("b,0")
    sim.detect("b,0")
    sim.subscribe("U", "u", Filter((Predicate("x", "exists", None),)))  # goes around b,0
    sim.unsubscribe("S", "s")
    assert sim.run()
    assert list(sim.core("c,0").prt_hop.values()) == ["b,0"]  # U's, as from b,0; S's is gone
    sim.restart("b,0")
    assert sim.run()
    held = {core.me: sorted(core.prt_hop.items()) for core in (sim.core("b,0"), sim.core("c,0"))}
    assert [hop for _, hop in held["b,0"]] == ["a,0"], held  # U's, from a,0's side; S's is gone
    assert [hop for _, hop in held["c,0"]] == ["b,0"], held


def test_bad_detours_and_syncs_are_counted_and_dropped() -> None:
    sim = three_by_three()
    core = sim.core("b,1")
    inner = encode_payload(ScotPublish("p", "P", {"x": 1}, 0, 1, "b,0"))  # type: ignore[arg-type]
    cases = [
        (ScotDetour("b,0", "b,2", ["b,0"], 1, inner, "a,1"), "bad_detour_exit"),  # not a neighbour of b,0
        (ScotDetour("b,0", "c,0", ["zz,9"], 1, inner, "a,1"), "bad_detour_avoid"),
        (ScotDetour("b,0", "c,0", ["b,0"], 10**6, inner, "a,1"), "hop_limit"),
        (ScotDetour("b,0", "c,0", ["b,0"], 1, b"\x00junk", "a,1"), "bad_detour_inner"),
        (ScotDetour("b,0", "c,0", ["b,0"], 1, encode_payload(ScotSubscribe("u", Filter(()), "a,0")), "a,1"),
         "bad_detour_inner"),  # the inner sender is not the broker gone around
        (PrtSync(["u1"], [], True, True, "a,1"), "bad_sync"),
        (PrtSync([], [], False, True, "c,1"), "sync_part_out_of_place"),
        (CltSync([], [], [], True, True, "a,1"), "sync_not_from_region"),
        (PrtSync([], [], True, True, "b,0"), "sync_not_from_cluster"),
    ]
    for msg, counter in cases:
        before = core.counters[counter]
        assert core.handle(msg, 0.0) == []
        assert core.counters[counter] == before + 1, counter
