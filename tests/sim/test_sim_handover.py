"""Publishing as a client does, in the simulator, with simulated stores and no network.

The node core decides the hand-over (a publication sent to a non-member goes to a member the
supervisor names) and states the order against durability as effects: a member stores the
publication, then *persists*, and only after that commit acknowledges (to its client, or
with HandOverAck to the node that handed it over) and floods.  With `commit_delay` the
simulator writes each node's stores in group commits that take time, so the order is
observable: these tests read the trace of sends and commits.
"""

from __future__ import annotations

from typing import Any

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import HandOver, HandOverAck, PublishAck, PublishFailed, PublishNew
from pubsub.sim.scenarios import fresh_start
from pubsub.sim.world import Simulation
from tests.simhelpers import settle

TOPIC = Topic("t")
COMMIT = 0.2  # seconds a group commit takes: longer than the slowest message (0.05)


def ring_with_outsider(seed: int, members: int = 5) -> tuple[Simulation, list[Ref], Ref]:
    """A settled ring of `members` subscribers of TOPIC, and one more node that is not one."""
    sim = Simulation(seed, delay=(0.01, 0.05), commit_delay=COMMIT, trace=True)
    refs = fresh_start(sim, members, TOPIC)
    settle(sim, TOPIC, max_intervals=600)
    outsider = sim.add_node("outsider")
    sim.run_for(1.0)
    assert sim.log is not None
    sim.log.clear()
    return sim, refs, outsider


def commit_time(sim: Simulation, ref: Ref, key: bytes) -> float | None:
    """When `ref` committed the publication with `key` (None: never)."""
    assert sim.log is not None
    for when, what, node, detail in sim.log:
        if what == "commit" and node == ref and any(k == key for _, k in detail):
            return when
    return None


def sends(sim: Simulation, src: Ref, kind: type) -> list[tuple[float, Ref, Any]]:
    assert sim.log is not None
    return [
        (when, dest, msg)
        for when, what, node, (dest, msg) in (e for e in sim.log if e[1] == "send")
        if node == src and isinstance(msg, kind)
    ]


def test_a_member_acknowledges_only_after_its_commit_then_floods() -> None:
    sim, refs, _ = ring_with_outsider(seed=3)
    publisher = refs[0]
    sim.publish_request(publisher, TOPIC, b"by a member", client=7, request_id=41)
    start = sim.now
    sim.run_for(5.0)
    [(acked_at, node, answer)] = sim.answers
    assert node == publisher and answer.client == 7
    ack = answer.msg
    assert isinstance(ack, PublishAck) and ack.id == 41 and ack.stored_by == publisher
    committed = commit_time(sim, publisher, ack.key)
    assert committed is not None and committed >= start + COMMIT
    assert acked_at >= committed  # persist, then acknowledge ...
    floods = sends(sim, publisher, PublishNew)
    assert floods and all(when >= committed for when, _, _ in floods)  # ... then flood
    for ref in refs:  # and every member ends up holding it durably
        assert sim.stores[ref].holds(TOPIC, ack.key), ref


def test_a_non_member_hands_over_and_answers_after_the_members_commit() -> None:
    sim, refs, outsider = ring_with_outsider(seed=5)
    sim.publish_request(outsider, TOPIC, b"through a non-member", client=2, request_id=9)
    sim.run_for(8.0)
    [(answered_at, node, answer)] = sim.answers
    assert node == outsider and answer.client == 2
    ack = answer.msg
    assert isinstance(ack, PublishAck) and ack.id == 9 and ack.publisher == outsider
    member = ack.stored_by
    assert member in refs
    # The outsider runs no ring for TOPIC and stored nothing.
    assert TOPIC not in sim.nodes[outsider].publications
    assert not sim.stores[outsider].written
    [(handed_at, dest, handover)] = sends(sim, outsider, HandOver)
    assert dest == member and handover.publication.key == ack.key
    committed = commit_time(sim, member, ack.key)
    assert committed is not None and committed > handed_at
    [(acked_at, back_to, hand_ack)] = sends(sim, member, HandOverAck)
    assert back_to == outsider and hand_ack.ok
    assert acked_at >= committed  # the member persisted before acknowledging
    assert answered_at > acked_at  # the client hears after the member's acknowledgement
    floods = sends(sim, member, PublishNew)
    assert floods and min(when for when, _, _ in floods) >= committed
    for ref in refs:
        assert sim.stores[ref].holds(TOPIC, ack.key), ref
    assert sim.nodes[outsider].handover.counters["succeeded"] == 1


def test_a_member_that_crashes_before_its_commit_loses_nothing_acknowledged() -> None:
    """The member chosen first dies after receiving the hand-over but before its commit:
    it never acknowledged, so the non-member tries another member, and the client's ack
    names a member that holds the publication durably."""
    sim, refs, outsider = ring_with_outsider(seed=11)
    sim.publish_request(outsider, TOPIC, b"survives a crash", client=1, request_id=1)
    victim: Ref | None = None
    for _ in range(200):  # until the first member has the hand-over in hand
        sim.run_for(0.01)
        got = sends(sim, outsider, HandOver)
        if got:
            victim = got[0][1]
            break
    assert victim is not None
    deadline = sim.now + 0.2
    while sim.now < deadline and not sim.nodes[victim].holds(TOPIC, got[0][2].publication):
        sim.run_for(0.005)
    assert commit_time(sim, victim, got[0][2].publication.key) is None
    sim.crash(victim)
    sim.run_for(30.0)
    [(_, node, answer)] = sim.answers
    assert node == outsider
    ack = answer.msg
    assert isinstance(ack, PublishAck), ack
    assert ack.stored_by != victim and ack.stored_by in refs
    assert sim.stores[ack.stored_by].holds(TOPIC, ack.key)
    assert sim.nodes[outsider].handover.counters["retries"] >= 1
    for ref in refs:
        if ref != victim:
            assert sim.stores[ref].holds(TOPIC, ack.key), ref


def test_a_topic_without_members_fails_at_once() -> None:
    sim, _, outsider = ring_with_outsider(seed=2)
    sim.publish_request(outsider, Topic("nobody"), b"x", client=4, request_id=3)
    sim.run_for(3.0)
    [(_, node, answer)] = sim.answers
    assert node == outsider and isinstance(answer.msg, PublishFailed)
    assert answer.msg.code == "no_members" and answer.msg.id == 3
