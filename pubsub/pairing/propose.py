"""The propose daemon (paper 004, §3.1.1): what a node does with (v, u, propose), by state.

From the copy's pseudo-code:

* ISOLATED: PAIRED with v, answer ``accept``;
* PROBED: if ``chosen`` is v, hold the proposal (``waiting`` = v, PROPOSED) and answer
  later; otherwise answer ``reject_propose``.

The copy ends there.  The other three cases, INFERRED from the state descriptions:

* PROPOSING: a proposal from the side the coin points to is accepted at once (PAIRED with
  v, ``accept``), any other refused at once (``reject_propose``) -- the PROPOSING
  description says exactly this;
* PAIRED: every proposal is refused, with ``paired`` -- the PAIRED description says it
  refuses, and ``paired`` is the one answer of line 5 no other case gives (line 5 then
  keeps the neighbour: it will be part of a merged node, not a refuser by coin);
* PROPOSED: a second proposal cannot come under FIFO channels (the one other node that may
  propose to a PROPOSED node is its predecessor, whose ``no_pair`` always arrives first and
  ends PROPOSED), so it raises `ProtocolViolation`.
"""

from __future__ import annotations

from pubsub.pairing.messages import Kind, Message
from pubsub.pairing.node import PairingNode, ProtocolViolation
from pubsub.pairing.states import State


def on_propose(node: PairingNode, msg: Message) -> list[Message]:
    """One proposal in, its answer (if any is due now) out."""
    v = msg.sender
    if node.state is State.ISOLATED:
        node.state = State.PAIRED
        node.obj = v
        return [Message(node.ident, v, Kind.ACCEPT)]
    if node.state is State.PROBED:
        if node.chosen_node() == v:
            node.waiting = v
            node.state = State.PROPOSED
            return []
        return [Message(node.ident, v, Kind.REJECT_PROPOSE)]
    if node.state is State.PROPOSING:  # INFERRED
        if node.chosen_node() == v:
            node.state = State.PAIRED
            node.obj = v
            return [Message(node.ident, v, Kind.ACCEPT)]
        return [Message(node.ident, v, Kind.REJECT_PROPOSE)]
    if node.state is State.PAIRED:  # INFERRED
        return [Message(node.ident, v, Kind.PAIRED)]
    raise ProtocolViolation(f"{node.ident}: a second proposal ({v}) while holding {node.waiting}'s")  # INFERRED
