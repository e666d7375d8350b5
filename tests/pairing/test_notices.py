"""The pair and no_pair daemons (INFERRED: paper 004's copy ends before them): what a node
does with its predecessor's one notice."""

from __future__ import annotations

import pytest

from pubsub.pairing.messages import Kind
from pubsub.pairing.node import ProtocolViolation
from pubsub.pairing.notices import on_no_pair, on_pair
from pubsub.pairing.states import Direction, State
from tests.pairing.helpers import msg, node


def test_pair_makes_a_probed_node_paired_with_the_named_partner() -> None:
    u = node(1, state=State.PROBED, pred=3)
    assert on_pair(u, msg(3, 1, Kind.PAIR, 8)) == []
    assert u.state is State.PAIRED and u.obj == 8


def test_pair_makes_a_proposed_node_answer_its_held_proposal_with_paired() -> None:
    u = node(1, state=State.PROPOSED, pred=3, succ=5, chosen=Direction.SUCC, waiting=5)
    assert on_pair(u, msg(3, 1, Kind.PAIR, 8)) == [msg(1, 5, Kind.PAIRED)]
    assert u.state is State.PAIRED and u.obj == 8 and u.waiting is None


def test_no_pair_makes_a_probed_node_proposing() -> None:
    u = node(1, state=State.PROBED, pred=3)
    assert on_no_pair(u, msg(3, 1, Kind.NO_PAIR)) == []
    assert u.state is State.PROPOSING


def test_no_pair_makes_a_proposed_node_accept_its_held_proposal() -> None:
    u = node(1, state=State.PROPOSED, pred=3, succ=5, chosen=Direction.SUCC, waiting=5)
    assert on_no_pair(u, msg(3, 1, Kind.NO_PAIR)) == [msg(1, 5, Kind.ACCEPT)]
    assert u.state is State.PAIRED and u.obj == 5 and u.waiting is None


@pytest.mark.parametrize("state", [State.ISOLATED, State.PROPOSING, State.PAIRED])
def test_a_notice_in_another_state_breaks_the_model(state: State) -> None:
    u = node(1, state=state, pred=3)
    with pytest.raises(ProtocolViolation):
        on_no_pair(u, msg(3, 1, Kind.NO_PAIR))
    with pytest.raises(ProtocolViolation):
        on_pair(u, msg(3, 1, Kind.PAIR, 8))


def test_a_notice_from_anyone_but_the_predecessor_breaks_the_model() -> None:
    u = node(1, state=State.PROBED, pred=3)
    with pytest.raises(ProtocolViolation):
        on_no_pair(u, msg(4, 1, Kind.NO_PAIR))
