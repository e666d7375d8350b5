"""Sharded supervisors without I/O (`pubsub.kernel.shards`, `pubsub.skipring.supervisor.sharding`, the node
core's routing): the hash ring's balance and minimal movement, the live-set view, the
supervisor's redirects and hand-over of topics, and a node re-routing a moved topic."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.kernel.shards import (
    GetSupervisors,
    HashRing,
    SupervisorBeat,
    Supervisors,
    SupervisorSet,
    owner,
)
from pubsub.publications.messages import MemberIs
from pubsub.skipring.admission import node_admits, supervisor_admits
from pubsub.skipring.labels import l
from pubsub.skipring.messages import GetConfiguration, Ping, Pong, SetData, Subscribe, Unsubscribe
from pubsub.skipring.nodecore import POLL_MAX, NodeCore
from pubsub.skipring.supervisor.core import SupervisorCore
from pubsub.skipring.supervisor.sharding import ShardedSupervisor

SUPS = [Ref(f"10.0.0.{i}:7000") for i in range(1, 5)]
TOPICS = [f"topic-{i}" for i in range(3000)]


def test_one_supervisor_owns_everything() -> None:
    ring = HashRing([SUPS[0]])
    assert {ring.owner(t) for t in TOPICS[:100]} == {SUPS[0]}


def test_owner_is_independent_of_order_and_duplicates() -> None:
    a = HashRing(SUPS[:3])
    b = HashRing([SUPS[2], SUPS[0], SUPS[1], SUPS[0]])
    assert all(a.owner(t) == b.owner(t) for t in TOPICS)
    assert owner("x", SUPS[:3]) == a.owner("x")


def test_balance() -> None:
    """64 virtual points each: every supervisor's share is within 35% of the fair share."""
    for k in (2, 3, 4, 8):
        counts = Counter(HashRing(SUPS[:k] if k <= 4 else [f"h{i}:1" for i in range(k)]).owner(t) for t in TOPICS)
        fair = len(TOPICS) / k
        assert len(counts) == k
        assert all(abs(c - fair) <= 0.35 * fair for c in counts.values()), counts


def test_adding_a_supervisor_moves_only_its_share() -> None:
    old, new = HashRing(SUPS[:3]), HashRing(SUPS[:4])
    moved = [t for t in TOPICS if old.owner(t) != new.owner(t)]
    assert all(new.owner(t) == SUPS[3] for t in moved)  # only to the newcomer
    assert 0.15 * len(TOPICS) <= len(moved) <= 0.35 * len(TOPICS)  # about a quarter


def test_removing_a_supervisor_moves_only_its_topics() -> None:
    old, new = HashRing(SUPS[:3]), HashRing([SUPS[0], SUPS[2]])
    for t in TOPICS:
        if old.owner(t) != SUPS[1]:
            assert new.owner(t) == old.owner(t)
        else:
            assert new.owner(t) in (SUPS[0], SUPS[2])


def test_empty_ring_refused() -> None:
    with pytest.raises(ValueError):
        HashRing([])


def test_view_dead_after_silence_and_alive_again() -> None:
    view = SupervisorSet(SUPS[0], SUPS[1:3], dead_after=3.0)
    assert view.live == frozenset(SUPS[:3])
    assert not view.tick(0.0)
    assert not view.heard(SUPS[1], [], 1.0)
    assert view.tick(3.5)  # SUPS[2] silent since the start
    assert view.live == frozenset(SUPS[:2])
    assert view.heard(SUPS[2], [], 4.0)
    assert view.live == frozenset(SUPS[:3])


def test_view_learns_gossiped_peers_only_when_heard() -> None:
    view = SupervisorSet(SUPS[0], [SUPS[1]], dead_after=3.0)
    view.tick(0.0)
    assert not view.heard(SUPS[1], [SUPS[0], SUPS[1], SUPS[3]], 1.0)
    assert SUPS[3] in view.known and SUPS[3] not in view.live
    assert SUPS[3] in view.peers()
    assert view.heard(SUPS[3], [], 1.5)
    assert SUPS[3] in view.live


# --- the supervisor ------------------------------------------------------------------------------
def _sup(i: int, peers: list[Ref]) -> ShardedSupervisor:
    return ShardedSupervisor(
        SupervisorCore(SUPS[i], rng=random.Random(i)), [p for p in peers if p != SUPS[i]], dead_after=3.0
    )


def test_single_supervisor_is_the_plain_core() -> None:
    sup = _sup(0, [])
    sends = sup.handle(Subscribe(Topic("t"), Ref("n:1")), 0.0)
    assert [type(s.msg) for s in sends] == [SetData]
    assert sup.timeout(0.0) is not None and sup.live() == [SUPS[0]]
    assert sup.handle(GetSupervisors(Ref("n:1")), 0.0)[0].msg == Supervisors(SUPS[0], [SUPS[0]])


def test_redirect_for_a_topic_owned_elsewhere() -> None:
    sup = _sup(0, SUPS[:3])
    ring = HashRing(SUPS[:3])
    foreign = next(t for t in TOPICS if ring.owner(t) != SUPS[0])
    mine = next(t for t in TOPICS if ring.owner(t) == SUPS[0])
    (send,) = sup.handle(Subscribe(Topic(foreign), Ref("n:1")), 0.0)
    assert send.dest == "n:1" and send.msg == Supervisors(SUPS[0], sorted(SUPS[:3]), redirect=Topic(foreign))
    assert foreign not in sup.core.topics and sup.counters["redirects"] == 1
    (send,) = sup.handle(GetConfiguration(Topic(foreign), Ref("n:2")), 0.0)
    assert isinstance(send.msg, Supervisors)
    assert isinstance(sup.handle(Subscribe(Topic(mine), Ref("n:1")), 0.0)[0].msg, SetData)


def test_beats_and_takeover_of_a_dead_peer() -> None:
    """A peer falls silent: its topics become ours (empty), ours that go elsewhere... none;
    the members of our topics are told the new set."""
    sup = _sup(0, SUPS[:3])
    sends = sup.timeout(0.0)
    beats = [s for s in sends if isinstance(s.msg, SupervisorBeat)]
    assert sorted(s.dest for s in beats) == SUPS[1:3]
    mine = [t for t in TOPICS[:200] if HashRing(SUPS[:3]).owner(t) == SUPS[0]][:5]
    for t in mine:
        sup.handle(Subscribe(Topic(t), Ref("n:1")), 0.0)
    sup.handle(SupervisorBeat(SUPS[1], list(SUPS[:3])), 2.0)
    sends = sup.timeout(3.5)  # SUPS[2] silent for 3.5 s
    assert sup.live() == sorted(SUPS[:2])
    news = [s for s in sends if isinstance(s.msg, Supervisors)]
    assert [s.dest for s in news] == ["n:1"] and news[0].msg.live == sorted(SUPS[:2])
    taken = next(t for t in TOPICS if HashRing(SUPS[:3]).owner(t) == SUPS[2] and HashRing(SUPS[:2]).owner(t) == SUPS[0])
    assert isinstance(sup.handle(Subscribe(Topic(taken), Ref("n:2")), 4.0)[0].msg, SetData)
    assert all(t in sup.core.topics for t in mine)


def test_a_newcomer_takes_its_share_and_the_old_owner_drops_it() -> None:
    sup = _sup(0, SUPS[:3])
    sup.timeout(0.0)
    old, new = HashRing(SUPS[:3]), HashRing(SUPS[:4])
    mine = [t for t in TOPICS[:400] if old.owner(t) == SUPS[0]]
    for t in mine:
        sup.handle(Subscribe(Topic(t), Ref("n:1")), 0.0)
    sup.drain_changes()
    for peer in SUPS[1:3]:
        sup.handle(SupervisorBeat(peer, list(SUPS[:3])), 0.5)
    sup.handle(SupervisorBeat(SUPS[3], [SUPS[3], SUPS[0]]), 1.0)
    moved = [t for t in mine if new.owner(t) != SUPS[0]]
    assert moved and all(new.owner(t) == SUPS[3] for t in moved)
    assert sorted(sup.core.topics) == sorted(t for t in mine if t not in moved)
    assert sup.counters["topics_released"] == len(moved)
    deleted = {topic for topic, _, ref in sup.drain_changes() if ref is None}
    assert deleted == set(moved)  # their rows go from the store, nothing is sent for them


def test_peer_unreachable_of_a_supervisor_is_not_a_crash() -> None:
    sup = _sup(0, SUPS[:2])
    assert sup.peer_unreachable(SUPS[1], 0.0) == []


# --- the node ------------------------------------------------------------------------------------
def test_node_routes_per_topic_and_rehomes_a_moved_topic() -> None:
    node = NodeCore(Ref("n:1"), SUPS[0], rng=random.Random(1), discover_supervisors=True)
    sends = node.timeout(0.0)
    assert [(s.dest, s.msg) for s in sends] == [(SUPS[0], GetSupervisors(Ref("n:1")))]
    three, two = HashRing(SUPS[:3]), HashRing([SUPS[0], SUPS[2]])
    node.handle(Supervisors(SUPS[0], list(SUPS[:3])), 0.1)
    moving = next(t for t in TOPICS if three.owner(t) == SUPS[1])
    staying = next(t for t in TOPICS if three.owner(t) == SUPS[2])
    for t in (moving, staying):
        (send,) = node.join(Topic(t))
        assert send.dest == three.owner(t) and isinstance(send.msg, Subscribe)
        node.handle(SetData(Topic(t), None, l(0), None), 0.2)
    sends = node.handle(Supervisors(SUPS[2], [SUPS[0], SUPS[2]]), 1.0)
    assert [(s.dest, type(s.msg)) for s in sends] == [(two.owner(moving), Subscribe)]
    assert node.rehoming == {moving: two.owner(moving)}
    again = [s for s in node.timeout(1.5) if isinstance(s.msg, Subscribe)]
    assert [s.dest for s in again] == [two.owner(moving)]
    node.handle(SetData(Topic(moving), None, l(0), None), 2.0)
    assert not node.rehoming
    assert node.status()["supervisors"]["counters"]["topics_rehomed"] == 1  # type: ignore[index]
    # a Ping from any live supervisor is answered to every live one
    assert {s.dest for s in node.handle(Ping(7), 2.0)} == {SUPS[0], SUPS[2]}
    assert all(isinstance(s.msg, Pong) for s in node.handle(Ping(7), 2.0))
    # leaving goes to the topic's owner
    (send,) = node.leave(Topic(moving))
    assert send.dest == two.owner(moving) and isinstance(send.msg, Unsubscribe)


def _polls(node: NodeCore, ticks: range, answer: list[Ref] | None = None) -> list[int]:
    """The Timeouts among `ticks` at which `node` asks for the live set (answered with
    `answer` when given)."""
    asked = []
    for tick in ticks:
        for send in node.timeout(float(tick)):
            if isinstance(send.msg, GetSupervisors):
                asked.append(tick)
                if answer is not None:
                    node.handle(Supervisors(send.dest, list(answer)), float(tick))
    return asked


def test_node_asks_for_the_supervisor_set_less_often_while_it_stays_the_same() -> None:
    node = NodeCore(Ref("n:1"), SUPS[0], rng=random.Random(1), discover_supervisors=True)
    assert _polls(node, range(0, 100), SUPS[:2]) == [0, 2, 4, 8, 16, 32, 48, 64, 80, 96]
    assert POLL_MAX == 16
    # a new set: asked again within POLL_EVERY Timeouts, and often at first
    node.handle(Supervisors(SUPS[0], list(SUPS[:3])), 100.0)
    assert _polls(node, range(100, 120), SUPS[:3]) == [102, 104, 108, 116]
    # a supervisor the runtime gave up on: another is asked at once, and soon again
    sends = node.peer_unreachable(SUPS[0], 120.0)
    assert [type(s.msg) for s in sends] == [GetSupervisors] and sends[0].dest != SUPS[0]
    assert _polls(node, range(120, 126)) == [122, 124]


def test_node_admits_configuration_only_from_the_topics_owner() -> None:
    node = NodeCore(Ref("n:1"), SUPS[0], rng=random.Random(1), discover_supervisors=True)
    node.handle(Supervisors(SUPS[0], list(SUPS[:3])), 0.0)
    ring = HashRing(SUPS[:3])
    t = next(t for t in TOPICS if ring.owner(t) == SUPS[1])
    msg = SetData(Topic(t), None, l(0), None)
    assert node_admits(msg, "supervisor", SUPS[1], node.admitted_supervisor(msg, SUPS[1])) is None
    assert node_admits(msg, "supervisor", SUPS[0], node.admitted_supervisor(msg, SUPS[0])) is not None
    member = MemberIs(Topic(t), None, 1)
    assert node_admits(member, "supervisor", SUPS[2], node.admitted_supervisor(member, SUPS[2])) is not None
    assert node_admits(Ping(1), "supervisor", SUPS[2], node.admitted_supervisor(Ping(1), SUPS[2])) is None
    assert node_admits(Ping(1), "supervisor", SUPS[3], node.admitted_supervisor(Ping(1), SUPS[3])) is not None
    news = Supervisors(SUPS[1], [SUPS[1]])
    assert node_admits(news, "supervisor", SUPS[1], SUPS[0]) is None
    assert node_admits(news, "supervisor", SUPS[2], SUPS[0]) is not None
    assert node_admits(news, "node", SUPS[1], SUPS[0]) is not None


def test_supervisor_admits_beats_only_from_the_supervisor_they_name() -> None:
    beat = SupervisorBeat(SUPS[1], [])
    assert supervisor_admits(beat, "supervisor", SUPS[1]) is None
    assert supervisor_admits(beat, "supervisor", SUPS[2]) is not None
    assert supervisor_admits(beat, "node", SUPS[1]) is not None
    assert supervisor_admits(GetSupervisors(Ref("n:1")), "node", "n:1") is None
    assert supervisor_admits(GetSupervisors(Ref("n:1")), "node", "n:2") is not None


def test_node_without_discovery_behaves_as_before() -> None:
    node = NodeCore(Ref("n:1"), SUPS[0], rng=random.Random(1))
    assert node.timeout(0.0) == []
    assert "supervisors" not in node.status()
    assert node.owner_of(Topic("anything")) == SUPS[0]
