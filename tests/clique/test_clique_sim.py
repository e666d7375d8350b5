"""The clique overlay in the simulator (`pubsub.clique`, on `pubsub.sim.world`).

Its legitimate state is judged by an oracle written here from the definition alone, not by
the overlay's own check: the supervisor's members are exactly the live subscribers, and
every member holds exactly the supervisor's list and can reach everyone in it.  The shared
publication layer is the skip ring's, unchanged: the tests check what it must give on a
complete graph (one hop, n - 1 messages per publication with the arc broadcast) and that
anti-entropy, hand-overs, leaves and crashes work as they do on the ring.
"""

from __future__ import annotations

import random

import pytest

from pubsub.clique.messages import CliqueJoin, CliqueLeave, CliqueMembers, validate_members
from pubsub.clique.mode import legitimate
from pubsub.clique.supervisor import CliqueSupervisor
from pubsub.kernel import wire
from pubsub.kernel.effects import Answer
from pubsub.kernel.message import Ref, Topic
from pubsub.kernel.wire import WireError
from pubsub.publications.messages import PublishAck
from pubsub.sim.scenarios import fresh_start
from pubsub.sim.world import SUPERVISOR, Simulation
from tests.simhelpers import retention_changed

TOPIC = Topic("t")


def oracle(sim: Simulation, topic: Topic) -> list[str]:
    """Why `topic` is not a legitimate clique ([] when it is), from the definition."""
    wanted = sorted(ref for ref, node in sim.nodes.items() if topic in node.wanted_topics)
    listed = list(sim.supervisor.topics.get(topic, []))
    problems = []
    if sorted(listed) != wanted:
        problems.append(f"supervisor lists {sorted(listed)}, subscribers are {wanted}")
    for ref in wanted:
        state = sim.nodes[ref].overlay.topics_run.get(topic)
        if state is None or state.members != tuple(listed):
            problems.append(f"{ref} holds {None if state is None else state.members}")
        elif state.unreachable:
            problems.append(f"{ref} cannot reach {sorted(state.unreachable)}")
    return problems


def converged(sim: Simulation, topic: Topic, intervals: int = 60) -> int:
    done = sim.run_intervals_until(lambda: not oracle(sim, topic), intervals)
    assert done is not None, oracle(sim, topic)
    return done


def statuses(sim: Simulation, topic: Topic) -> dict[str, object]:
    return {
        ref: node.status()["topics"][topic]
        for ref, node in sim.nodes.items()
        if topic in node.status()["topics"]
    }


def clique(n: int, seed: int, **options: object) -> tuple[Simulation, list[Ref]]:
    sim = Simulation(seed, overlay="clique", keep_rows=True, **options)  # type: ignore[arg-type]
    refs = fresh_start(sim, n, TOPIC)
    converged(sim, TOPIC)
    for ref in refs:
        sim.take_rows(ref)
    return sim, refs


@pytest.mark.parametrize("n", [1, 2, 5, 16, 40])
def test_a_fresh_clique_becomes_legitimate_and_its_own_check_agrees(n: int) -> None:
    sim, refs = clique(n, seed=n)
    assert legitimate(sim.supervisor.status(), statuses(sim, TOPIC), TOPIC) == []
    sim.run_for(5 * sim.interval)
    assert oracle(sim, TOPIC) == []  # and it stays so (closure)


@pytest.mark.parametrize("n", [2, 3, 8, 33])
def test_the_arc_broadcast_reaches_every_member_in_one_hop_with_n_minus_1_messages(n: int) -> None:
    sim, refs = clique(n, seed=100 + n, dissemination="tree", delay=(0.01, 0.01))
    rng = random.Random(n)
    for round_ in range(4):
        publisher = rng.choice(refs)
        before = sim.traffic.by_kind["spread"], sim.traffic.by_kind["publish_new"]
        sim.publish(publisher, TOPIC, f"p{round_}".encode())
        sim.run_for(0.5)
        assert sim.traffic.by_kind["spread"] - before[0] == n - 1
        assert sim.traffic.by_kind["publish_new"] == before[1]  # no fallback to flooding
        rows = {ref: sim.take_rows(ref) for ref in refs}
        assert all(len(got) == 1 for got in rows.values())  # every member stored it, once
        assert max(got[0].hops or 0 for got in rows.values()) <= 1 + 1  # the publisher's own hop
    assert sum(node.publications[TOPIC].counters["spread_fallbacks"] for node in sim.nodes.values()) == 0


def test_anti_entropy_alone_delivers_with_a_random_member_as_partner() -> None:
    sim, refs = clique(12, seed=7, flooding=False)
    for i, ref in enumerate(refs[:3]):
        sim.publish(ref, TOPIC, f"only anti-entropy {i}".encode())
    done = sim.run_intervals_until(
        lambda: all(len(node.publications[TOPIC].trie) == 3 for node in sim.nodes.values()), 60
    )
    assert done is not None
    assert sim.traffic.by_kind["spread"] == 0 and sim.traffic.by_kind["publish_new"] == 0


def test_a_member_that_leaves_is_let_go_and_the_others_keep_every_publication() -> None:
    sim, refs = clique(8, seed=3, dissemination="tree")
    leaver = refs[2]
    sim.leave(leaver, TOPIC)
    converged(sim, TOPIC)
    assert TOPIC not in sim.nodes[leaver].publications  # released: its core is gone
    assert not sim.nodes[leaver].overlay.runs(TOPIC)
    sim.publish(refs[0], TOPIC, b"after the leave")
    sim.run_for(2 * sim.interval)
    assert all(len(sim.nodes[r].publications[TOPIC].trie) == 1 for r in refs if r != leaver)


def test_a_crashed_member_is_probed_and_removed_and_the_rest_hold_everything() -> None:
    sim, refs = clique(10, seed=11, dissemination="tree", probe_timeout=2.0)
    sim.publish(refs[0], TOPIC, b"before the crash")
    sim.run_for(sim.interval)
    dead = refs[5]
    sim.crash(dead)
    sim.publish(refs[1], TOPIC, b"after the crash")  # its Spread to the dead member goes unanswered
    converged(sim, TOPIC, intervals=40)
    assert dead not in sim.supervisor.topics[TOPIC]
    assert sim.supervisor.counters["crashes_detected"] == 1
    sim.run_for(2 * sim.interval)
    assert all(len(node.publications[TOPIC].trie) == 2 for node in sim.nodes.values())


def test_a_non_member_hands_its_publication_over_to_a_member() -> None:
    sim, refs = clique(6, seed=5, dissemination="tree", commit_delay=0.01)
    outsider = sim.add_node()
    sim.publish_request(outsider, TOPIC, b"handed over", client=9, request_id=4)
    sim.run_for(3 * sim.interval)
    (answer,) = [a for _, ref, a in sim.answers if ref == outsider]
    assert isinstance(answer, Answer) and isinstance(answer.msg, PublishAck)
    assert answer.msg.stored_by in refs and answer.msg.durable
    assert all(len(sim.nodes[r].publications[TOPIC].trie) == 1 for r in refs)
    assert TOPIC not in sim.nodes[outsider].publications


def test_a_publication_at_a_member_is_acknowledged_after_its_commit_with_its_local_number() -> None:
    sim, refs = clique(4, seed=9, commit_delay=0.05, trace=True, dissemination="tree")
    sim.publish_request(refs[0], TOPIC, b"durable first", client=1, request_id=1)
    sim.run_for(1.0)
    (answer,) = [a for _, ref, a in sim.answers if ref == refs[0]]
    assert isinstance(answer.msg, PublishAck) and answer.msg.local_seq == 1
    assert sim.log is not None
    commit = next(i for i, entry in enumerate(sim.log) if entry[1] == "commit" and entry[2] == refs[0] and entry[3])
    first_spread = next(
        i for i, entry in enumerate(sim.log) if entry[1] == "send" and entry[2] == refs[0] and entry[3][1].kind == "spread"
    )
    assert commit < first_spread  # persist, then spread


def test_the_supervisor_rebuilds_its_membership_from_what_it_stored() -> None:
    first = CliqueSupervisor(Ref("s:1"), rng=random.Random(1))
    for ref in ("a:1", "b:1", "c:1"):
        first.handle(CliqueJoin(TOPIC, Ref(ref)), 0.0)
    first.handle(CliqueLeave(TOPIC, Ref("b:1")), 0.0)
    rows: dict[tuple[str, str], str | None] = {}
    for topic, key, value in first.drain_changes():
        rows[(topic, key)] = value
    stored = [(topic, key, value) for (topic, key), value in rows.items() if value is not None]
    again = CliqueSupervisor(Ref("s:1"), rng=random.Random(1))
    again.load(stored)
    assert again.topics == {TOPIC: [Ref("a:1"), Ref("c:1")]}


def test_the_codec_refuses_malformed_member_lists() -> None:
    good = CliqueMembers(TOPIC, validate_members(["h:1", "h:2"]))
    assert wire.decode(wire.encode(good)[wire.HEADER_SIZE :]) == good
    for bad in (["h:1", "h:1"], ["not a ref"], [1, 2], "h:1", ["h:1"] * 1025):
        with pytest.raises(WireError):
            validate_members(bad)
        frame = wire.pack({"v": 1, "t": "clique_members", "topic": "t", "members": bad})
        with pytest.raises(WireError):
            wire.decode(frame)


def test_the_simulated_supervisor_is_the_cliques() -> None:
    sim = Simulation(1, overlay="clique")
    assert isinstance(sim.supervisor, CliqueSupervisor) and sim.supervisor.ref == SUPERVISOR



def test_retention_settings_reach_every_member_and_bound_what_each_keeps() -> None:
    """The supervisor's retention settings (shared with the skip ring) go to every member;
    each then keeps the same newest two of six publications."""
    sim, refs = clique(5, seed=21, dissemination="tree")
    for i in range(6):
        sim.publish(refs[i % 5], TOPIC, f"kept or not {i}".encode())
        sim.run_for(0.5)
    assert all(len(sim.nodes[r].publications[TOPIC].trie) == 6 for r in refs)
    sim.carry_out(SUPERVISOR, retention_changed(sim.supervisor, TOPIC, max_count=2, wall_ms=int(sim.now * 1000)))
    sim.run_for(3 * sim.interval)
    kept = {r: {p.key for p in sim.nodes[r].publications[TOPIC].publications()} for r in refs}
    assert all(len(keys) == 2 for keys in kept.values())
    assert len({frozenset(keys) for keys in kept.values()}) == 1  # the same two everywhere
