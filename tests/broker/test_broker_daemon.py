"""The SCOT broker daemon, its client library and CLI in one process: real runtimes on
127.0.0.1, real TCP, the client library.  (Nine OS processes: tests/broker/test_broker_integration.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from broker.app import BrokerApp
from broker.cli import format_broker_status
from broker.client import BrokerClient, BrokerRefused, Subscription, advertisement_id, to_filter
from broker.cores.control import BrokerHeartbeat
from broker.cores.language.filters import Filter
from broker.cores.messages import Attrs, ClientPublish, PadresPublish, ScotPublish
from broker.cores.topology import Scot, scot
from broker.faults import broker_actions
from broker.links import NeighbourLink
from broker.settings import BrokerSettings, parse_link_rate
from broker.topologyfile import scot3x3
from pubsub.cli.main import main
from pubsub.client.library import ConnectionLost
from pubsub.kernel import wire
from pubsub.kernel.control import ChaosRequest, ErrorReply, Hello
from pubsub.kernel.message import Message, Ref
from pubsub.runtime.admin import Chaos
from pubsub.runtime.adminparams import ChaosError
from pubsub.runtime.net import Runtime
from pubsub.runtime.settings import RuntimeSettings
from pubsub.runtime.stats import Stats
from tests.integration.test_daemons import bound_socket, ref_of, wait_until


def set_link_rate(app: BrokerApp, link: str, rate: float | None) -> dict[str, Any]:
    """The admin action ``link_rate`` applied to `app`, as its admin listener would."""
    assert app.runtime is not None
    chaos = Chaos(app.runtime, role="broker", actions=broker_actions(app))
    return chaos.handle(ChaosRequest(action="link_rate", params={"link": link, "rate": rate})).body


FAST = RuntimeSettings(
    timeout_interval=0.05, reconnect_backoff_min=0.01, reconnect_backoff_max=0.05, flush_timeout=0.2
)
#: The path a-b times K_2: brokers a,0 b,0 (cluster 0) and a,1 b,1 (cluster 1).
PATH2 = scot([["a", "b"]], 2)
ADV = 'symbol = "IBM" and price >= 0'


@contextlib.asynccontextmanager
async def brokers(
    topo: Scot, *, skip: tuple[str, ...] = (), **settings: Any
) -> AsyncIterator[tuple[Scot, dict[str, BrokerApp]]]:
    """Every broker of `topo` (except `skip`, whose address stays unused) on its own runtime."""
    socks = {bid: bound_socket() for bid in topo.brokers}
    topo = topo.with_addresses({bid: ref_of(s) for bid, s in socks.items()})
    apps: dict[str, BrokerApp] = {}
    runtimes: list[Runtime] = []
    try:
        for bid in topo.brokers:
            if bid in skip:
                socks[bid].close()
                continue
            stats = Stats()
            conf = BrokerSettings(broker_topology=Path("in-memory.json"), broker_id=bid, **settings)
            app = BrokerApp(topo, conf, stats, Ref(topo.address(bid)))
            rt = Runtime(app, FAST, stats=stats, sock=socks[bid])
            await rt.start()
            runtimes.append(rt)
            apps[bid] = app
        yield topo, apps
    finally:
        for rt in runtimes:
            await rt.stop()
        for sock in socks.values():
            sock.close()


async def drain(sub: Subscription, quiet: float = 0.3) -> list[dict[str, Any]]:
    """Every delivery until none arrives for `quiet` seconds (only after the network is idle)."""
    out = []
    with contextlib.suppress(TimeoutError):
        while True:
            out.append(dict((await sub.get(quiet)).attrs))
    return out


def idle(apps: dict[str, BrokerApp]) -> Callable[[], Any]:
    async def check() -> bool:
        return all(link.queue_len() == 0 for app in apps.values() for link in app.links.values())

    return check


def first_adv(apps: dict[str, Any], bid: str) -> str:
    """The id broker `bid` gives its first advertisement (its epoch is this start's)."""
    return f"{bid}/{apps[bid].core.epoch}a1"


# --- delivery, ownership, refusals ------------------------------------------------------------------
async def test_publications_reach_exactly_the_matching_subscribers_once() -> None:
    async with brokers(scot3x3()) as (topo, apps):
        addr = topo.address
        pub = BrokerClient(addr("b,0"), client_id="pub1")
        body = await pub.advertise(ADV)
        assert body["id"] == advertisement_id(to_filter(ADV)) and body["uid"] == f"b,0/{apps['b,0'].core.epoch}a1"
        filters = {
            "b,0": 'symbol = "IBM" and price > 100',  # the publisher's own host broker
            "a,0": "price <= 100",
            "c,1": 'symbol = "IBM"',
            "a,2": "price > 150",
            "c,2": 'symbol = "HP"',  # overlaps no advertisement
        }
        clients = {bid: BrokerClient(addr(bid)) for bid in filters}
        subs = {bid: await clients[bid].subscribe(f) for bid, f in filters.items()}
        # Settled: every cluster's PRTs hold its subscriptions, the CIV names clusters 1 and 2.
        await wait_until(
            lambda: _true(apps["b,0"].core.civ(first_adv(apps, "b,0")) == "111"
                          and all(apps[b].core.prt_size == 2 for b in topo.cluster(0))
                          and all(apps[b].core.prt_size == 2 for b in topo.cluster(2))),
            what="subscriptions and CIV bits",
        )
        prices = [50, 100, 101.5, 151, 200]
        for p in prices:
            await pub.publish({"symbol": "IBM", "price": p})
        await wait_until(idle(apps), what="empty queues")
        for bid, sub in subs.items():
            flt = to_filter(filters[bid])
            got = sorted(d["price"] for d in await drain(sub))
            assert got == sorted(p for p in prices if flt.matches({"symbol": "IBM", "price": p})), bid
        delivered = sum(app.counters["deliveries"] for app in apps.values())
        assert delivered == 2 + 3 + 5 + 2 + 0  # one Deliver frame per (subscriber, publication)
        for c in [pub, *clients.values()]:
            await c.close()


async def _true(value: bool) -> bool:
    return value


async def test_refusals_are_answered_and_counted() -> None:
    async with brokers(PATH2) as (topo, apps):
        async with BrokerClient(topo.address("a,0"), client_id="p") as client:
            with pytest.raises(BrokerRefused) as err:
                await client.publish({"symbol": "IBM", "price": 1})
            assert err.value.code == "not_advertised"
            await client.advertise(ADV, "x")
            with pytest.raises(BrokerRefused, match="duplicate_id"):
                await client.advertise(ADV, "x")
            with pytest.raises(BrokerRefused, match="not_advertised"):  # an attribute the adv lacks
                await client.publish({"symbol": "IBM", "price": 1, "volume": 3})
            assert await client.publish({"symbol": "IBM", "price": 1})
            with pytest.raises(BrokerRefused, match="unknown_id.* has no advertisement 'nope' here .ids belong to"):
                await client.unadvertise(adv_id="nope")
            with pytest.raises(BrokerRefused, match="unknown_id"):
                await client.unsubscribe("nope")
            with pytest.raises(BrokerRefused, match="bad_id"):
                await client.subscribe("price > 1", sub_id="")
            await client.unadvertise(adv_id="x")
            with pytest.raises(BrokerRefused, match="not_advertised"):
                await client.publish({"symbol": "IBM", "price": 1})
            status = await client.status()
        bad = BrokerClient(topo.address("a,0"), client_id="~c1")  # reserved for connections
        with pytest.raises(BrokerRefused, match="bad_client"):
            await bad.advertise(ADV)
        await bad.close()
        assert status["refused"] == {"duplicate_id": 1, "not_advertised": 3, "unknown_id": 2, "bad_id": 1}
        assert apps["a,0"].counters["refused_bad_client"] == 1


async def test_advertisements_outlive_the_connection_and_subscriptions_do_not() -> None:
    async with brokers(PATH2) as (topo, apps):
        async with BrokerClient(topo.address("a,0"), client_id="pub") as client:
            await client.advertise(ADV)
        sub_client = BrokerClient(topo.address("b,1"))
        sub = await sub_client.subscribe("price > 10")
        await wait_until(lambda: _true(apps["a,1"].core.prt_size == 1 and apps["a,0"].core.civ(first_adv(apps, "a,0")) == "11"),
                         what="subscription in cluster 1")
        async with BrokerClient(topo.address("a,0"), client_id="pub") as client:  # a new connection
            await client.publish({"symbol": "IBM", "price": 11})
        assert (await sub.get(5.0)).attrs == {"symbol": "IBM", "price": 11}
        await sub_client.close()  # the subscription ends with its connection
        await wait_until(
            lambda: _true(all(apps[b].core.prt_size == 0 for b in topo.cluster(1))
                          and apps["a,0"].core.civ(first_adv(apps, "a,0")) == "01"),
            what="unsubscribe on close and CIV_UNSET",
        )
        assert apps["b,1"].counters["unsubscribed_on_close"] == 1


async def test_peers_cannot_inject_client_operations_or_the_other_protocol() -> None:
    async with brokers(PATH2) as (topo, apps):
        host, port = topo.address("a,0").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        frames: list[Message] = [
            Hello(ref=Ref(topo.address("b,0")), role="peer"),
            ClientPublish("p", "1", Attrs({"price": 1})),
            PadresPublish("1", "p", Attrs({"price": 1}), "t", 0, "b,0"),
            BrokerHeartbeat("z,9"),
            ScotPublish("1", "p", Attrs({"price": 1}), 0, 0, "c,0"),  # not a neighbour
        ]
        writer.write(b"".join(wire.encode(f) for f in frames))
        await writer.drain()
        app = apps["a,0"]
        await wait_until(lambda: _true(app.core.counters["not_a_neighbour"] == 1), what="frames handled")
        assert app.counters["rejected_peer_message"] == 2
        assert app.counters["rejected_peer_message_broker_publish"] == 1
        assert app.counters["heartbeat_from_stranger"] == 1
        writer.close()


# --- links: LST reports, rate limits, congestion, dead neighbours -------------------------------------
class _Sink:
    """A peer that takes every frame and does nothing."""

    def __init__(self, ref: Ref) -> None:
        self.ref = ref
        self.received: list[Message] = []

    def handle(self, msg: Message, now: float) -> list[Any]:
        self.received.append(msg)
        return []

    def timeout(self, now: float) -> list[Any]:
        return []

    def peer_unreachable(self, ref: Ref, now: float) -> list[Any]:
        return []

    def control(self, msg: Message, now: float) -> tuple[Message, list[Any]]:
        return ErrorReply(code="unsupported", detail=msg.kind), []


async def test_neighbour_link_reports_lst_windows_from_the_runtime_queue() -> None:
    """Q_l, Q_in and Q_out of §9.2 come from the runtime's queue of the link (which holds
    the rate limit): what waits now, what entered and what was written in each window."""
    socks = [bound_socket(), bound_socket()]
    a_app, b_app = (_Sink(ref_of(s)) for s in socks)
    a = Runtime(a_app, RuntimeSettings(), stats=Stats(), sock=socks[0])
    b = Runtime(b_app, RuntimeSettings(), stats=Stats(), sock=socks[1])
    await a.start()
    await b.start()
    try:
        link = NeighbourLink("b,1", b.ref, "iLink", a)
        link.set_rate(5.0)
        msgs = [BrokerHeartbeat(str(i)) for i in range(7)]
        for m in msgs:
            a.send(link.ref, m)
        assert link.window() == (7, 7, 0)  # all queued, nothing written yet
        await wait_until(lambda: _true(link.sent >= 2), what="two sends at 5/s")
        assert link.queue_len() >= 3  # the limit holds the rest back
        link.set_rate(None)  # lifting it lets the rest go, in order
        await wait_until(lambda: _true(len(b_app.received) == 7), what="the rest once lifted")
        assert b_app.received == msgs
        assert link.window() == (0, 0, 7)  # none entered since, all 7 written
        assert link.dropped == 0 and link.rate is None
        assert link.snapshot()["sent_by_kind"] == {"broker_heartbeat": 7}
        with pytest.raises(ValueError):
            link.set_rate(0)
    finally:
        await a.stop()
        await b.stop()
        for sock in socks:
            sock.close()


async def test_a_rate_limited_ilink_fills_up_is_congested_and_recovers() -> None:
    async with brokers(PATH2) as (topo, apps):
        pub = BrokerClient(topo.address("a,0"), client_id="pub")
        await pub.advertise(ADV)
        subscriber = BrokerClient(topo.address("a,1"))
        sub = await subscriber.subscribe('symbol = "IBM"')
        await wait_until(lambda: _true(apps["a,0"].core.civ(first_adv(apps, "a,0")) == "11"), what="CIV")
        reply = set_link_rate(apps["a,0"], "a,1", 2)
        assert reply == {"ok": True, "op": "link_rate", "link": "a,1", "rate": 2.0}
        for i in range(30):
            await pub.publish({"symbol": "IBM", "price": i})
        host = apps["a,0"]

        async def congested() -> bool:
            status = await pub.status()
            return status["links"]["a,1"]["congested"] and status["links"]["a,1"]["queue_len"] > 10

        await wait_until(congested, what="the throttled iLink congested (Eq. 3)")
        status = await pub.status()
        assert status["links"]["a,1"]["rate_limit"] == 2.0
        assert status["links"]["a,1"]["congested_windows"] >= 1
        assert "yes" in next(line for line in format_broker_status(status).splitlines() if "a,1" in line and "iLink" in line)
        # Published while the iLink is congested, with one TSC and no other target link:
        # Case III (the extra copy goes into the congested iLink, its bit cleared).
        for i in range(30, 35):
            await pub.publish({"symbol": "IBM", "price": i})
        assert host.core.counters["idr_case_3"] >= 5
        set_link_rate(apps["a,0"], "a,1", None)
        await wait_until(idle(apps), what="queues drained")
        got = [d["price"] for d in await drain(sub)]
        assert sorted(got) == list(range(35))  # nothing lost, nothing twice
        link = (await pub.status())["links"]["a,1"]
        assert not link["congested"] and link["congested_windows"] >= status["links"]["a,1"]["congested_windows"]
        await pub.close()
        await subscriber.close()


async def test_control_requests_are_validated() -> None:
    async with brokers(PATH2) as (topo, apps), BrokerClient(topo.address("a,0")) as client:
        with pytest.raises(ChaosError, match="bad_link"):
            set_link_rate(apps["a,0"], "b,1", 3)  # not a neighbour of a,0
        with pytest.raises(ChaosError, match="bad_rate"):
            set_link_rate(apps["a,0"], "b,0", -1)
        assert (await client.status())["links"]["b,0"]["rate_limit"] is None


async def test_a_client_cannot_change_link_rates() -> None:
    """The link rate is an operator's action (admin listener only): on the client port the
    old control request is refused, counted, and changes nothing."""
    async with brokers(PATH2) as (topo, apps):
        reader, writer = await asyncio.open_connection(*topo.address("a,0").rsplit(":", 1))
        try:
            writer.write(wire.encode(Hello(ref=None, role="client")))
            writer.write(wire.encode(ChaosRequest(action="link_rate", params={"link": "b,0", "rate": 0.01})))
            await writer.drain()
            header = await asyncio.wait_for(reader.readexactly(wire.HEADER_SIZE), 5)
            reply = wire.decode(await reader.readexactly(wire.frame_length(header)))
        finally:
            writer.close()
        assert isinstance(reply, ErrorReply) and reply.code == "forbidden"
        assert apps["a,0"].links["b,0"].rate is None
        assert apps["a,0"].stats.errors["forbidden"] >= 1


async def test_a_missing_neighbour_is_reported_unreachable() -> None:
    async with (
        brokers(PATH2, skip=("b,0",), broker_heartbeat=0.05) as (topo, apps),
        BrokerClient(topo.address("a,0")) as client,
    ):

        async def reported() -> bool:
            status = await client.status()
            return status["unreachable"] == ["b,0"] and status["links"]["b,0"]["state"] == "unreachable"

        await wait_until(reported, what="b,0 reported unreachable")
        status = await client.status()
        assert status["links"]["a,1"]["state"] == "up"
        assert status["daemon_counters"]["neighbour_unreachable_reports"] >= 1


async def test_a_subscriber_sees_its_broker_go_away() -> None:
    async with brokers(PATH2) as (topo, apps):
        client = BrokerClient(topo.address("b,1"))
        sub = await client.subscribe("price > 1")
    with pytest.raises(ConnectionLost):  # the broker stopped: the stream ends with an error
        await sub.get(5.0)
    await client.close()


async def test_status_reports_tables_links_and_message_counts() -> None:
    async with brokers(PATH2, broker_protocol="padres") as (topo, apps):
        async with BrokerClient(topo.address("a,0"), client_id="p") as client:
            await client.advertise(ADV)
            await wait_until(lambda: _true(all(a.core.srt_size == 1 for a in apps.values())), what="flooding")
            status = await client.status()
        assert status["protocol"] == "padres" and status["settings"]["routing"] == "tid-s"
        assert status["tables"] == {"clt": None, "srt": 1, "prt": 0}
        assert set(status["links"]) == {"b,0", "a,1"}
        for link in status["links"].values():
            assert {"queue_len", "congested", "state", "rate_limit", "sent", "dropped", "window"} <= set(link)
        assert status["messages"]["out"]["padres_adv"] == 2
        assert status["clients"]["advertisements"] == 1
        text = format_broker_status(status)
        assert "SRT 1" in text and "padres/tid-s" in text


def test_parse_link_rate() -> None:
    assert parse_link_rate("b,1=2.5") == ("b,1", 2.5)
    for bad in ("b,1", "b=1", "b,1=x", "b,1=0", "b,1=-3", "b,1=inf"):
        with pytest.raises(ValueError):
            parse_link_rate(bad)


# --- the command line --------------------------------------------------------------------------------
def _topology_file(tmp_path: Path, addresses: bool = True, **extra: Any) -> Path:
    body: dict[str, Any] = {"factor": [["a", "b"]], "m": 2, **extra}
    if addresses:
        body["addresses"] = {f"{x},{i}": f"127.0.0.1:{7000 + 2 * n + i}" for n, x in enumerate("ab") for i in range(2)}
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(body))
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--id", "a,0"], "broker_topology (--topology / PUBSUB_BROKER_TOPOLOGY): required"),
        (["TOPO", "--id", "x,0"], "x,0 is not a broker of"),
        (["TOPO", "--id", "a0"], "broker_id (--id / PUBSUB_BROKER_ID)"),
        (["TOPO", "--id", "a,0", "--listen", "127.0.0.1:1"], "differs from the address of a,0"),
        (["TOPO", "--id", "a,0", "--link-rate", "b,1=3"], "b,1 is not a neighbour of a,0"),
        (["TOPO", "--id", "a,0", "--link-rate", "b,0"], "is not LINK=RATE"),
        (["TOPO", "--id", "a,0", "--tau", "-1"], "broker_tau (--tau / PUBSUB_BROKER_TAU)"),
        (["TOPO", "--id", "a,0", "--tw", "0"], "broker_tw (--tw / PUBSUB_BROKER_TW)"),
    ],
)
def test_broker_command_rejects_bad_configuration(tmp_path: Path, args: list[str], expected: str) -> None:
    topology = ["--topology", str(_topology_file(tmp_path))]
    full = ["broker", *[part for a in args for part in (topology if a == "TOPO" else [a])]]
    result = CliRunner().invoke(main, full)
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output


def test_broker_command_rejects_bad_topology_files(tmp_path: Path) -> None:
    runner = CliRunner()
    no_addresses = _topology_file(tmp_path, addresses=False)
    result = runner.invoke(main, ["broker", "--topology", str(no_addresses), "--id", "a,0"])
    assert result.exit_code == 2 and 'has no "addresses" map' in result.output
    cyclic = tmp_path / "cyclic.json"
    cyclic.write_text(json.dumps({"factor": [["a", "b"], ["b", "c"], ["c", "a"]], "m": 1}))
    result = runner.invoke(main, ["broker", "--topology", str(cyclic), "--id", "a,0"])
    assert result.exit_code == 2 and "not acyclic" in result.output
    result = runner.invoke(main, ["broker", "--topology", str(tmp_path / "missing.json"), "--id", "a,0"])
    assert result.exit_code == 2 and "cannot read topology file" in result.output


def test_broker_command_reports_a_port_in_use(tmp_path: Path) -> None:
    taken = bound_socket()
    taken.listen()
    try:
        port = taken.getsockname()[1]
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"factor": [], "vertices": ["a"], "m": 1, "addresses": {"a,0": f"127.0.0.1:{port}"}}))
        result = CliRunner().invoke(main, ["broker", "--topology", str(path), "--id", "a,0"])
    finally:
        taken.close()
    assert result.exit_code == 1, result.output
    assert f"broker a,0 cannot listen on 127.0.0.1:{port}: address already in use" in result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["subscribe", "--filter", "price > 1"], "--filter belongs to broker mode"),
        (["subscribe", "news", "--broker", "127.0.0.1:1", "--filter", "price > 1"], "TOPIC is not used with --broker"),
        (["subscribe", "--broker", "127.0.0.1:1", "--since", "3", "--filter", "p > 1"], "--since is not used"),
        (["subscribe", "--broker", "127.0.0.1:1"], "broker mode needs --filter"),
        (["subscribe", "--broker", "127.0.0.1:1", "--filter", "price >"], "expected a value after price >"),
        (["subscribe", "--node", "127.0.0.1:1"], "Missing argument 'TOPIC'"),
        (["subscribe", "news"], "Missing option '--node'"),
        (["publish", "--attrs", "price=1"], "--attrs belongs to broker mode"),
        (["publish", "news", "--node", "127.0.0.1:1", "--client", "x"], "--client belongs to broker mode"),
        (["publish", "--broker", "127.0.0.1:1", "--attrs", "price"], "expected '=' after price"),
        (["publish", "news", "hi", "--broker", "127.0.0.1:1"], "TOPIC is not used with --broker"),
        (["publish", "--broker", "127.0.0.1:1", "--node", "127.0.0.1:2"], "--node is not used with --broker"),
        (["status", "--broker", "127.0.0.1:1", "--node", "127.0.0.1:2"], "exactly one of --supervisor, --node and --broker"),
        (["status"], "exactly one of --supervisor, --node and --broker"),
        (["unadvertise", "--broker", "127.0.0.1:1"], "exactly one of --id and --filter"),
        (["advertise", "--broker", "127.0.0.1:1", "--filter", "symbol = IBM"], "strings are double-quoted"),
        (["link-rate", "--admin", "127.0.0.1:1", "b,1=fast"], "is not a number"),
    ],
)
def test_mixed_or_missing_options_are_usage_errors(args: list[str], expected: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert expected in result.output


def test_broker_commands_against_nothing_fail_fast_with_one_line() -> None:
    sock = bound_socket()
    addr = ref_of(sock)
    sock.close()  # nobody listens there
    runner = CliRunner()
    for args in (
        ["status", "--broker", addr],
        ["advertise", "--broker", addr, "--filter", "price > 1"],
        ["publish", "--broker", addr, "--attrs", "price=1"],
        ["subscribe", "--broker", addr, "--filter", "price > 1"],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 1, (args, result.output)
        assert f"cannot reach {addr}: connection refused" in result.output
        assert "Traceback" not in result.output


def test_help_describes_broker_mode() -> None:
    runner = CliRunner()
    for command, words in (
        ("subscribe", ["--broker", "--filter", "Broker mode"]),
        ("publish", ["--broker", "--attrs", "--client"]),
        ("status", ["--broker", "CLT/SRT/PRT"]),
        ("broker", ["--topology", "--id", "--listen", "--protocol", "--tau", "--tw", "--link-rate"]),
        ("advertise", ["--filter", "--client"]),
    ):
        out = runner.invoke(main, [command, "--help"]).output
        for word in words:
            assert word in out, (command, word)


def test_broker_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PUBSUB_BROKER_LINK_RATES", '{"b,0": 4}')
    monkeypatch.setenv("PUBSUB_BROKER_TAU", "3")
    conf = BrokerSettings(broker_topology=tmp_path / "t.json", broker_id="a,0")
    assert conf.broker_link_rates == {"b,0": 4.0} and conf.broker_tau == 3.0
    monkeypatch.setenv("PUBSUB_BROKER_LINK_RATES", '{"b,0": 0}')
    result = CliRunner().invoke(main, ["broker", "--topology", str(_topology_file(tmp_path)), "--id", "a,0"])
    assert result.exit_code == 2 and "broker_link_rates" in result.output
    monkeypatch.setenv("PUBSUB_BROKER_LINK_RATES", "not json")  # one line, not a traceback
    result = CliRunner().invoke(main, ["broker", "--topology", str(_topology_file(tmp_path)), "--id", "a,0"])
    assert result.exit_code == 2, result.output
    assert "PUBSUB_BROKER_LINK_RATES in the environment: not valid JSON" in result.output


def test_filter_helpers() -> None:
    assert to_filter('symbol = "IBM"') == Filter.from_wire([["symbol", "=", "IBM"]])
    assert advertisement_id(to_filter("a > 1 and b = 2")) == advertisement_id(to_filter("b = 2 and a > 1"))
