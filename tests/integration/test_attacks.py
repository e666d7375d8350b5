"""The attacks of issue 13 ("Why"), each repeated against a TLS cluster and an insecure
(plain TCP) cluster of real processes: a supervisor and three nodes (`LocalCluster`,
interval 0.2 s), and, for the broker attacks, a SCOT of four brokers (`LocalScot`).

The attacker is a separate raw connection holding at most a *client* certificate of the
cluster CA (``mallory``), or, where an attack needs a daemon's identity, a node certificate
for a reference of its own (a member of nothing), or nothing at all.  Against TLS every
attack must fail: refused (the error code the attacker gets), counted (the daemon's
``stats.errors`` or signature counters), the ring exact (`pubsub.skipring.statuscheck.ring_problems`),
nothing stored and nothing lost.  Against the insecure cluster the same test documents what
the attack does there; the insecure cluster then heals (self-stabilization) or is repaired
before the next test, which the test waits for.

| attack | TLS | insecure |
|---|---|---|
| 1 forged SetData | ``identity_mismatch`` / ``forbidden_sender`` | relabels the member |
| 2 forged Unsubscribe | ``identity_mismatch`` / ``forbidden_sender`` | evicts the member |
| 3 client LeaveTopic | ``permission_denied`` | the node leaves |
| 4 Hello as the supervisor | ``identity_mismatch`` | gets the supervisor's frames |
| 5 Publish in another's name | ``identity_mismatch`` / ``unsigned`` | stored everywhere, twice per (publisher, seq) |
| 6 forged publications pile up | refused, nothing stored | on every node's disk |
| 7 made-up members | ``identity_mismatch`` / ``forbidden_sender`` | configured as members |
| 8 topics by a stranger | ``identity_mismatch`` / ``forbidden_sender`` | created, streamed to the stranger |
| 10 brokers | ``permission_denied`` / ``identity_mismatch`` / ``forbidden_sender`` | throttled, injected, withdrawn |

Attack 9 of the issue (held unfinished frames, trickling and idle connections, connection
floods, publish quotas) applies to every daemon with or without TLS and is tested in
tests/integration/test_limits.py under ``ulimit -n 256``; it is not repeated here.

Waits are bounded and on conditions; every process is stopped by pid (`LocalCluster`,
`LocalScot`).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from broker.client import BrokerClient, advertisement_id, to_filter
from broker.cores.messages import Attrs, ClientAdvertise, ClientPublish, ClientRefused, ClientUnadvertise, ScotPublish
from broker.cores.topology import scot
from broker.localscot import LocalScot
from pubsub.kernel import wire
from pubsub.kernel.control import ChaosRequest, Hello, Reply, StatusRequest
from pubsub.kernel.message import Message, Ref, Topic
from pubsub.ops.localcluster import LocalCluster
from pubsub.ops.processes import pick_free_ports, poll
from pubsub.publications.messages import LeaveTopic, Payload, Publication, PublicationKey, Publish
from pubsub.publications.trie import publication_key
from pubsub.runtime.client import request
from pubsub.skipring.labels import Label
from pubsub.skipring.messages import Ping, Pong, SetData, Subscribe, Unsubscribe
from pubsub.skipring.statuscheck import ring_problems
from tests.attackers import Listener, codes, contiguous_base_port, exchange, own_node_identity, tls_context

pytestmark = pytest.mark.integration

TOPIC = "attacked"
CONVERGE = 60.0
WAIT = 30.0
MODES = ["tls", "insecure"]


class Ring:
    """A running cluster and what its attacker holds."""

    def __init__(self, cluster: LocalCluster, tls: bool) -> None:
        self.cluster, self.tls = cluster, tls
        self.client_ctx: ssl.SSLContext | None = None  # mallory's client certificate
        self.node_ctx: ssl.SSLContext | None = None  # a node certificate for own_ref
        if cluster.certs is not None:
            cluster.certs.issue("client", "mallory")
            self.client_ctx = tls_context(cluster.certs, "mallory")
            self.own_ref, self.node_ctx = own_node_identity(cluster.certs)
        else:
            self.own_ref = Ref(f"127.0.0.1:{pick_free_ports(1)[0]}")

    @property
    def sup(self) -> str:
        return self.cluster.supervisor_ref

    def ref(self, i: int) -> str:
        return self.cluster.node_refs[i]

    def errors(self, ref: str) -> dict[str, int]:
        return dict(self.cluster.status_of(ref)["stats"]["errors"])

    def exact(self) -> list[str]:
        members, states = self.cluster.snapshot(TOPIC)
        wrong = [] if set(members) == set(self.cluster.node_refs) else [f"members {sorted(members)}"]
        return wrong + ring_problems(members, states)

    def wait_exact(self, what: str) -> None:
        self.cluster.poll(self.exact, CONVERGE, what)

    def refused_as_peer(self, target: str, frames: Sequence[Message], code: str = "forbidden_sender") -> None:
        """TLS: mallory's client certificate cannot even speak as a peer (``identity_mismatch``);
        the attacker's own node certificate speaks as itself and each of `frames` is refused
        with `code`.  Both counted at `target`; the ring stays exact."""
        before = self.errors(target)
        hello = Hello(ref=self.own_ref, role="peer")
        got = asyncio.run(exchange(target, self.client_ctx, hello, *frames))
        assert codes(got) == ["identity_mismatch"]
        got = asyncio.run(exchange(target, self.node_ctx, hello, *frames))
        assert codes(got)[:1] == [code], got

        def uncounted() -> list[str]:
            now = self.errors(target)
            want = {"identity_mismatch": 1, code: len(frames)}
            return [f"{c}: {now.get(c, 0) - before.get(c, 0)} < {n}" for c, n in want.items()
                    if now.get(c, 0) - before.get(c, 0) < n]

        self.cluster.poll(uncounted, WAIT, "the refusals counted")
        self.wait_exact("the ring exact after the refused frames")


@pytest.fixture(scope="module", params=MODES)
def ring(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ring]:
    tls = request.param == "tls"
    # Contiguous ports from base_port: the supervisor's reference sorts below every node's
    # (which matters to attack 4, see there).
    with LocalCluster(tmp_path_factory.mktemp(request.param), 3, interval=0.2, admin=False, tls=tls,
                      base_port=contiguous_base_port(4)) as cluster:
        for i in range(3):
            cluster.subscribe(i, TOPIC)
        attacked = Ring(cluster, tls)
        attacked.wait_exact("the ring before the attacks")
        yield attacked


async def hammer(
    target: str, ctx: ssl.SSLContext | None, hello: Hello, frame: Message, seen: Callable[[], Awaitable[bool]],
    timeout: float = WAIT,
) -> bool:
    """Send `frame` on one connection every 20 ms (the issue: 20 forged per second) until
    `seen()` says the attack shows, or `timeout` passes; whether it showed."""
    host, _, port = target.rpartition(":")
    _, writer = await asyncio.open_connection(host, int(port), ssl=ctx)
    writer.write(wire.encode(hello))
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            writer.write(wire.encode(frame))
            await writer.drain()
            if await seen():
                return True
            await asyncio.sleep(0.02)
        return False
    finally:
        writer.close()


async def status(ref: str) -> dict[str, Any]:
    reply = await request(ref, StatusRequest(), 10)
    assert isinstance(reply, Reply), reply
    return dict(reply.body)


def publication(publisher: str, seq: int, payload: bytes) -> Publication:
    return Publication(PublicationKey(publication_key(publisher, seq, payload)), Ref(publisher), seq, Payload(payload))


def held(ring: Ring) -> list[list[tuple[str, int]]]:
    found = ring.cluster.histories(ring.cluster.node_refs, TOPIC)
    return [[(d["publisher"], d["seq"]) for d in found[ref]] for ref in ring.cluster.node_refs]


def stored_count(ring: Ring, i: int) -> int:
    return int(ring.cluster.node_status(i)["topics"][TOPIC]["publications"]["count"])


def unsigned_rejected(ring: Ring, i: int) -> int:
    return int(ring.cluster.node_status(i)["publications"]["signatures"]["rejected"].get("unsigned", 0))


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


# --- 4: a Hello claiming the supervisor's reference ----------------------------------------------
def test_4_hello_claiming_the_supervisor(ring: Ring) -> None:
    """Insecure: whoever says Hello as the supervisor to a node gets the frames that node
    sends its supervisor (here the Pong to a Ping) -- when the claimed reference sorts below
    the node's, as the supervisor's does in this cluster: the runtime keeps the connection
    initiated by the lower reference of a pair, so the forged one replaces the node's own.
    TLS: no certificate the attacker can hold names the supervisor: ``identity_mismatch``."""
    target, hello, ping = ring.ref(0), Hello(ref=Ref(ring.sup), role="peer"), Ping(nonce=4242)
    if not ring.tls:
        got = asyncio.run(exchange(target, None, hello, ping, replies=1, wait=WAIT))
        assert Pong(nonce=4242, ref=Ref(target)) in got
        ring.wait_exact("the ring after the forged supervisor left")
        return
    before = ring.errors(target).get("identity_mismatch", 0)
    for ctx in (ring.client_ctx, ring.node_ctx):
        got = asyncio.run(exchange(target, ctx, hello, ping))
        assert codes(got) == ["identity_mismatch"] and not any(isinstance(m, Pong) for m in got)
    assert ring.errors(target).get("identity_mismatch", 0) == before + 2
    ring.wait_exact("the ring exact after the refused attack")  # bounded; earlier tests may still be settling


# --- 5: a Publish attributed to another node -----------------------------------------------------
def test_5_publish_in_another_nodes_name(ring: Ring) -> None:
    """Insecure: a Publish frame from anyone, naming node 0 as publisher, is stored by every
    node -- and so is a second publication under the same (publisher, seq).  TLS: the
    client certificate cannot speak as a peer; the attacker's own node certificate may send
    Publish, but the publications carry no signature of node 0 and every node refuses them
    (``unsigned``, counted), so none is stored anywhere."""
    owner, target = ring.ref(0), ring.ref(1)
    seq = 1_000_000
    forged = [publication(owner, seq, b"forged"), publication(owner, seq, b"forged again")]
    frame = Publish(Topic(TOPIC), forged)
    if not ring.tls:
        asyncio.run(exchange(target, None, Hello(ref=ring.own_ref, role="peer"), frame, wait=1))
        ring.cluster.poll(lambda: [f"node {i}: {h.count((owner, seq))} copies" for i, h in enumerate(held(ring))
                                   if h.count((owner, seq)) != 2], CONVERGE, "both forgeries at every node")
        return
    got = asyncio.run(exchange(target, ring.client_ctx, Hello(ref=ring.own_ref, role="peer"), frame))
    assert codes(got) == ["identity_mismatch"]
    before = unsigned_rejected(ring, 1)
    asyncio.run(exchange(target, ring.node_ctx, Hello(ref=ring.own_ref, role="peer"), frame, wait=1))
    ring.cluster.poll(lambda: [] if unsigned_rejected(ring, 1) >= before + 2 else ["not counted"], WAIT,
                      "the unsigned forgeries refused")
    genuine = ring.cluster.publish(0, TOPIC, "genuine")  # the control: it reaches everyone
    mark = (genuine["publisher"], genuine["seq"])
    ring.cluster.poll(lambda: [f"node {i}" for i, h in enumerate(held(ring)) if mark not in h], CONVERGE,
                      "the genuine publication everywhere")
    assert all((owner, seq) not in h for h in held(ring))
    ring.wait_exact("the ring exact after the refused attack")  # bounded; earlier tests may still be settling


# --- 6: forged publications pile up on every disk ------------------------------------------------
def test_6_forged_publications_pile_up(ring: Ring) -> None:
    """The issue's 21 MiB sent to one node (162 MiB on six disks), scaled down to 3 MiB and
    three nodes.  Insecure: every node stores all of it (its data directory grows by at
    least what was sent).  TLS: refused by the node it was sent to (``unsigned``, counted),
    stored by none, no disk grows by it."""
    count, size, per_frame = 48, 64 * 1024, 12
    pubs = [publication("127.0.0.1:7", 2_000_000 + k, bytes([k]) * size) for k in range(count)]
    frames = [Publish(Topic(TOPIC), pubs[k : k + per_frame]) for k in range(0, count, per_frame)]
    sent = count * size
    stored = [stored_count(ring, i) for i in range(3)]
    disks = [disk_bytes(d.data_dir) for d in ring.cluster.nodes]
    hello = Hello(ref=ring.own_ref, role="peer")
    if not ring.tls:
        asyncio.run(exchange(ring.ref(1), None, hello, *frames, wait=2))
        ring.cluster.poll(lambda: [f"node {i}" for i in range(3) if stored_count(ring, i) < stored[i] + count],
                          CONVERGE, "the forged publications at every node")
        ring.cluster.poll(lambda: [f"node {i}" for i, d in enumerate(ring.cluster.nodes)
                                   if disk_bytes(d.data_dir) - disks[i] < sent], CONVERGE,
                          "the forged bytes on every disk")
        return
    got = asyncio.run(exchange(ring.ref(1), ring.client_ctx, hello, *frames))
    assert codes(got) == ["identity_mismatch"]
    before = unsigned_rejected(ring, 1)
    asyncio.run(exchange(ring.ref(1), ring.node_ctx, hello, *frames, wait=2))
    ring.cluster.poll(lambda: [] if unsigned_rejected(ring, 1) >= before + count else ["not all counted"], WAIT,
                      "every forged publication refused")
    assert [stored_count(ring, i) for i in range(3)] == stored
    for i, d in enumerate(ring.cluster.nodes):
        assert disk_bytes(d.data_dir) - disks[i] < sent // 4, f"node {i}'s data grew"
    ring.wait_exact("the ring exact after the refused attack")  # bounded; earlier tests may still be settling


# --- 1: a forged SetData ---------------------------------------------------------------------------
def test_1_forged_setdata_relabels_a_member(ring: Ring) -> None:
    """Insecure: forged SetData (20 a second) relabels a member; once it stops, the ring
    heals.  TLS: only the node's supervisor may configure it (``forbidden_sender`` for the
    attacker's node certificate, ``identity_mismatch`` for its client certificate); the
    member keeps its label."""
    target = ring.ref(1)
    label = ring.cluster.node_status(1)["topics"][TOPIC]["label"]
    forged_label = "0111" if label != "0111" else "1011"
    forged = SetData(Topic(TOPIC), None, Label(forged_label), None)
    if not ring.tls:
        async def relabelled() -> bool:
            return bool((await status(target))["topics"].get(TOPIC, {}).get("label") == forged_label)

        hello = Hello(ref=ring.own_ref, role="peer")
        assert asyncio.run(hammer(target, None, hello, forged, relabelled)), "never relabelled"
        ring.wait_exact("the ring healed after the forged SetData")
        return
    ring.refused_as_peer(target, [forged])
    assert ring.cluster.node_status(1)["topics"][TOPIC]["label"] == label


# --- 2: a forged Unsubscribe -------------------------------------------------------------------
def test_2_forged_unsubscribe_evicts_a_member(ring: Ring) -> None:
    """Insecure: a forged Unsubscribe for node 2, sent to the supervisor, evicts it (it
    rejoins by itself under another label: the ring is broken meanwhile).  TLS: Unsubscribe
    for X only from X (``forbidden_sender``); node 2 stays a member."""
    victim = ring.ref(2)
    forged = Unsubscribe(Topic(TOPIC), Ref(victim))
    if not ring.tls:
        async def evicted() -> bool:
            members = (await status(ring.sup))["topics"].get(TOPIC, {}).get("members", [])
            return victim not in {m.get("ref") for m in members}

        hello = Hello(ref=ring.own_ref, role="peer")
        assert asyncio.run(hammer(ring.sup, None, hello, forged, evicted)), "never evicted"
        ring.wait_exact("the ring healed after the forged Unsubscribe")
        return
    ring.refused_as_peer(ring.sup, [forged])
    assert victim in ring.cluster.snapshot(TOPIC)[0]


# --- 3: a client LeaveTopic ------------------------------------------------------------------------
def test_3_client_leavetopic_makes_a_node_leave(ring: Ring) -> None:
    """Insecure: any client may make a node leave a topic.  TLS: a client certificate
    without a ``join`` grant (no permissions file: clients publish and subscribe only) is
    refused (``permission_denied``, counted); the node stays."""
    target = ring.ref(2)
    leave = LeaveTopic(Topic(TOPIC))
    if not ring.tls:
        got = asyncio.run(exchange(target, None, Hello(ref=None, role="client"), leave, replies=1))
        assert isinstance(got[0], Reply) and got[0].body.get("ok") is True
        ring.cluster.poll(lambda: [] if target not in ring.cluster.snapshot(TOPIC)[0] else ["still a member"],
                          WAIT, "the node gone")
        ring.cluster.subscribe(2, TOPIC)  # the operator repairs it for the tests that follow
        ring.wait_exact("the ring after the node rejoined")
        return
    before = ring.errors(target).get("permission_denied", 0)
    got = asyncio.run(exchange(target, ring.client_ctx, Hello(ref=None, role="client"), leave))
    assert codes(got) == ["permission_denied"]
    assert ring.errors(target).get("permission_denied", 0) == before + 1
    assert TOPIC in ring.cluster.node_status(2)["topics"]
    ring.wait_exact("the ring exact after the refused attack")  # bounded; earlier tests may still be settling


# --- 7: made-up references subscribe ---------------------------------------------------------------
def test_7_made_up_references_become_members(ring: Ring) -> None:
    """Insecure: Subscribe for references the attacker makes up (here: addresses it listens
    on) makes the supervisor configure them as members (each gets a SetData with a label);
    once they stop answering, the supervisor removes them and the ring heals.  TLS: only X
    subscribes X (``forbidden_sender``); nothing is sent to the made-up addresses."""

    async def attack() -> list[Listener]:
        listeners = [await Listener().start() for _ in range(3)]
        forged = [Subscribe(Topic(TOPIC), lst.ref) for lst in listeners]
        try:
            if not ring.tls:
                await exchange(ring.sup, None, Hello(ref=ring.own_ref, role="peer"), *forged, wait=1)
                deadline = time.monotonic() + WAIT
                while not all(_configured(lst) for lst in listeners):
                    assert time.monotonic() < deadline, "the made-up members were never configured"
                    await asyncio.sleep(0.1)
            else:
                await asyncio.to_thread(ring.refused_as_peer, ring.sup, forged)
        finally:
            for lst in listeners:
                await lst.close()
        return listeners

    listeners = asyncio.run(attack())
    if ring.tls:
        assert all(not lst.frames for lst in listeners)
        assert set(ring.cluster.snapshot(TOPIC)[0]) == set(ring.cluster.node_refs)
    ring.wait_exact("the ring without the made-up members")


def _configured(listener: Listener) -> bool:
    return any(isinstance(m, SetData) and m.label is not None and m.topic == TOPIC for m in listener.frames)


# --- 8: many topics created by a stranger ----------------------------------------------------------
def test_8_topics_created_by_a_stranger(ring: Ring) -> None:
    """Insecure: a stranger's Subscribe for 200 new topics (the issue: 3,000) creates them
    all at the supervisor, which then streams their configurations to an address of the
    stranger's choosing.  TLS: refused (``forbidden_sender``: the attacker's node
    certificate may subscribe only itself -- a node certificate is a node; a stranger has
    none); no topic is created.  After the stranger's address stops answering, the
    supervisor forgets the topics."""
    n = 200
    topics_before = set(ring.cluster.supervisor_status()["topics"])

    async def attack() -> Listener:
        listener = await Listener().start()
        forged = [Subscribe(Topic(f"stranger-{k}"), listener.ref) for k in range(n)]
        try:
            if not ring.tls:
                await exchange(ring.sup, None, Hello(ref=ring.own_ref, role="peer"), *forged, wait=1)
                deadline = time.monotonic() + WAIT
                while sum(isinstance(m, SetData) and m.label is not None for m in listener.frames) < n:
                    assert time.monotonic() < deadline, "the stranger's topics were never configured"
                    await asyncio.sleep(0.1)
                created = set((await status(ring.sup))["topics"]) - topics_before
                assert len(created) >= n - 10, f"{len(created)} topics created"  # some may be gone again
            else:
                await asyncio.to_thread(ring.refused_as_peer, ring.sup, forged)
        finally:
            await listener.close()
        return listener

    listener = asyncio.run(attack())
    if ring.tls:
        assert not listener.frames
        assert set(ring.cluster.supervisor_status()["topics"]) == topics_before
    ring.cluster.poll(lambda: sorted(set(ring.cluster.supervisor_status()["topics"]) - topics_before)[:3], CONVERGE,
                      "the stranger's topics forgotten")
    ring.wait_exact("the ring after the stranger's topics")


# --- 10: broker mode -------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_10_broker_attacks(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Broker mode, a SCOT of four brokers (the path a-b times K_2; a,0's neighbours are b,0
    and a,1), with admin listeners.

    * Throttling a link: ``link_rate`` on a broker's client port is refused in both modes
      (``forbidden``: admin actions only on the admin listener).  On the admin listener:
      insecure, anyone who reaches it throttles a link to 0.01 msg/s; TLS, only an admin
      certificate (mallory's client certificate: ``permission_denied``, counted as
      ``admin_permission_denied``).
    * Injecting a publication with b,0 as sender at a,0: insecure, a subscriber at a,0
      receives it; TLS, the client certificate cannot speak as a peer (``identity_mismatch``),
      a node certificate is no broker (``forbidden_sender``); nothing is delivered.
    * Withdrawing alice's advertisement: insecure, mallory withdraws it and alice's next
      publication is refused (``not_advertised``); TLS, a client acts only as its own
      client id (``permission_denied``), and alice's publication is delivered.
    """
    tls = mode == "tls"
    for name in ("PUBSUB_TLS_CA", "PUBSUB_TLS_CERT", "PUBSUB_TLS_KEY"):  # not a skip-ring cluster's
        monkeypatch.delenv(name, raising=False)
    with LocalScot(tmp_path / "scot", scot([["a", "b"]], 2), tls=tls, admin=True) as brokers:
        def silent_links() -> list[str]:
            return [f"{bid} -> {link}" for bid, body in brokers.broker_statuses().items()
                    for link, entry in body["links"].items() if entry["last_heard_s"] is None]

        poll(silent_links, CONVERGE, "heartbeats on every broker link")
        mallory = alice = node_ctx = None
        own_ref = Ref(f"127.0.0.1:{pick_free_ports(1)[0]}")
        if brokers.certs is not None:
            for name in ("mallory", "alice"):
                brokers.certs.issue("client", name)
            mallory, alice = tls_context(brokers.certs, "mallory"), tls_context(brokers.certs, "alice")
            own_ref, node_ctx = own_node_identity(brokers.certs)
        a0, b0 = brokers.address("a,0"), brokers.address("b,0")
        client = Hello(ref=None, role="client")

        def errors(bid: str) -> dict[str, int]:
            return dict(brokers.broker_status(bid)["stats"]["errors"])

        def rate() -> Any:
            return brokers.broker_status("a,0")["links"]["a,1"]["rate_limit"]

        # Throttling a link.
        throttle = ChaosRequest(action="link_rate", params={"link": "a,1", "rate": 0.01})
        got = asyncio.run(exchange(a0, mallory, client, throttle))
        assert codes(got) == ["forbidden"]
        got = asyncio.run(exchange(brokers.admin_ref("a,0"), mallory, client, throttle, replies=1))
        if tls:
            assert codes(got) == ["permission_denied"]
            assert errors("a,0").get("admin_permission_denied") == 1
            assert rate() is None
        else:
            assert isinstance(got[0], Reply) and got[0].body.get("ok") is True
            assert rate() == 0.01
            lift = ChaosRequest(action="link_rate", params={"link": "a,1", "rate": None})
            got = asyncio.run(exchange(brokers.admin_ref("a,0"), None, client, lift, replies=1))
            assert rate() is None

        # Alice advertises at b,0; a subscriber listens at a,0 (the operator's certificate).
        adv = to_filter("x >= 0")
        got = asyncio.run(exchange(b0, alice, client, ClientAdvertise("alice", advertisement_id(adv), adv),
                                   replies=1))
        assert isinstance(got[0], Reply), got

        async def scenario() -> list[str]:
            async with BrokerClient(a0) as sub_client:
                sub = await sub_client.subscribe("x >= 0")
                # Injecting a publication in b,0's name.
                forged = ScotPublish("forged-1", "alice", Attrs({"x": 1}), 0, 1, "b,0")
                if tls:
                    before = await asyncio.to_thread(errors, "a,0")
                    got = await exchange(a0, mallory, Hello(ref=own_ref, role="peer"), forged)
                    assert codes(got) == ["identity_mismatch"]
                    got = await exchange(a0, node_ctx, Hello(ref=own_ref, role="peer"), forged)
                    assert codes(got) == ["forbidden_sender"]
                    after = await asyncio.to_thread(errors, "a,0")
                    for code in ("identity_mismatch", "forbidden_sender"):
                        assert after.get(code, 0) == before.get(code, 0) + 1
                else:
                    await exchange(a0, None, Hello(ref=own_ref, role="peer"), forged, wait=1)
                    assert (await sub.get(WAIT)).pid == "forged-1"
                # Withdrawing alice's advertisement.
                withdraw = ClientUnadvertise("alice", advertisement_id(adv))
                got = await exchange(b0, mallory, client, withdraw, replies=1)
                publish = ClientPublish("alice", "genuine-1", Attrs({"x": 2}))
                answer = await exchange(b0, alice, client, publish, replies=1)
                if tls:
                    assert isinstance(got[0], ClientRefused) and got[0].code == "permission_denied", got
                    assert isinstance(answer[0], Reply), answer
                    return [(await sub.get(WAIT)).pid]
                assert isinstance(got[0], Reply) and got[0].body.get("ok") is True, got
                assert isinstance(answer[0], ClientRefused) and answer[0].code == "not_advertised", answer
                return []

        delivered = asyncio.run(scenario())
        if tls:
            assert delivered == ["genuine-1"]  # the forgery was never delivered, before or after
            assert errors("b,0").get("permission_denied", 0) >= 1

