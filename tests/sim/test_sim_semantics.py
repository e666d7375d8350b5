"""Client semantics in the simulator (issue 12): message ids make a retried publish a
duplicate instead of a second publication, and every node stores each publisher's
publications in their sequence order -- a late joiner filled by anti-entropy included, and
with messages lost.  (The same with real processes: tests/integration/test_semantics.py.)"""

from __future__ import annotations

import pytest

from pubsub.kernel.message import Ref, Topic
from pubsub.publications.messages import PublishAck, PublishFailed
from pubsub.sim.scenarios import fresh_start
from pubsub.sim.world import Simulation
from tests.simhelpers import settle

T = Topic("t")


def settled(seed: int, members: int, **options: object) -> tuple[Simulation, list[Ref]]:
    sim = Simulation(seed, delay=(0.01, 0.05), commit_delay=0.05, **options)  # type: ignore[arg-type]
    refs = fresh_start(sim, members, T)
    settle(sim, T, max_intervals=600)
    return sim, refs


def stored_order(sim: Simulation, ref: Ref) -> list[tuple[Ref, int]]:
    """(publisher, seq) of what `ref` wrote, in the order it wrote them."""
    return [
        (a.publication.publisher, a.publication.seq) for a in sim.stores[ref].written.get(T, {}).values()
    ]


def out_of_order(order: list[tuple[Ref, int]]) -> list[tuple[Ref, int]]:
    """The entries that come after a later publication of the same publisher."""
    top: dict[Ref, int] = {}
    bad = []
    for publisher, seq in order:
        if seq < top.get(publisher, -1):
            bad.append((publisher, seq))
        top[publisher] = max(top.get(publisher, -1), seq)
    return bad


def test_a_retried_message_id_is_answered_as_a_duplicate_and_stored_once() -> None:
    sim, refs = settled(seed=11, members=5)
    outsider = sim.add_node("outsider")
    sim.run_for(1.0)
    sim.publish_request(refs[0], T, b"once", client=1, request_id=1, msg_id="order-17")
    sim.run_for(0.01)
    # the retry while the first is still being written waits for the first's outcome
    sim.publish_request(refs[0], T, b"once", client=1, request_id=2, msg_id="order-17")
    sim.run_for(3.0)
    # a retry after the acknowledgement; one at another member that holds it by now; one
    # through a node that is not a member (hand-over: the member answers by the id too)
    sim.publish_request(refs[0], T, b"once", client=1, request_id=3, msg_id="order-17")
    sim.publish_request(refs[3], T, b"once", client=2, request_id=4, msg_id="order-17")
    sim.publish_request(outsider, T, b"once", client=3, request_id=5, msg_id="order-17")
    sim.run_for(3.0)
    answers = {a.msg.id: a.msg for _, _, a in sim.answers}
    assert set(answers) == {1, 2, 3, 4, 5}
    acks = [answers[i] for i in (1, 2, 3, 4, 5)]
    assert all(isinstance(a, PublishAck) for a in acks), acks
    keys = {a.key for a in acks if isinstance(a, PublishAck)}
    assert len(keys) == 1
    assert [a.duplicate for a in acks if isinstance(a, PublishAck)] == [False, True, True, True, True]
    sim.run_for(3.0)
    for ref in refs:
        ids = [a.publication.msg_id for a in sim.stores[ref].written.get(T, {}).values()]
        assert ids.count("order-17") == 1, ref
    assert outsider not in sim.stores or not sim.stores[outsider].written.get(T)


def test_a_definite_failure_leaves_nothing_and_a_retry_publishes_afresh() -> None:
    sim, refs = settled(seed=12, members=3)
    outsider = sim.add_node("outsider")
    sim.run_for(1.0)
    sim.publish_request(outsider, Topic("nobody"), b"x", client=1, request_id=1, msg_id="m")
    sim.run_for(3.0)
    [(_, _, answer)] = sim.answers
    assert isinstance(answer.msg, PublishFailed) and answer.msg.code == "no_members"
    assert all(not s.written.get(Topic("nobody")) for s in sim.stores.values())


@pytest.mark.parametrize("drop_rate", [0.0, 0.1])
def test_every_node_stores_each_publishers_publications_in_sequence_order(drop_rate: float) -> None:
    sim, refs = settled(seed=13, members=8)
    sim.drop_rate = drop_rate
    publishers = refs[:3]
    for round_ in range(40):
        for i, ref in enumerate(publishers):
            sim.publish_request(ref, T, f"{i}-{round_}".encode(), client=i, request_id=round_)
        sim.run_for(0.02)
    late = sim.add_node("late")
    sim.join(late, T)
    sim.drop_rate = 0.0
    sim.run_for(60.0)
    everyone = [*refs, late]
    for ref in everyone:
        order = stored_order(sim, ref)
        assert len(order) == 120, (ref, len(order))
        late_releases = sim.nodes[ref].sequencer.counters["released_late"]
        # Only a predecessor that did not come within the wait may be overtaken.
        assert len(out_of_order(order)) <= late_releases, (ref, out_of_order(order))
    # The late joiner got all 120 by anti-entropy, in key order, and stored them in order.
    assert out_of_order(stored_order(sim, late)) == []
    assert sim.nodes[late].sequencer.counters["waited"] > 0
