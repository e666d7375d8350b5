"""The main thread of the pairing protocol (paper 004, §3.1.1, lines 1-7), as steps that
never block: each runs until the thread would wait and returns what it sends.

Line 1 resets the node and flips the coin; line 2 probes every neighbour and waits for all
answers; line 3 pairs off the successors that accepted (`pair_successors`); line 4 waits
while the state says nothing yet; line 5 proposes the way the coin points and waits for the
answer; line 6 (paired) hands over to the merge; line 7 (not paired) starts again.

INFERRED, and why:

* Line 4 also waits while the node is PROPOSED.  The copy's loop names only ISOLATED and
  PROBED, but a PROPOSED node that went on would reach line 7 and begin again with a
  proposal it owes an answer, and the PROPOSED description says the node keeps that
  proposal until its predecessor's notice changes its state.
* Line 1 also forgets the last phase's pred, succ, obj, waiting and proposed_to: the state
  it sets, ISOLATED, is described as having no predecessor.
* Line 6's merge is §3.2, which is not built: the thread stops at `Line.MERGE` and the
  driver (`pubsub.sim.pairing`) joins the pair.  Line 7 stops at `Line.RESTART`, and the
  driver calls `begin` again when it starts the next phase.  Until then the node's daemons
  go on answering with the state it ended in; should one pair it (a proposal that comes
  late from the side its coin points to: a neighbour that refused it while its own line 3
  was unfinished, then found it had no successor and turned to its predecessor), the
  thread moves on to line 6.  In the copy the node would be back at line 1, ISOLATED, and
  accept that proposal too.
"""

from __future__ import annotations

import random

from pubsub.pairing.messages import Kind, Message
from pubsub.pairing.node import PairingNode, ProtocolViolation
from pubsub.pairing.states import Direction, Line, State

#: The states line 4 waits in (the copy's two, and PROPOSED: see the module docstring).
WAIT_STATES = frozenset({State.ISOLATED, State.PROBED, State.PROPOSED})


def begin(node: PairingNode, rng: random.Random) -> list[Message]:
    """Lines 1 and 2: become ISOLATED, draw ``chosen`` uniformly from {pred, succ}, probe every
    neighbour (in identity order); then go on as far as the thread can (`advance`: with no
    neighbour, line 3 at once)."""
    node.state = State.ISOLATED
    node.chosen = rng.choice((Direction.PRED, Direction.SUCC))
    node.pred = node.succ = node.obj = node.waiting = node.proposed_to = None
    node.neighbors.discard(node.ident)
    node.probed = set(node.neighbors)
    node.accepted = []
    node.line = Line.AWAIT_REPLIES
    sends = [Message(node.ident, v, Kind.PROBE) for v in sorted(node.probed)]
    return sends + advance(node)


def pair_successors(node: PairingNode) -> list[Message]:
    """Line 3: with v1 .. vk the nodes that accepted the probes, for each odd i < k tell vi it
    is paired with vi+1 and vi+1 that it is paired with vi; if k is odd keep vk as ``succ``
    and tell it ``no_pair``, else set ``chosen`` to pred (there is no successor to propose
    to).

    This follows the copy's pseudo-code, which keeps the last successor when k is odd and
    none when k is even.  Its prose says the node always keeps the first successor and pairs
    off only the later ones; where they differ the pseudo-code is taken (docs/pairing.md).
    """
    vs = node.accepted
    sends: list[Message] = []
    for i in range(0, len(vs) - 1, 2):
        sends.append(Message(node.ident, vs[i], Kind.PAIR, vs[i + 1]))
        sends.append(Message(node.ident, vs[i + 1], Kind.PAIR, vs[i]))
    if len(vs) % 2 == 1:
        node.succ = vs[-1]
        sends.append(Message(node.ident, node.succ, Kind.NO_PAIR))
    else:
        node.chosen = Direction.PRED
    return sends


def probe_answer(node: PairingNode, msg: Message) -> None:
    """Line 2's wait: one answer to a probe (``accept`` or ``reject``) arrives."""
    if node.line is not Line.AWAIT_REPLIES or msg.sender not in node.probed:
        raise ProtocolViolation(f"{node.ident}: an answer to a probe it has not sent: {msg}")
    node.probed.discard(msg.sender)
    if msg.kind is Kind.ACCEPT:
        node.accepted.append(msg.sender)


def proposal_answer(node: PairingNode, msg: Message) -> None:
    """Line 5's wait: the answer to the node's proposal.  ``accept``: PAIRED with ``chosen``;
    ``reject_propose``: drop ``chosen`` from the neighbours; ``paired``: nothing."""
    if node.line is not Line.AWAIT_ANSWER or msg.sender != node.proposed_to:
        raise ProtocolViolation(f"{node.ident}: an answer to a proposal it has not sent: {msg}")
    if msg.kind is Kind.ACCEPT:
        if node.state is State.PAIRED and node.obj != msg.sender:
            raise ProtocolViolation(f"{node.ident}: accepted by {msg.sender} but paired with {node.obj}")
        node.state = State.PAIRED
        node.obj = msg.sender
    elif msg.kind is Kind.REJECT_PROPOSE:
        node.neighbors.discard(msg.sender)
    node.line = _line_6_or_7(node)


def advance(node: PairingNode) -> list[Message]:
    """Run the thread from its current wait as far as it goes without waiting: line 3 once
    every probe is answered, then past line 4 once the state allows, proposing (line 5) if
    PROPOSING, else stopping at line 6 or 7."""
    sends: list[Message] = []
    if node.line is Line.AWAIT_REPLIES and not node.probed:
        sends += pair_successors(node)
        node.line = Line.AWAIT_STATE
    if node.line is Line.AWAIT_STATE and node.state not in WAIT_STATES:
        if node.state is State.PROPOSING:
            target = node.chosen_node()
            if target is None:
                raise ProtocolViolation(f"{node.ident}: PROPOSING towards {node.chosen.value}, which it lacks")
            node.proposed_to = target
            node.line = Line.AWAIT_ANSWER
            sends.append(Message(node.ident, target, Kind.PROPOSE))
        else:
            node.line = _line_6_or_7(node)
    if node.line is Line.RESTART and node.state is State.PAIRED:
        node.line = Line.MERGE  # paired by a proposal while it rested at line 7
    return sends


def _line_6_or_7(node: PairingNode) -> Line:
    return Line.MERGE if node.state is State.PAIRED else Line.RESTART
