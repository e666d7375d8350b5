"""The pair and no_pair daemons (paper 004, §3.1.1) -- INFERRED: the copy announces four
daemon threads and ends after the first two (probe, propose), so these two are read off the
state descriptions.

A node hears from its predecessor exactly once per phase, after the predecessor's line 3:
(p, u, pair, w) -- u is paired with w -- or (p, u, no_pair) -- u is p's one kept successor
and not paired off.  It is then PROBED or PROPOSED (nothing else moves a node out of
PROBED, and nothing but the notice moves it out of PROPOSED).

* pair, w: PAIRED with w.  A PROPOSED node answers the proposal it held with ``paired``,
  as a PAIRED node answers any proposal (`pubsub.pairing.propose`).
* no_pair: PROPOSING.  A PROPOSED node accepts the proposal it held, which came from the
  side its coin points to -- a PROPOSING node accepts such a proposal at once -- and is
  PAIRED with its proposer, without proposing itself.

A notice from anyone but ``pred``, or in another state, cannot happen in the copy's model
and raises `ProtocolViolation`.
"""

from __future__ import annotations

from pubsub.pairing.messages import Kind, Message
from pubsub.pairing.node import PairingNode, ProtocolViolation
from pubsub.pairing.states import State


def _check(node: PairingNode, msg: Message) -> None:
    if msg.sender != node.pred or node.state not in (State.PROBED, State.PROPOSED):
        raise ProtocolViolation(f"{node.ident} ({node.state.value}, pred {node.pred}): unexpected {msg}")


def on_pair(node: PairingNode, msg: Message) -> list[Message]:
    """(p, u, pair, w): PAIRED with w; a held proposal is answered ``paired``."""
    _check(node, msg)
    if msg.about is None or msg.about == node.ident:
        raise ProtocolViolation(f"{node.ident}: a pair notice without a partner: {msg}")
    sends = []
    if node.state is State.PROPOSED and node.waiting is not None:
        sends.append(Message(node.ident, node.waiting, Kind.PAIRED))
        node.waiting = None
    node.state = State.PAIRED
    node.obj = msg.about
    return sends


def on_no_pair(node: PairingNode, msg: Message) -> list[Message]:
    """(p, u, no_pair): PROPOSING; a held proposal is accepted and the node PAIRED."""
    _check(node, msg)
    if node.state is State.PROPOSED and node.waiting is not None:
        partner, node.waiting = node.waiting, None
        node.state = State.PAIRED
        node.obj = partner
        return [Message(node.ident, partner, Kind.ACCEPT)]
    node.state = State.PROPOSING
    return []
