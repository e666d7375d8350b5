"""Line 3 of the main thread (paper 004 §3.1.1): the k successors that accepted the probes,
v1 .. vk in the order their answers came, are paired off two by two (v1 with v2, v3 with v4,
...); with k odd the last one is kept as ``succ`` and told ``no_pair``, with k even none is
kept and ``chosen`` is set to pred.  The copy's pseudo-code, for k = 0 .. 5."""

from __future__ import annotations

import pytest

from pubsub.pairing.mainthread import begin, pair_successors
from pubsub.pairing.messages import Kind
from pubsub.pairing.protocol import handle
from pubsub.pairing.states import Direction, Line, State
from tests.pairing.helpers import Coins, msg, node

V = [11, 12, 13, 14, 15]

#: k -> (pair messages, kept successor or None).
EXPECTED = {
    0: ([], None),
    1: ([], 11),
    2: ([(11, 12), (12, 11)], None),
    3: ([(11, 12), (12, 11)], 13),
    4: ([(11, 12), (12, 11), (13, 14), (14, 13)], None),
    5: ([(11, 12), (12, 11), (13, 14), (14, 13)], 15),
}


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 0])
def test_successor_pairing_for_k_accepting_successors(k: int) -> None:
    u = node(1, line=Line.AWAIT_REPLIES, chosen=Direction.SUCC, accepted=V[:k])
    sends = pair_successors(u)
    pairs, kept = EXPECTED[k]
    assert [m for m in sends if m.kind is Kind.PAIR] == [msg(1, a, Kind.PAIR, b) for a, b in pairs]
    assert u.succ == kept
    if kept is None:
        assert u.chosen is Direction.PRED  # nobody to propose to on the successor side
        assert all(m.kind is Kind.PAIR for m in sends)
    else:
        assert u.chosen is Direction.SUCC  # the coin stands
        assert sends[-1] == msg(1, kept, Kind.NO_PAIR) and len(sends) == len(pairs) + 1
    paired = {m.receiver for m in sends if m.kind is Kind.PAIR}
    assert len(paired) == 2 * (k // 2) and kept not in paired  # nobody told twice


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_successors_are_numbered_in_the_order_their_accepts_arrive_and_rejects_do_not_count(k: int) -> None:
    """Through the whole thread: six neighbours probed, k of them accept (in reverse identity
    order), the others reject; line 3 runs when the last answer is in."""
    neighbours = [21, 22, 23, 24, 25, 26]
    u = node(1, neighbors=neighbours, line=Line.START)
    probes = begin(u, Coins([Direction.SUCC]))
    assert probes == [msg(1, v, Kind.PROBE) for v in neighbours] and u.line is Line.AWAIT_REPLIES
    accepting = list(reversed(neighbours))[:k]
    rejecting = [v for v in neighbours if v not in accepting]
    sends = []
    for v in accepting[:-1] + rejecting + accepting[-1:]:
        assert u.line is Line.AWAIT_REPLIES and not sends  # line 3 waits for every answer
        sends = handle(u, msg(v, 1, Kind.ACCEPT if v in accepting else Kind.REJECT))
    assert u.accepted == accepting and u.line is Line.AWAIT_STATE
    expected = []
    for i in range(0, k - 1, 2):
        expected += [msg(1, accepting[i], Kind.PAIR, accepting[i + 1]), msg(1, accepting[i + 1], Kind.PAIR, accepting[i])]
    if k % 2:
        expected.append(msg(1, accepting[-1], Kind.NO_PAIR))
    assert sends == expected
    assert u.state is State.ISOLATED  # line 4 waits: nobody has probed it


def test_with_no_neighbour_line_3_runs_at_once_and_chosen_is_pred() -> None:
    u = node(1, line=Line.START)
    assert begin(u, Coins([Direction.SUCC])) == []
    assert u.line is Line.AWAIT_STATE and u.chosen is Direction.PRED and u.succ is None
