"""Integration: a 3x3 SCOT (path a-b-c times K_3) of nine broker processes on 127.0.0.1.

A scenario module (tests/conftest.py keeps it on one worker, in file order): the steps share
one OctopiA/IDR SCOT (`broker.localscot.LocalScot`).  Clients go through the command line
(`python -m pubsub.cli.main advertise / subscribe --broker / publish --broker / status --broker /
link-rate`) and, for timed bursts, the client library.  Subscribers are long-running
``pubsub subscribe --broker ... --json`` processes whose output is collected line by line.

1. static delivery: every subscriber receives exactly the matching publications, once;
2. the brokers' Prometheus endpoints, scraped during the run, count the publications routed
   and delivered;
3. one iLink throttled (``pubsub link-rate`` at the host broker's admin listener) until it is
   congested (Eq. 3), then a burst:
   IDR sends the congested cluster's copies around it (Case I, through another cluster),
   and after the limit is lifted every publication is delivered exactly once;
4. ``kill -9`` of one broker: its subscriber's command fails, the CLI against it fails fast,
   its neighbours report it unreachable, publications still arrive everywhere else, and
   nothing is sent towards it (its own subscriber's matches are counted as undeliverable).

5. ``pubsub chaos crash`` through another broker's admin listener kills it.

A last test runs the PADRES-style baseline on its own 3x3 SCOT.  Every wait is bounded;
every process is stopped in ``finally`` / fixture teardown.
"""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.client import BrokerClient
from broker.clisubscriber import CliSubscriber
from broker.cores.language.text import parse_filter
from broker.localscot import LocalScot
from broker.telemetry import KINDS
from broker.topologyfile import scot3x3
from pubsub.ops.processes import ClusterError, poll
from pubsub.telemetry.metrics import samples

pytestmark = pytest.mark.integration

PUBLISHER = "pub1"
HOST_BROKER = "b,0"
ADV = 'symbol = "IBM" and price >= 0 and seq >= 0'
#: Subscriber name -> (host broker, filter).  a,1 is the broker killed in step 3.
SUBSCRIBERS = {
    "S_a0": ("a,0", 'symbol = "IBM" and price > 100'),
    "S_c0": ("c,0", 'symbol = "HP"'),  # overlaps no advertisement: never receives anything
    "S_c1": ("c,1", 'symbol = "IBM"'),
    "S_a1": ("a,1", 'symbol = "IBM" and price > 180'),
    "S_a2": ("a,2", "price <= 100"),
    "S_b2": ("b,2", "price > 150"),
}
WAIT = 30.0


def publication(seq: int) -> dict[str, Any]:
    return {"symbol": "IBM", "price": 40 + 5 * (seq % 30), "seq": seq}


def expected(sub: CliSubscriber, seqs: list[int]) -> Counter[int]:
    return Counter(s for s in seqs if sub.filter.matches(publication(s)))


class State:
    scot: LocalScot
    subs: dict[str, CliSubscriber]
    published: list[int]


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[State]:
    st = State()
    st.scot = LocalScot(
        tmp_path_factory.mktemp("scot"), scot3x3(), protocol="octopia", routing="idr", metrics=True, admin=True
    )
    st.subs = {}
    st.published = []
    try:
        st.scot.start()
        yield st
    finally:
        for sub in st.subs.values():
            sub.stop()
        st.scot.stop()


def wait_deliveries(st: State, names: list[str]) -> None:
    """Until every named subscriber printed at least what it must receive (bounded)."""

    def problems() -> list[str]:
        out = []
        for name in names:
            sub = st.subs[name]
            missing = expected(sub, st.published) - sub.seqs()
            if missing:
                out.append(f"{name} at {sub.bid} misses seqs {sorted(missing)[:10]}")
        return out

    poll(problems, WAIT, "deliveries")


def wait_idle(st: State) -> None:
    """Until no running broker has anything queued on any link."""

    def problems() -> list[str]:
        return [
            f"{bid} -> {link}: {entry['queue_len']} queued"
            for bid, body in st.scot.broker_statuses().items()
            for link, entry in body["links"].items()
            if entry["queue_len"]
        ]

    poll(problems, WAIT, "empty output queues")


def assert_exactly_once(st: State, names: list[str]) -> None:
    for name in names:
        sub = st.subs[name]
        assert sub.seqs() == expected(sub, st.published), name


def publish_cli(st: State, seqs: list[int]) -> None:
    lines = "".join(json.dumps(publication(s)) + "\n" for s in seqs)
    out = st.scot.cli("publish", "--broker", st.scot.address(HOST_BROKER), "--client", PUBLISHER, "--quiet",
                      stdin=lines)
    assert f"published {len(seqs)} through" in out
    st.published += seqs


def test_subscribers_receive_exactly_the_matching_publications(state: State) -> None:
    scot = state.scot
    out = scot.cli("advertise", "--broker", scot.address(HOST_BROKER), "--client", PUBLISHER, "--filter", ADV)
    assert "advertised a-" in out and f"for client {PUBLISHER} at broker {HOST_BROKER}" in out
    for name, (bid, flt) in SUBSCRIBERS.items():
        state.subs[name] = CliSubscriber(scot, bid, flt)
    poll(lambda: [n for n, s in state.subs.items() if not s.started], WAIT, "subscribers started")

    def settled() -> list[str]:
        bodies = scot.broker_statuses()
        wrong = [f"{bid}: PRT {b['prt_size']}" for bid, b in bodies.items() if b["prt_size"] != 2]
        host = bodies[HOST_BROKER]["clt"]
        if [e["civ"] for e in host] != ["111"]:  # both other clusters hold overlapping subscriptions
            wrong.append(f"host CLT {host}")
        wrong += [f"{bid}: CLT {bodies[bid]['clt_size']}" for bid in ("b,1", "b,2") if bodies[bid]["clt_size"] != 1]
        return wrong

    poll(settled, WAIT, "subscriptions and the advertisement's CIV")
    publish_cli(state, list(range(30)))
    names = list(SUBSCRIBERS)
    wait_deliveries(state, names)
    wait_idle(state)
    assert_exactly_once(state, names)
    assert state.subs["S_c1"].seqs() == Counter(range(30))  # the unconstrained one: all of them
    assert not state.subs["S_c0"].seqs()
    bodies = scot.broker_statuses()
    # One Deliver frame per (subscriber, matching publication), network-wide: no duplicates.
    assert sum(b["daemon_counters"].get("deliveries", 0) for b in bodies.values()) == sum(
        sum(expected(s, state.published).values()) for s in state.subs.values()
    )


def scrape(scot: LocalScot, bid: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """One real scrape of a broker's Prometheus endpoint: (name, labels) -> value."""
    with urllib.request.urlopen(scot.metrics_url(bid), timeout=5) as reply:
        text = reply.read().decode()
    return {(name, tuple(sorted(labels.items()))): value for name, labels, value in samples(text)}


def test_broker_metrics_show_publications_routed_and_delivered(state: State) -> None:
    """Scraped during the run: the publisher's broker counts the copies it routed, a
    subscriber's broker the deliveries it made; both move with new publications."""
    scot = state.scot
    routed = ("pubsub_broker_publications_routed_total", ())
    delivered = ("pubsub_broker_publications_delivered_total", ())
    before_host, before_sub = scrape(scot, HOST_BROKER), scrape(scot, "c,1")
    assert ("pubsub_daemon_info", (("ref", scot.address(HOST_BROKER)), ("role", "broker"))) in before_host
    assert ("pubsub_broker_table_entries", (("table", "prt"),)) in before_host
    assert ("pubsub_broker_link_queue", (("link", "b,1"),)) in before_host
    # every message type of the brokers has a sample (the PADRES ones 0 here), no skip ring one;
    # the admin listener's codes too
    types = {dict(labels)["type"] for name, labels in before_host if name == "pubsub_messages_received_total"}
    assert types == set(KINDS), sorted(types ^ set(KINDS))
    assert before_host[("pubsub_received_bytes_total", (("type", "padres_pub"),))] == 0.0
    assert before_host[("pubsub_frame_errors_total", (("code", "admin_bad_link"),))] == 0.0
    seqs = list(range(len(state.published), len(state.published) + 10))
    publish_cli(state, seqs)
    wait_deliveries(state, list(SUBSCRIBERS))

    def moved() -> list[str]:
        host, sub = scrape(scot, HOST_BROKER), scrape(scot, "c,1")
        out = []
        if host[routed] < before_host[routed] + 10:
            out.append(f"routed at the host: {before_host[routed]} -> {host[routed]}")
        if sub[delivered] < before_sub[delivered] + 10:  # S_c1 takes every IBM publication
            out.append(f"delivered at c,1: {before_sub[delivered]} -> {sub[delivered]}")
        return out

    poll(moved, WAIT, "routed and delivered counters")
    assert_exactly_once(state, list(SUBSCRIBERS))


def test_congested_ilink_is_routed_around_and_nothing_is_lost(state: State) -> None:
    scot = state.scot
    host = scot.address(HOST_BROKER)
    # Frames dropped before this test (a neighbour that did not listen yet while nine
    # brokers started on a loaded machine is given up after three connects, with the
    # heartbeats queued for it): this test must add none.
    dropped_before = sum(b["dropped"]["queue_full"] for b in scot.broker_statuses().values())
    out = scot.cli("link-rate", "--admin", scot.admin_ref(HOST_BROKER), "b,1=2")
    assert "link to b,1: 2 messages/s" in out

    async def burst(seqs: list[int], paced: bool) -> None:
        async with BrokerClient(host, client_id=PUBLISHER) as client:
            if not paced:  # all at once: they reach the queue within one t_w window
                await asyncio.gather(*(client.publish(publication(s)) for s in seqs))
            for s in seqs if paced else ():
                await client.publish(publication(s))
                await asyncio.sleep(0.02)

    first, second = list(range(100, 130)), list(range(130, 150))
    windows_before = scot.broker_status(HOST_BROKER)["links"]["b,1"]["congested_windows"]
    asyncio.run(burst(first, paced=False))  # the copies to C_1 wait in the 2/s queue
    state.published += first

    # The congestion may last a single t_w window: once Eq. 3 holds, IDR sends the rest of
    # the burst round the link and its queue can fall below tau again.  The count of
    # congested windows keeps that window visible to a poll that is slower than t_w.
    def congested() -> list[str]:
        link = scot.broker_status(HOST_BROKER)["links"]["b,1"]
        return [] if link["congested_windows"] > windows_before else [f"b,0 -> b,1 not congested: {link}"]

    poll(congested, WAIT, "the throttled iLink b,0 -> b,1 congested by Eq. 3")
    windows_metric = ("pubsub_broker_link_congested_windows_total", (("link", "b,1"),))
    assert scrape(scot, HOST_BROKER)[windows_metric] > windows_before
    asyncio.run(burst(second, paced=True))
    state.published += second

    # Case I: C_1's bit rode on the copy to C_2, whose broker b,2 forwarded it on its own iLink.
    def routed_around() -> list[str]:
        out = []
        if scot.broker_status(HOST_BROKER)["idr"]["case_1"] == 0:
            out.append("no IDR case I at the host")
        if scot.broker_status("b,2")["links"]["b,1"]["sent_by_kind"].get("scot_pub", 0) == 0:
            out.append("no publication from b,2 to b,1")
        return out

    poll(routed_around, WAIT, "copies for C_1 routed round the congested iLink through b,2")
    body = scot.broker_status(HOST_BROKER)
    text = scot.cli("status", "--broker", host)
    ilink_row = next(line for line in text.splitlines() if line.strip().startswith("b,1") and "iLink" in line)
    assert body["links"]["b,1"]["rate_limit"] == 2.0 and "2/s" in ilink_row
    assert "IDR: case I" in text
    scot.cli("link-rate", "--admin", scot.admin_ref(HOST_BROKER), "b,1=off")
    names = list(SUBSCRIBERS)
    wait_deliveries(state, names)
    wait_idle(state)
    assert_exactly_once(state, names)
    bodies = scot.broker_statuses()
    assert sum(b["daemon_counters"].get("deliveries", 0) for b in bodies.values()) == sum(
        sum(expected(s, state.published).values()) for s in state.subs.values()
    )
    assert bodies[HOST_BROKER]["links"]["b,1"]["rate_limit"] is None
    assert sum(b["dropped"]["queue_full"] for b in bodies.values()) == dropped_before


def test_a_killed_broker_is_reported_and_the_rest_keeps_working(state: State) -> None:
    scot = state.scot
    dead = "a,1"
    victim = state.subs.pop("S_a1")
    try:
        scot.kill_broker(dead)  # kill -9
        # Its subscriber's command retries for --retry-for (2 s), then ends with a clear error.
        victim.proc.wait(timeout=WAIT)
        assert victim.proc.returncode == 1
        poll(lambda: [] if any("closed the connection; reconnecting" in e for e in victim.errors)
             and any("gave up after 2 s" in e for e in victim.errors) else victim.errors,
             5, "the subscriber's messages")
    finally:
        victim.stop()
    address = scot.address(dead)
    for args in (["status", "--broker", address], ["publish", "--broker", address, "--attrs", "seq=1"]):
        with pytest.raises(ClusterError, match=f"cannot reach {address}: connection refused"):
            scot.cli(*args, timeout=WAIT)

    def reported() -> list[str]:
        out = []
        for bid in ("a,0", "a,2", "b,1"):  # its iLink and aLink neighbours
            body = scot.broker_status(bid)
            if body["unreachable"] != [dead] or body["links"][dead]["state"] != "unreachable":
                out.append(f"{bid}: unreachable {body['unreachable']}, {dead} {body['links'][dead]['state']}")
        return out

    poll(reported, WAIT, f"the neighbours of {dead} reporting it unreachable")
    def towards_dead() -> int:
        return int(scot.broker_status("b,1")["links"][dead]["sent_by_kind"].get("scot_pub", 0))

    before = towards_dead()
    publish_cli(state, list(range(200, 230)))  # seq 229 (price 185) also matches the dead S_a1
    names = list(state.subs)
    wait_deliveries(state, names)
    wait_idle(state)
    assert_exactly_once(state, names)
    # b,1 suspects a,1 (its connects are refused) and sends nothing towards it: the match of
    # S_a1, a subscriber of the dead broker itself, is counted as undeliverable (so are those
    # of the copies a,1 had not acknowledged when it died, sent around it again).
    assert towards_dead() == before
    assert scot.broker_status("b,1")["counters"]["undeliverable_subscriber_at_suspect"] >= 1


def test_chaos_crash_kills_a_broker(state: State) -> None:
    """`pubsub chaos crash` through a broker's admin listener: the process dies at once."""
    scot = state.scot
    victim = "c,2"
    pid = scot.daemon(victim).pid
    out = scot.cli("chaos", "crash", "--admin", scot.admin_ref(victim), "--json")
    answer = json.loads(out)["results"][0]
    assert answer["pid"] == pid and answer["role"] == "broker" and answer["action"] == "crash"
    scot.wait_exited(victim)
    assert not scot.daemon(victim).running
    assert scot.daemon(victim).process is None or scot.daemon(victim).process.returncode == -signal.SIGKILL


def test_padres_baseline_on_nine_processes(tmp_path: Path) -> None:
    """The baseline on the same graph, through the client library (the CLI paths are the
    ones exercised above): exactly the matching publications, once."""
    scot = LocalScot(tmp_path / "padres", scot3x3(), protocol="padres")
    filters = {"a,0": "price > 100", "c,1": 'symbol = "IBM"', "c,2": "price <= 60"}
    seqs = list(range(20))

    async def scenario() -> dict[str, list[int]]:
        publisher = BrokerClient(scot.address(HOST_BROKER), client_id=PUBLISHER)
        clients = {bid: BrokerClient(scot.address(bid)) for bid in filters}
        try:
            await publisher.advertise(ADV)
            subs = {bid: await clients[bid].subscribe(flt) for bid, flt in filters.items()}
            # PADRES: every subscription travels up the advertisement tree to the host broker.
            for _ in range(int(WAIT / 0.05)):
                if (await publisher.status())["prt_size"] == len(filters):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"the subscriptions did not reach {HOST_BROKER} within {WAIT} s")
            for s in seqs:
                await publisher.publish(publication(s))
            got: dict[str, list[int]] = {}
            for bid, sub in subs.items():
                want = sum(1 for s in seqs if sub.filter.matches(publication(s)))
                got[bid] = [int((await sub.get(WAIT)).attrs["seq"]) for _ in range(want)]
            return got
        finally:
            for client in [publisher, *clients.values()]:
                await client.close()

    try:
        scot.start()
        got = asyncio.run(scenario())
        poll(lambda: [b for b, body in scot.broker_statuses().items()
                      if any(link["queue_len"] for link in body["links"].values())], WAIT, "idle links")
        for bid, flt in filters.items():
            assert Counter(got[bid]) == Counter(s for s in seqs if parse_filter(flt).matches(publication(s)))
        bodies = scot.broker_statuses()
        deliveries = sum(b["daemon_counters"].get("deliveries", 0) for b in bodies.values())
        assert deliveries == sum(len(v) for v in got.values())  # nothing delivered twice
        assert all(b["srt_size"] == 1 for b in bodies.values())  # the advertisement flooded everywhere
    finally:
        scot.stop()
