"""The probe daemon (paper 004 §3.1.1): the first probe is accepted and its sender becomes the
predecessor; every later one is rejected; every prober becomes a neighbour."""

from __future__ import annotations

import pytest

from pubsub.pairing.messages import Kind
from pubsub.pairing.probe import on_probe
from pubsub.pairing.protocol import handle
from pubsub.pairing.states import Line, State
from tests.pairing.helpers import msg, node


def test_an_isolated_node_accepts_its_first_probe_and_takes_the_prober_as_predecessor() -> None:
    u = node(1, neighbors={5})
    assert on_probe(u, msg(7, 1, Kind.PROBE)) == [msg(1, 7, Kind.ACCEPT)]
    assert u.state is State.PROBED and u.pred == 7
    assert u.neighbors == {5, 7}


def test_a_second_probe_is_rejected_and_the_predecessor_stays() -> None:
    u = node(1)
    on_probe(u, msg(7, 1, Kind.PROBE))
    assert on_probe(u, msg(8, 1, Kind.PROBE)) == [msg(1, 8, Kind.REJECT)]
    assert u.state is State.PROBED and u.pred == 7
    assert u.neighbors == {7, 8}  # the rejected prober is still learned


@pytest.mark.parametrize("state", [State.PROBED, State.PROPOSED, State.PROPOSING, State.PAIRED])
def test_every_state_but_isolated_rejects_and_keeps_its_state(state: State) -> None:
    u = node(1, state=state, pred=3, obj=4 if state is State.PAIRED else None)
    assert on_probe(u, msg(9, 1, Kind.PROBE)) == [msg(1, 9, Kind.REJECT)]
    assert u.state is state and u.pred == 3 and 9 in u.neighbors


def test_a_probe_is_answered_wherever_the_main_thread_waits() -> None:
    for line in (Line.AWAIT_REPLIES, Line.AWAIT_STATE, Line.AWAIT_ANSWER, Line.MERGE, Line.RESTART):
        u = node(1, line=line, probed={2} if line is Line.AWAIT_REPLIES else set(), proposed_to=2)
        assert handle(u, msg(6, 1, Kind.PROBE)) == [msg(1, 6, Kind.ACCEPT)]
        assert u.line is line
