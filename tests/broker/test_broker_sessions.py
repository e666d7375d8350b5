"""Client sessions and the broker's kept state (issue 46 items 4 and 5): `broker.durable`,
`broker.sessions`, `broker.clientstate`, `broker.resilient`.

In one process over real TCP (the `brokers` helper of test_broker_daemon): a session's
subscription outlives its connection; a resume after delivery k hands over every later one
in order and none twice; a session that kept fewer than were missed says how many in a gap
notice; an expired session is unsubscribed; a resuming subscription reconnects by itself.
The state file: written atomically, read back, and refused in one line when it is corrupt or
another broker's (the daemon exits 2 on it, shown through the CLI).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from broker import clientstate
from broker.client import BrokerClient, BrokerRefused
from broker.clientstate import ClientState, StateError
from broker.cores.language.text import parse_filter
from broker.cores.messages import Deliver, DeliveryGap
from broker.durable import DurableSession
from broker.resilient import ResumingSubscription
from pubsub.cli.main import main
from tests.broker.test_broker_daemon import ADV, PATH2, brokers
from tests.integration.test_daemons import wait_until


async def until(check: Callable[[], bool], what: str) -> None:
    """Wait (bounded) until `check()` holds."""
    async def holds() -> bool:
        return check()

    await wait_until(holds, what=what)

SUB = "symbol = \"IBM\""


def quote(seq: int) -> dict[str, object]:
    return {"symbol": "IBM", "price": seq}


async def publisher(addr: str) -> BrokerClient:
    pub = BrokerClient(addr, client_id="feed")
    await pub.connect()
    await pub.advertise(ADV)
    return pub


# --- the session record ---------------------------------------------------------------------------
def test_a_session_hands_over_what_it_kept_after_a_number_and_counts_the_rest() -> None:
    ds = DurableSession("t" * 32, "~s1", keep=3)
    for k in range(1, 6):
        numbered = ds.record(Deliver("~s1", f"p{k}", "feed", {"k": k}, ["s1"]))  # type: ignore[arg-type]
        assert numbered.seq == k
    assert [d.seq for d in ds.kept] == [3, 4, 5]
    assert ds.after(4) == (0, [ds.kept[2]])
    missed, replay = ds.after(0)
    assert missed == 2 and [d.seq for d in replay] == [3, 4, 5]
    assert ds.after(5) == (0, [])
    assert ds.after(99) == (0, [])  # a number from the future is taken as the last one


# --- sessions over TCP ----------------------------------------------------------------------------------
async def test_a_resumed_session_gets_what_was_delivered_meanwhile_in_order_once() -> None:
    async with brokers(PATH2) as (topo, apps):
        pub = await publisher(topo.address("a,0"))
        first = BrokerClient(topo.address("b,0"))
        body = await first.open_session()
        assert body["resumed"] is False and body["reason"] == "new"
        token = body["session"]
        sub = await first.subscribe(SUB, "s1")
        await until(lambda: apps["a,0"].core.prt_size == 1, what="the subscription at a,0")
        for k in range(3):
            await pub.publish(quote(k))
        got = [await sub.get(5) for _ in range(3)]
        assert [d.seq for d in got] == [1, 2, 3]
        await first.close()  # the connection drops; the session waits
        await until(lambda: apps["b,0"].client_counts()["sessions_waiting"] == 1, what="a waiting session")
        for k in range(3, 8):
            await pub.publish(quote(k))
        await until(lambda: apps["b,0"].counters["deliveries_kept_for_session"] == 5, what="kept deliveries")
        second = BrokerClient(topo.address("b,0"))
        again = second.adopt(SUB, "s1")  # before the resume: the hand-over follows the answer
        body = await second.open_session(token, after=2)  # the client saw only 1 and 2
        assert body["resumed"] is True and body["missed"] == 0 and body["replayed"] == 6
        assert body["subscriptions"] == ["s1"]
        replayed = [await again.get(5) for _ in range(6)]
        assert [d.seq for d in replayed] == [3, 4, 5, 6, 7, 8]
        assert [d.attrs["price"] for d in replayed] == [2, 3, 4, 5, 6, 7]
        await pub.publish(quote(8))
        assert (await again.get(5)).seq == 9
        await second.close()
        await pub.close()


async def test_a_session_that_kept_less_than_was_missed_sends_a_gap_notice() -> None:
    async with brokers(PATH2, broker_session_keep=2) as (topo, apps):
        pub = await publisher(topo.address("a,0"))
        client = BrokerClient(topo.address("b,0"))
        token = (await client.open_session())["session"]
        await client.subscribe(SUB, "s1")
        await until(lambda: apps["a,0"].core.prt_size == 1, what="the subscription at a,0")
        await client.close()
        await until(lambda: apps["b,0"].client_counts()["sessions_waiting"] == 1, what="a waiting session")
        for k in range(5):
            await pub.publish(quote(k))
        await until(lambda: apps["b,0"].counters["deliveries_kept_for_session"] == 5, what="kept deliveries")
        back = BrokerClient(topo.address("b,0"))
        sub = back.adopt(SUB, "s1")
        body = await back.open_session(token, after=0)
        assert body["missed"] == 3 and body["replayed"] == 2
        gap = await sub.next_event()
        assert isinstance(gap, DeliveryGap) and gap.missed == 3 and gap.reason == "overflow"
        assert [(await sub.get(5)).seq for _ in range(2)] == [4, 5]
        await back.close()
        await pub.close()


async def test_an_expired_session_is_unsubscribed_and_a_resume_opens_a_new_one() -> None:
    async with brokers(PATH2, broker_session_expiry=0.3) as (topo, apps):
        client = BrokerClient(topo.address("b,0"))
        token = (await client.open_session())["session"]
        await client.subscribe(SUB, "s1")
        await until(lambda: apps["a,0"].core.prt_size == 1, what="the subscription at a,0")
        await client.close()
        await until(lambda: apps["a,0"].core.prt_size == 0, what="the expired session's subscription gone")
        assert apps["b,0"].counters["sessions_expired"] == 1
        back = BrokerClient(topo.address("b,0"))
        body = await back.open_session(token, after=3)
        assert body["resumed"] is False and body["reason"] == "unknown" and body["session"] != token
        await back.close()


async def test_bad_session_requests_are_refused_with_a_reason() -> None:
    async with brokers(PATH2) as (topo, apps):
        client = BrokerClient(topo.address("b,0"))
        with pytest.raises(BrokerRefused, match="bad_session: a session token is 32 hex digits"):
            await client.open_session("not-a-token")
        await client.subscribe(SUB, "s1")
        with pytest.raises(BrokerRefused, match="open the session before subscribing"):
            await client.open_session()
        await client.close()
        assert apps["b,0"].counters["refused_bad_session"] == 2


async def test_a_resuming_subscription_reconnects_by_itself_and_misses_nothing() -> None:
    async with brokers(PATH2) as (topo, apps):
        pub = await publisher(topo.address("a,0"))
        changes: list[str] = []
        sub = ResumingSubscription([topo.address("b,0")], SUB, retry_for=10, on_change=changes.append)
        events = sub.events()
        first_event = asyncio.ensure_future(events.__anext__())  # subscribes, then waits
        await until(lambda: apps["a,0"].core.prt_size == 1, what="the subscription at a,0")
        await pub.publish(quote(0))
        assert isinstance(await first_event, Deliver)
        assert sub._client is not None and sub._client._writer is not None
        sub._client._writer.transport.abort()  # the connection breaks
        await until(lambda: apps["b,0"].client_counts()["sessions_waiting"] == 1, what="the session waiting")
        for k in range(1, 4):
            await pub.publish(quote(k))
        got = [await events.__anext__() for _ in range(3)]
        assert [e.attrs["price"] for e in got if isinstance(e, Deliver)] == [1, 2, 3]
        assert any("resumed the session" in line for line in changes), changes
        await sub.close()
        await pub.close()


# --- the state file --------------------------------------------------------------------------------
def test_the_state_file_round_trips_and_is_replaced_whole(tmp_path: Path) -> None:
    state = ClientState("b,1", [("feed", "a-1", parse_filter("seq >= 0"))], {"f" * 32: [("s1", parse_filter(SUB))]})
    clientstate.save(tmp_path, state)
    back = clientstate.load(tmp_path, "b,1")
    assert back.to_json() == state.to_json()
    assert not list(tmp_path.glob("*.tmp"))
    assert clientstate.load(tmp_path / "none-yet", "b,1").advertisements == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not a broker state file"),
        ('{"version": 7, "broker": "b,1"}', "not a version-1 broker state file"),
        ('{"version": 1, "broker": "a,0", "advertisements": [], "sessions": []}', "the state of broker 'a,0'"),
        ('{"version": 1, "broker": "b,1", "advertisements": [["feed", "a-1", "seq >>> 0"]], "sessions": []}',
         "does not parse"),
        ('{"version": 1, "broker": "b,1", "advertisements": [["feed"]], "sessions": []}', r"is \[client, id, filter\]"),
    ],
)
def test_a_corrupt_or_foreign_state_file_is_refused_in_one_line(tmp_path: Path, content: str, problem: str) -> None:
    clientstate.path_in(tmp_path).write_text(content)
    with pytest.raises(StateError, match=problem) as caught:
        clientstate.load(tmp_path, "b,1")
    assert "\n" not in str(caught.value) and str(clientstate.path_in(tmp_path)) in str(caught.value)


def test_the_broker_command_exits_2_on_a_bad_state_file(tmp_path: Path) -> None:
    topo = tmp_path / "topology.json"
    topo.write_text(json.dumps({"factor": [["a", "b"]], "m": 1, "addresses": {"a,0": "127.0.0.1:1", "b,0": "127.0.0.1:2"}}))
    state = tmp_path / "state"
    state.mkdir()
    clientstate.path_in(state).write_text("garbage")
    result = CliRunner().invoke(main, ["broker", "--topology", str(topo), "--id", "a,0", "--state-dir", str(state)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "not a broker state file" in lines[0], result.output


def test_a_connection_that_opens_another_session_leaves_the_first() -> None:
    """Found by the broker-sessions fuzz target: one connection bound to two sessions got both
    sessions' deliveries, numbered apart."""
    from collections import Counter as Count

    from broker.cores.messages import Attrs, ClientAdvertise, ClientPublish, ClientSessionRequest, ClientSubscribe
    from broker.cores.octopia import OctopiaBroker
    from broker.sessions import ClientSessions
    from broker.topologyfile import figure3
    from fuzz.sessiontarget import FakeConnection

    topo = figure3()
    me = topo.brokers[0]
    core = OctopiaBroker(topo, me)
    sessions: ClientSessions

    def route(sends: list) -> None:  # type: ignore[type-arg]
        for dest, msg in sends:
            if isinstance(msg, Deliver):
                sessions.deliver(dest, msg)

    sessions = ClientSessions(me, core, Count(), 1 << 20, route, lambda: 1.0)
    conn = FakeConnection()
    sessions.request(ClientSessionRequest("c", "", 0), conn, 0.0)  # type: ignore[arg-type]
    sessions.request(ClientSubscribe("c", "s1", parse_filter("k exists")), conn, 0.0)  # type: ignore[arg-type]
    sessions.request(ClientSessionRequest("c", "", 0), conn, 0.0)  # type: ignore[arg-type]  # a second one
    sessions.request(ClientAdvertise("p", "a", parse_filter("k exists")), conn, 0.0)  # type: ignore[arg-type]
    sessions.request(ClientPublish("p", "", Attrs({"k": 1})), conn, 0.0)  # type: ignore[arg-type]
    assert [m for m in conn.sent if isinstance(m, Deliver)] == []  # s1 is the first session's, now waiting
    assert sessions.sessions() == (2, 1)
