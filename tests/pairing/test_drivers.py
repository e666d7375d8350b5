"""The drivers of `pubsub.sim.pairing` on small graphs whose outcome can be worked out by
hand, and their checks of §2's model."""

from __future__ import annotations

import random

import pytest

from pubsub.pairing.messages import Kind, Message
from pubsub.pairing.node import PairingNode
from pubsub.pairing.states import Direction, Line, State
from pubsub.sim import pairing as sim
from pubsub.sim.pairing import Graph, async_phase, contract, run, sync_phase, weakly_connected
from tests.pairing.helpers import Coins


def test_two_nodes_one_knowing_the_other_pair_in_one_phase() -> None:
    """0 knows 1: 1 accepts 0's probe, hears no_pair, has no successor, so proposes to 0,
    which was never probed and accepts."""
    for coin in Direction:
        phase = sync_phase({0: {1}, 1: set()}, Coins([coin]))
        assert phase.pairs == [(0, 1)] and not phase.problems
        assert phase.nodes[1].chosen is Direction.PRED
        assert dict(phase.messages) == {"probe": 1, "accept": 2, "no_pair": 1, "propose": 1}
        assert phase.duration == 5  # rounds: probe, accept, no_pair, propose, accept


def test_a_star_pairs_its_leaves_off_through_the_centre() -> None:
    """The centre knows five leaves: all accept, four are paired two by two by line 3, the
    fifth is kept and proposes back to the centre, never probed, which accepts."""
    graph: Graph = {0: {1, 2, 3, 4, 5}, **{leaf: set() for leaf in range(1, 6)}}
    phase = sync_phase(graph, random.Random(1))
    assert phase.pairs == [(0, 5), (1, 2), (3, 4)]
    assert phase.paired_fraction == 1.0


@pytest.mark.parametrize("coin", list(Direction))
def test_a_directed_cycle_with_every_coin_the_same_way_pairs_nobody(coin: Direction) -> None:
    """Each node is the one kept successor of the one before; every proposal goes against the
    coin of its receiver and is refused, and each refuser is dropped -- the cycle still holds
    together through the probers added on the way."""
    graph: Graph = {0: {1}, 1: {2}, 2: {0}}
    for phase in (sync_phase(graph, Coins([coin])), sync_phase(graph, Coins([coin]), sends_per_round=0)):
        assert phase.pairs == [] and not phase.problems
        assert phase.messages["reject_propose"] == 3
        assert all(n.line is Line.RESTART for n in phase.nodes.values())
        assert weakly_connected(contract(phase))


def test_a_directed_cycle_with_alternating_coins_pairs_neighbours_whose_coins_meet() -> None:
    graph: Graph = {0: {1}, 1: {2}, 2: {3}, 3: {0}}
    coins = Coins([Direction.SUCC, Direction.PRED, Direction.SUCC, Direction.PRED])  # nodes 0, 1, 2, 3
    phase = sync_phase(graph, coins)
    assert phase.pairs == [(0, 1), (2, 3)]


def test_a_proposal_held_by_a_probed_node_is_answered_after_its_notice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asynchronously, a node can hear a proposal from its kept successor before its own
    predecessor's notice: it holds it (PROPOSED), and no phase ends with one still held."""
    seen: set[State] = set()
    original = sim.handle

    def traced(node: PairingNode, msg: Message) -> list[Message]:
        out = original(node, msg)
        seen.add(node.state)
        return out

    monkeypatch.setattr(sim, "handle", traced)
    for seed in range(30):
        phase = async_phase(sim.knowledge_graph(40, random.Random(seed)), random.Random(seed))
        assert not phase.problems
        assert all(n.state is not State.PROPOSED for n in phase.nodes.values())
    assert State.PROPOSED in seen


def test_a_send_to_an_identity_the_sender_never_learned_breaks_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    original = sim.begin

    def leaky(node: PairingNode, rng: random.Random) -> list[Message]:
        sends = original(node, rng)
        if node.ident == 0:
            sends.append(Message(0, 2, Kind.PROBE))  # 0 knows only 1
        return sends

    monkeypatch.setattr(sim, "begin", leaky)
    graph: Graph = {0: {1}, 1: {2}, 2: set()}
    with pytest.raises(sim.ModelViolation, match="does not know"):
        sync_phase(graph, random.Random(0))
    with pytest.raises(sim.ModelViolation, match="does not know"):
        async_phase(graph, random.Random(0))


def test_contract_joins_pairs_under_the_smaller_identity_with_both_neighbour_sets() -> None:
    phase = sync_phase({0: {1}, 1: set(), 2: {1}, 3: {2}}, random.Random(3))
    merged = contract(phase)
    assert len(merged) == 4 - len(phase.pairs)
    for a, b in phase.pairs:
        assert b not in merged and a in merged and a not in merged[a]
    assert weakly_connected(merged)
    assert all(v in merged for targets in merged.values() for v in targets)


def test_run_rejects_an_unknown_driver() -> None:
    with pytest.raises(ValueError, match="driver"):
        run({0: set()}, "gossip", random.Random(0))


def test_run_on_one_node_has_no_phase() -> None:
    result = run({0: set()}, "async", random.Random(0))
    assert result.finished and result.phases == []
