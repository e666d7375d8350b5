"""The propose daemon (paper 004 §3.1.1): the copy's ISOLATED and PROBED cases, and the
INFERRED ones (PROPOSING, PAIRED, PROPOSED) from the state descriptions."""

from __future__ import annotations

import pytest

from pubsub.pairing.messages import Kind
from pubsub.pairing.node import ProtocolViolation
from pubsub.pairing.propose import on_propose
from pubsub.pairing.states import Direction, State
from tests.pairing.helpers import msg, node


def test_isolated_accepts_at_once_and_is_paired_with_the_proposer() -> None:
    u = node(1, chosen=Direction.SUCC, succ=9)
    assert on_propose(u, msg(5, 1, Kind.PROPOSE)) == [msg(1, 5, Kind.ACCEPT)]
    assert u.state is State.PAIRED and u.obj == 5  # whatever its coin says


def test_probed_holds_a_proposal_from_where_its_coin_points() -> None:
    u = node(1, state=State.PROBED, pred=3, succ=5, chosen=Direction.SUCC)
    assert on_propose(u, msg(5, 1, Kind.PROPOSE)) == []  # no answer yet
    assert u.state is State.PROPOSED and u.waiting == 5


@pytest.mark.parametrize(("chosen", "proposer"), [(Direction.PRED, 5), (Direction.SUCC, 7)])
def test_probed_refuses_a_proposal_its_coin_does_not_point_to(chosen: Direction, proposer: int) -> None:
    u = node(1, state=State.PROBED, pred=3, succ=5, chosen=chosen, neighbors={5})
    assert on_propose(u, msg(proposer, 1, Kind.PROPOSE)) == [msg(1, proposer, Kind.REJECT_PROPOSE)]
    assert u.state is State.PROBED and u.waiting is None


@pytest.mark.parametrize(("chosen", "proposer"), [(Direction.PRED, 3), (Direction.SUCC, 5)])
def test_inferred_proposing_accepts_a_proposal_from_where_its_coin_points(chosen: Direction, proposer: int) -> None:
    u = node(1, state=State.PROPOSING, pred=3, succ=5, chosen=chosen)
    assert on_propose(u, msg(proposer, 1, Kind.PROPOSE)) == [msg(1, proposer, Kind.ACCEPT)]
    assert u.state is State.PAIRED and u.obj == proposer


@pytest.mark.parametrize(("chosen", "proposer"), [(Direction.PRED, 5), (Direction.SUCC, 3)])
def test_inferred_proposing_refuses_a_proposal_against_its_coin(chosen: Direction, proposer: int) -> None:
    u = node(1, state=State.PROPOSING, pred=3, succ=5, chosen=chosen)
    assert on_propose(u, msg(proposer, 1, Kind.PROPOSE)) == [msg(1, proposer, Kind.REJECT_PROPOSE)]
    assert u.state is State.PROPOSING


def test_inferred_proposing_without_its_successor_yet_refuses_a_successor_side_coin() -> None:
    """Line 3 not run yet: ``succ`` unknown, so nothing matches a coin on the successor side."""
    u = node(1, state=State.PROPOSING, pred=3, chosen=Direction.SUCC)
    assert on_propose(u, msg(3, 1, Kind.PROPOSE)) == [msg(1, 3, Kind.REJECT_PROPOSE)]


def test_inferred_paired_refuses_with_paired() -> None:
    u = node(1, state=State.PAIRED, obj=4, pred=3, succ=5, chosen=Direction.SUCC)
    assert on_propose(u, msg(5, 1, Kind.PROPOSE)) == [msg(1, 5, Kind.PAIRED)]
    assert u.state is State.PAIRED and u.obj == 4


def test_inferred_a_second_proposal_to_a_proposed_node_breaks_the_model() -> None:
    u = node(1, state=State.PROPOSED, pred=3, succ=5, chosen=Direction.SUCC, waiting=5)
    with pytest.raises(ProtocolViolation):
        on_propose(u, msg(3, 1, Kind.PROPOSE))
