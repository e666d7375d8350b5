"""The broker-network simulator (`broker.sim`): queues, bandwidth, congestion, LST, metrics."""

from __future__ import annotations

from collections import Counter

import pytest

from broker import topologyfile as TF
from broker.cores.language.text import parse_filter as F
from broker.cores.messages import ScotPublish
from broker.sim import BrokerSim
from broker.simrecords import SimError
from pubsub.kernel.wire import encode_payload


def line(**kw: object) -> BrokerSim:
    """P at (a,0), S at (a,1) on the 3x3 SCOT: every publication crosses l<(a,0),(a,1)>."""
    sim = BrokerSim(TF.scot3x3(), **kw)  # type: ignore[arg-type]
    sim.attach("P", "a,0")
    sim.attach("S", "a,1")
    sim.advertise("P", "a", F("k exists"))
    sim.subscribe("S", "s", F("k exists"))
    assert sim.run()
    return sim


def test_fifo_queue_and_bandwidth_give_exact_delays() -> None:
    """20 publications at t = 0 over a 10 msg/s link with 5 ms propagation: the k-th waits for
    k transmissions, so its delay is (k + 1) * 0.1 + 0.005; the queue peaks at 20."""
    sim = line(protocol="octopia")
    start = sim.now
    sim.set_link("a,0", "a,1", bandwidth=10.0, propagation=0.005)
    pids = [sim.publish("P", {"k": k}) for k in range(20)]
    assert sim.run()
    delays = [sim.deliveries[p][0].time - start for p in pids]
    assert delays == pytest.approx([(k + 1) * 0.1 + 0.005 for k in range(20)])
    assert sim.link("a,0", "a,1").max_len == 20
    assert sim.publication_delays() == pytest.approx(delays)


def test_runs_are_deterministic_for_a_seed() -> None:
    def run(seed: int) -> tuple:
        sim = BrokerSim(
            TF.figure7(), protocol="octopia", dynamic=True, seed=seed, bandwidth=200.0,
            propagation=0.001, jitter=0.004, t_w=0.01, tau=2.0,
        )
        for k, b in enumerate(TF.figure7().brokers):
            sim.attach(f"C{k}", b)
            sim.subscribe(f"C{k}", "s", F(f"k >= {k % 3}"))
        sim.advertise("C5", "a", F("k exists"))
        assert sim.run()
        t0 = sim.now
        sim.background_load("b,1", "b,0", rate=600, start=t0, stop=t0 + 0.2)
        for k in range(40):
            sim.publish("C5", {"k": k % 4}, at=t0 + k * 0.005)
        assert sim.run()
        return (
            sorted((p, d.client, d.time) for p, ds in sim.deliveries.items() for d in ds),
            dict(sim.traffic),
            sim.copies_with_civp,
        )

    assert run(7) == run(7)
    a, b = run(7), run(8)
    assert {(p, c) for p, c, _ in a[0]} == {(p, c) for p, c, _ in b[0]}  # same deliveries
    assert [t for *_, t in a[0]] != [t for *_, t in b[0]]  # jitter differs


def test_lst_reports_queue_length_and_window_counts() -> None:
    """Every t_w the sending core's LST row holds Q_l and the window's Q_in / Q_out (Eq. 3)."""
    sim = line(protocol="octopia", dynamic=True, t_w=0.125, tau=10.0)
    sim.set_link("a,0", "a,1", bandwidth=4.0)  # 0.25 s per message
    sim.run(until=1.0)
    for k in range(30):
        sim.publish("P", {"k": k}, at=1.0)
    sim.run(until=1.125)  # the first tick after the burst
    row = sim.cores["a,0"].lst.rows["a,1"]
    assert (row.q_in, row.q_out, row.queue_len) == (30, 0, 30)
    assert row.ce == 31.0
    sim.run(until=1.25)  # one more window: nothing in, the first one out (at 1.25)
    row = sim.cores["a,0"].lst.rows["a,1"]
    assert (row.q_in, row.q_out, row.queue_len) == (0, 1, 29)
    lst = sim.cores["a,0"].lst
    assert lst.overloaded("a,1") and lst.congested_windows("a,1") == 2
    assert sim.run()
    drained = lst.congested_windows("a,1")
    # One send per two windows: a window with a send (CE = 1/2) is congested while Q_l > 20
    # (Q_l 29..21: 9 windows), one without (CE = 1) while Q_l > 10 (29..11: 19), plus the first.
    assert drained == 1 + 9 + 19
    sim.publish("P", {"k": 0})
    assert sim.run()
    assert not lst.overloaded("a,1")
    assert lst.congested_windows("a,1") == drained  # a count of the past, not of the present
    assert lst.snapshot()["a,1"]["congested_windows"] == drained


def test_background_load_congests_a_link_and_is_not_counted_as_traffic() -> None:
    sim = line(protocol="octopia")
    sim.set_link("a,0", "a,1", bandwidth=100.0)
    before = dict(sim.traffic)
    t0 = sim.now
    sim.background_load("a,0", "a,1", rate=200.0, start=t0, stop=t0 + 1.0)
    pid = sim.publish("P", {"k": 1}, at=t0 + 0.5)
    assert sim.run()
    assert sim.background_sent == 200
    assert dict(sim.traffic) == {**before, "scot_pub": before.get("scot_pub", 0) + 1}
    # 100 fillers were queued by 0.5 s and 50 of them sent: the publication waits ~0.5 s
    assert sim.deliveries[pid][0].time - (t0 + 0.5) == pytest.approx(0.51, abs=0.011)
    assert sim.link("a,0", "a,1").max_len >= 50


def test_idr_avoids_a_congested_ilink_that_spr_keeps_using() -> None:
    """A background load on l<(b,3),(b,0)>: SPR queues every publication for C0 behind it,
    IDR (Eq. 3 on the real queue) sends them round it with CIV_p -- same deliveries, each
    once, fewer copies into the loaded queue and smaller delays for C0's subscriber."""
    results = {}
    for dynamic in (False, True):
        topo = TF.figure7()
        sim = BrokerSim(
            topo, protocol="octopia", dynamic=dynamic, bandwidth=500.0, propagation=0.001,
            t_w=0.01, tau=5.0,
        )
        sim.attach("P", "b,3")
        for client, bid in (("S0", "c,0"), ("S1", "c,1"), ("S2", "a,2")):
            sim.attach(client, bid)
            sim.subscribe(client, "s", F("k exists"))
        sim.advertise("P", "a", F("k exists"))
        assert sim.run()
        t0 = sim.now
        out_before = sim.link("b,3", "b,0").total_out
        sim.background_load("b,3", "b,0", rate=1000.0, start=t0, stop=t0 + 0.5)
        pids = [sim.publish("P", {"k": k}, at=t0 + 0.05 + k * 0.004) for k in range(100)]
        assert sim.run()
        for pid in pids:
            assert sim.recipients(pid) == Counter({"S0": 1, "S1": 1, "S2": 1})
            assert max(sim.pub_visits[pid].values()) == 1
        to_c0 = [
            d.time - sim.published[p][0] for p in pids for d in sim.deliveries[p] if d.client == "S0"
        ]
        into_loaded = sim.link("b,3", "b,0").total_out - out_before - sim.background_sent
        results[dynamic] = (sum(to_c0) / len(to_c0), into_loaded, sim.copies_with_civp)
    spr, idr = results[False], results[True]
    assert spr[2] == 0 and idr[2] > 0
    assert idr[1] < spr[1] == 100
    assert idr[0] < spr[0]


def test_operation_spans_traffic_and_table_sizes() -> None:
    topo = TF.scot3x3()
    for protocol in ("octopia", "padres"):
        sim = BrokerSim(topo, protocol=protocol, propagation=0.01)
        sim.attach("P", "a,0")
        sim.attach("S", "c,2")
        sim.advertise("P", "a", F("k exists"))
        sim.run()
        sim.subscribe("S", "s", F("k > 1"))
        sim.run()
        adv, sub = sim.op_stats("advertise")[0], sim.op_stats("subscribe")[0]
        sizes = sim.table_sizes()
        if protocol == "octopia":
            assert adv.messages == 2 and adv.duration == pytest.approx(0.01)
            # broadcast to c,2's cluster (2 aLink hops) plus one CIV_SET from a,2 to a,0
            assert sub.messages == 3 and sub.duration == pytest.approx(0.03)
            assert sum(sizes["clt"].values()) == 3 and sum(sizes["prt"].values()) == 3
            assert sim.traffic_by_op == Counter({"advertise": 2, "subscribe": 3})
        else:
            assert adv.messages == 2 * len(topo.links()) - (len(topo) - 1)
            assert sum(sizes["srt"].values()) == len(topo)
            tid = next(iter(sim.cores["a,0"].local_advs.values()))
            path = ["c,2"]
            while path[-1] != "a,0":
                path.append(sim.cores[path[-1]].srt[tid].last_hop)  # type: ignore[attr-defined]
            assert sub.messages == len(path) - 1  # one message per hop of the reverse path
            assert sum(sizes["prt"].values()) == len(path)
        assert sim.ops[0].kind == "advertise" and sim.ops[1].kind == "subscribe"


def test_sizes_in_bytes_and_service_time() -> None:
    sim = line(protocol="octopia", units="bytes")
    sim.set_link("a,0", "a,1", bandwidth=1000.0)
    t0 = sim.now
    pid = sim.publish("P", {"k": 1})
    assert sim.run()
    probe = ScotPublish(pid, "P", {"k": 1}, 0, 1, "a,0", "a,0")  # type: ignore[arg-type]
    frame = len(encode_payload(probe)) + 4
    assert sim.deliveries[pid][0].time - t0 == pytest.approx(frame / 1000.0)
    slow = line(protocol="octopia", service_time=0.25)
    t0 = slow.now
    pids = [slow.publish("P", {"k": k}) for k in range(3)]
    assert slow.run()
    assert [slow.deliveries[p][0].time - t0 for p in pids] == pytest.approx([0.25, 0.5, 0.75])


def test_queue_samples_and_idle_clock() -> None:
    sim = line(protocol="octopia", record_queues=True, t_w=0.05)
    sim.set_link("a,0", "a,1", bandwidth=20.0)
    for k in range(10):
        sim.publish("P", {"k": k})
    assert sim.run()
    lengths = [s.get(("a,0", "a,1"), 0) for _, s in sim.queue_samples]
    assert max(lengths) >= 8
    peak = lengths.index(max(lengths))
    assert lengths[peak:] == sorted(lengths[peak:], reverse=True)  # draining, nothing new
    times = [t for t, _ in sim.queue_samples]
    assert times == sorted(times)
    assert sim.run(until=sim.now + 5.0)  # idle: the clock just moves
    t = sim.now
    sim.publish("P", {"k": 1})
    assert sim.run() and sim.now >= t


def test_misuse_is_reported() -> None:
    topo = TF.scot3x3()
    with pytest.raises(SimError, match="unknown protocol"):
        BrokerSim(topo, protocol="siena")
    sim = BrokerSim(topo)
    with pytest.raises(SimError, match="no broker"):
        sim.attach("C", "z,0")
    with pytest.raises(SimError, match="not attached"):
        sim.publish("nobody", {"k": 1})
    with pytest.raises(SimError, match="no link"):
        sim.set_link("a,0", "c,0", bandwidth=1.0)
    sim.attach("C", "a,0")
    sim.unsubscribe("C", "never")
    sim.publish("C", {"k": 1})
    sim.publish("C", {})
    assert sim.run()
    codes = [code for _, _, code, _ in sim.refusals]
    assert codes == ["unknown_id", "not_advertised", "bad_publication"]
