"""The main thread (paper 004 §3.1.1, lines 1-7): the coin, the waits of lines 2, 4 and 5,
the proposal and what each answer does, and where the thread stops."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pubsub.pairing.mainthread import advance, begin
from pubsub.pairing.messages import Kind
from pubsub.pairing.node import ProtocolViolation
from pubsub.pairing.protocol import handle
from pubsub.pairing.states import Direction, Line, State
from tests.pairing.helpers import Coins, msg, node


def test_line_1_flips_a_fair_coin_and_resets_the_phase() -> None:
    rng = random.Random(4)
    seen: Counter[Direction] = Counter()
    for _ in range(2000):
        u = node(1, neighbors={2}, line=Line.RESTART, state=State.PROPOSING, pred=7, succ=2, obj=None, waiting=3)
        begin(u, rng)
        seen[u.chosen] += 1
        assert u.state is State.ISOLATED and u.pred is u.succ is u.obj is u.waiting is None
        assert u.line is Line.AWAIT_REPLIES and u.probed == {2}
    assert 900 < seen[Direction.PRED] < 1100


def test_a_node_never_probes_itself() -> None:
    u = node(1, neighbors={1, 2}, line=Line.START)
    assert begin(u, Coins([Direction.PRED])) == [msg(1, 2, Kind.PROBE)]


@pytest.mark.parametrize("state", [State.ISOLATED, State.PROBED, State.PROPOSED])
def test_line_4_waits_while_isolated_probed_or_proposed(state: State) -> None:
    """PROPOSED is INFERRED: going on would restart the node with a proposal unanswered."""
    u = node(1, state=state, pred=3, succ=5, chosen=Direction.SUCC, waiting=5 if state is State.PROPOSED else None)
    assert advance(u) == [] and u.line is Line.AWAIT_STATE


@pytest.mark.parametrize(("chosen", "target"), [(Direction.PRED, 3), (Direction.SUCC, 5)])
def test_proposing_at_line_5_proposes_the_way_the_coin_points(chosen: Direction, target: int) -> None:
    u = node(1, state=State.PROBED, pred=3, succ=5, chosen=chosen)
    assert handle(u, msg(3, 1, Kind.NO_PAIR)) == [msg(1, target, Kind.PROPOSE)]
    assert u.state is State.PROPOSING and u.line is Line.AWAIT_ANSWER and u.proposed_to == target


def test_an_accepted_proposal_pairs_and_stops_at_line_6() -> None:
    u = node(1, state=State.PROPOSING, succ=5, pred=3, chosen=Direction.SUCC, line=Line.AWAIT_ANSWER,
             proposed_to=5, neighbors={5})
    assert handle(u, msg(5, 1, Kind.ACCEPT)) == []
    assert u.state is State.PAIRED and u.obj == 5 and u.line is Line.MERGE


def test_reject_propose_drops_the_refuser_from_the_neighbours_and_stops_at_line_7() -> None:
    u = node(1, state=State.PROPOSING, succ=5, pred=3, chosen=Direction.SUCC, line=Line.AWAIT_ANSWER,
             proposed_to=5, neighbors={5, 3})
    handle(u, msg(5, 1, Kind.REJECT_PROPOSE))
    assert u.neighbors == {3} and u.state is State.PROPOSING and u.line is Line.RESTART


def test_paired_as_an_answer_keeps_the_neighbour_and_stops_at_line_7() -> None:
    u = node(1, state=State.PROPOSING, succ=5, pred=3, chosen=Direction.SUCC, line=Line.AWAIT_ANSWER,
             proposed_to=5, neighbors={5, 3})
    handle(u, msg(5, 1, Kind.PAIRED))
    assert u.neighbors == {5, 3} and u.line is Line.RESTART and u.obj is None


def test_crossing_proposals_pair_the_two_once() -> None:
    """Both propose to each other: each accepts the other's, then reads the other's accept."""
    u = node(1, state=State.PROPOSING, succ=5, pred=3, chosen=Direction.SUCC, line=Line.AWAIT_ANSWER, proposed_to=5)
    assert handle(u, msg(5, 1, Kind.PROPOSE)) == [msg(1, 5, Kind.ACCEPT)]
    assert u.state is State.PAIRED and u.line is Line.AWAIT_ANSWER
    handle(u, msg(5, 1, Kind.ACCEPT))
    assert u.obj == 5 and u.line is Line.MERGE


def test_paired_at_rest_on_line_7_moves_on_to_line_6() -> None:
    u = node(1, state=State.PROPOSING, succ=5, pred=3, chosen=Direction.SUCC, line=Line.RESTART)
    assert handle(u, msg(5, 1, Kind.PROPOSE)) == [msg(1, 5, Kind.ACCEPT)]
    assert u.line is Line.MERGE and u.obj == 5


def test_paired_by_the_predecessor_while_still_probing_still_tells_its_successors() -> None:
    """Line 3 runs even when a pair notice came first, so nobody waits on it for ever."""
    u = node(1, neighbors={5, 6, 7}, line=Line.START)
    begin(u, Coins([Direction.SUCC]))
    handle(u, msg(3, 1, Kind.PROBE))
    handle(u, msg(3, 1, Kind.PAIR, 8))
    assert u.state is State.PAIRED and u.line is Line.AWAIT_REPLIES
    handle(u, msg(5, 1, Kind.ACCEPT))
    handle(u, msg(6, 1, Kind.ACCEPT))
    sends = handle(u, msg(7, 1, Kind.ACCEPT))
    assert sends == [msg(1, 5, Kind.PAIR, 6), msg(1, 6, Kind.PAIR, 5), msg(1, 7, Kind.NO_PAIR)]
    assert u.line is Line.MERGE and u.obj == 8


def test_answers_nobody_asked_for_break_the_model() -> None:
    u = node(1, neighbors={5}, line=Line.START)
    begin(u, Coins([Direction.PRED]))
    with pytest.raises(ProtocolViolation):
        handle(u, msg(6, 1, Kind.ACCEPT))  # never probed 6
    with pytest.raises(ProtocolViolation):
        handle(u, msg(5, 1, Kind.REJECT_PROPOSE))  # proposed to nobody
    with pytest.raises(ProtocolViolation):
        handle(node(2, line=Line.START), msg(5, 2, Kind.PROBE))  # not begun
